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

-- Domain records (SPEC §10).

CREATE TABLE awc.tenants (
    id         text PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE awc.workspaces (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id      text NOT NULL REFERENCES awc.tenants (id),
    state          text NOT NULL DEFAULT 'ACTIVE',
    expires_at     timestamptz NOT NULL,
    expiring_since timestamptz,
    keep_last      integer,
    version        integer NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workspaces_state_check CHECK (state IN ('ACTIVE', 'EXPIRING', 'EXPIRED')),
    CONSTRAINT workspaces_keep_last_check CHECK (keep_last IS NULL OR keep_last >= 0)
);
CREATE INDEX workspaces_tenant_idx ON awc.workspaces (tenant_id);

CREATE TABLE awc.snapshots (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id    text NOT NULL REFERENCES awc.tenants (id),
    workspace_id uuid REFERENCES awc.workspaces (id),
    root_digest  text NOT NULL,
    state        text NOT NULL DEFAULT 'VALIDATING',
    verdict      jsonb,
    version      integer NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT snapshots_state_check
        CHECK (state IN ('VALIDATING', 'READY', 'FAILED', 'DEGRADED', 'DELETED')),
    CONSTRAINT snapshots_root_digest_check CHECK (root_digest ~ '^sha256:[0-9a-f]{64}$')
);
-- GC's mark: a tenant's live snapshots.
CREATE INDEX snapshots_tenant_state_idx ON awc.snapshots (tenant_id, state);
-- Retention: a workspace's snapshots, newest first.
CREATE INDEX snapshots_workspace_idx ON awc.snapshots (workspace_id, created_at DESC);

CREATE TABLE awc.gc_pins (
    tenant_id   text NOT NULL REFERENCES awc.tenants (id),
    digest      text NOT NULL,
    snapshot_id uuid REFERENCES awc.snapshots (id),
    reason      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT gc_pins_unique UNIQUE (tenant_id, digest, reason)
);
CREATE INDEX gc_pins_snapshot_idx ON awc.gc_pins (snapshot_id);

CREATE TABLE awc.gc_epochs (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id     text NOT NULL REFERENCES awc.tenants (id),
    state         text NOT NULL DEFAULT 'RUNNING',
    dry_run       boolean NOT NULL DEFAULT false,
    marked        integer NOT NULL DEFAULT 0,
    candidates    integer NOT NULL DEFAULT 0,
    deleted       integer NOT NULL DEFAULT 0,
    started_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    error         text,
    holder_job_id bigint,
    holder_token  uuid,
    CONSTRAINT gc_epochs_state_check CHECK (state IN ('RUNNING', 'COMPLETED', 'ABORTED'))
);
-- One epoch per tenant at a time.
CREATE UNIQUE INDEX gc_epochs_one_running_idx ON awc.gc_epochs (tenant_id)
    WHERE state = 'RUNNING';

CREATE TABLE awc.audit_events (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at        timestamptz NOT NULL DEFAULT now(),
    tenant_id text,
    event     text NOT NULL,
    subject   text NOT NULL,
    detail    jsonb,
    job_id    bigint
);
-- A job that runs twice records its event once.
CREATE UNIQUE INDEX audit_events_job_idx ON awc.audit_events (job_id, event)
    WHERE job_id IS NOT NULL;
CREATE INDEX audit_events_subject_idx ON awc.audit_events (subject, at);
