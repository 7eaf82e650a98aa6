-- The declared schema of awc: what all migrations together must produce.
-- tests/test_schema.py applies this file to one database and every migration
-- to another, and compares the two catalogs. Change both together.

CREATE SCHEMA awc;

CREATE TABLE awc.schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE awc.jobs (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind          text        NOT NULL,
    payload       jsonb       NOT NULL DEFAULT '{}'::jsonb,
    state         text        NOT NULL DEFAULT 'PENDING',
    queue         text        NOT NULL DEFAULT 'default',
    priority      smallint    NOT NULL DEFAULT 0,
    attempts      integer     NOT NULL DEFAULT 0,
    max_attempts  integer     NOT NULL DEFAULT 5,
    run_at        timestamptz NOT NULL DEFAULT now(),
    locked_by     text,
    locked_until  timestamptz,
    claim_token   uuid,
    result        jsonb,
    last_error    text,
    dedupe_key    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    finished_at   timestamptz,
    CONSTRAINT jobs_state_check
        CHECK (state IN ('PENDING', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED')),
    CONSTRAINT jobs_max_attempts_check CHECK (max_attempts >= 1),
    CONSTRAINT jobs_kind_check CHECK (kind <> '')
);

CREATE INDEX jobs_ready_idx ON awc.jobs (priority DESC, run_at, id) WHERE state = 'PENDING';
CREATE INDEX jobs_ready_queue_idx ON awc.jobs (queue, priority DESC, run_at, id)
    WHERE state = 'PENDING';
CREATE INDEX jobs_lease_idx ON awc.jobs (locked_until) WHERE state = 'RUNNING';
CREATE INDEX jobs_finished_idx ON awc.jobs (finished_at)
    WHERE state IN ('COMPLETED', 'CANCELLED');
CREATE UNIQUE INDEX jobs_dedupe_key_idx ON awc.jobs (dedupe_key)
    WHERE dedupe_key IS NOT NULL AND state IN ('PENDING', 'RUNNING');

CREATE FUNCTION awc.notify_jobs() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('awc_jobs', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_notify AFTER INSERT ON awc.jobs
    FOR EACH STATEMENT EXECUTE FUNCTION awc.notify_jobs();

CREATE TABLE awc.maintenance (
    step        text PRIMARY KEY,
    last_run_at timestamptz NOT NULL DEFAULT '-infinity'
);
