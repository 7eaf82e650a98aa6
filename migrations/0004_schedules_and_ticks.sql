-- Durable schedules and their ledger (SPEC §15), and the history of every
-- run of the engine (SPEC §16).

CREATE TABLE awc.schedules (
    name          text PRIMARY KEY,
    cron          text        NOT NULL,
    timezone      text        NOT NULL DEFAULT 'UTC',
    kind          text        NOT NULL,
    payload       jsonb       NOT NULL DEFAULT '{}'::jsonb,
    queue         text        NOT NULL DEFAULT 'default',
    priority      smallint    NOT NULL DEFAULT 0,
    max_attempts  integer     NOT NULL DEFAULT 5,
    missed        text        NOT NULL DEFAULT 'latest',
    catchup_secs  integer     NOT NULL DEFAULT 3600,
    overlap       text        NOT NULL DEFAULT 'allow',
    paused        boolean     NOT NULL DEFAULT false,
    next_fire_at  timestamptz,
    last_fire_at  timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT schedules_name_check CHECK (char_length(name) BETWEEN 1 AND 200),
    CONSTRAINT schedules_kind_check CHECK (kind <> ''),
    CONSTRAINT schedules_max_attempts_check CHECK (max_attempts >= 1),
    CONSTRAINT schedules_missed_check CHECK (missed IN ('latest', 'all')),
    CONSTRAINT schedules_catchup_check CHECK (catchup_secs >= 0),
    CONSTRAINT schedules_overlap_check CHECK (overlap IN ('allow', 'skip'))
);
-- Firing takes the due schedules in due order, and a tick with none due
-- finds that out from this index alone.
CREATE INDEX schedules_due_idx ON awc.schedules (next_fire_at) WHERE NOT paused;

CREATE TABLE awc.schedule_fires (
    schedule     text        NOT NULL,
    fire_at      timestamptz NOT NULL,
    status       text        NOT NULL,
    job_id       bigint,
    recorded_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule, fire_at),
    CONSTRAINT schedule_fires_status_check
        CHECK (status IN ('enqueued', 'skipped', 'missed', 'overlap', 'manual'))
);
-- Pruning the ledger by age (AWC_SCHEDULE_HISTORY_SECS).
CREATE INDEX schedule_fires_recorded_idx ON awc.schedule_fires (recorded_at);

CREATE TABLE awc.ticks (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    driver          text        NOT NULL,
    worker_id       text        NOT NULL,
    correlation_id  text,
    started_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    deadline_at     timestamptz,
    claimed         integer     NOT NULL DEFAULT 0,
    completed       integer     NOT NULL DEFAULT 0,
    retried         integer     NOT NULL DEFAULT 0,
    failed          integer     NOT NULL DEFAULT 0,
    cancelled       integer     NOT NULL DEFAULT 0,
    released        integer     NOT NULL DEFAULT 0,
    discarded       integer     NOT NULL DEFAULT 0,
    continued       integer     NOT NULL DEFAULT 0,
    rescued         integer     NOT NULL DEFAULT 0,
    pruned          integer     NOT NULL DEFAULT 0,
    fired           integer     NOT NULL DEFAULT 0,
    stop_reason     text,
    error           text,
    CONSTRAINT ticks_driver_check CHECK (driver IN ('tick', 'loop', 'lambda', 'maintenance')),
    CONSTRAINT ticks_stop_reason_check
        CHECK (stop_reason IS NULL OR stop_reason IN ('drained', 'max_jobs', 'deadline', 'stopped'))
);
-- `awc ticks` newest first, per driver; pruning by age (AWC_TICK_HISTORY_SECS).
CREATE INDEX ticks_started_idx ON awc.ticks (started_at);
CREATE INDEX ticks_driver_idx ON awc.ticks (driver, started_at);
