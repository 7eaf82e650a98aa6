-- AWC storage-maintenance records (SPEC §10). The control plane writes them;
-- the worker advances them, always by compare-and-set on version or state.

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
