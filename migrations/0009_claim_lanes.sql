-- Global limits (SPEC §18, docs/decisions/0018-claims-by-lane): ready jobs
-- by lane, a (kind, queue, priority) of their own, then in claim order. When
-- a limit exists, the claim reads each lane it may draw from apart, with
-- "run_at <= now()" a range of this index, so a paused or saturated kind or
-- queue is a lane the claim never opens: its backlog costs other work
-- nothing, whatever its size. It replaces jobs_ready_kind_idx (kind leading,
-- it still finds a kind's jobs). Building it reads the whole table once,
-- holding off writes meanwhile, as 0003 did.
DROP INDEX awc.jobs_ready_kind_idx;

CREATE INDEX jobs_ready_lane_idx ON awc.jobs (kind, queue, priority, run_at, id)
    WHERE state = 'PENDING';
