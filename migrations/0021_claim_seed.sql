-- A new process's first claim starts where the last one left off (SPEC §24,
-- docs/decisions/0027). Under a pinned horizon a claimer with no cursor
-- walks the ready index from its start, past an entry for every job claimed
-- since the pin (229 ms and 42,299 buffers after 1M jobs): every `awc tick`,
-- Lambda invocation and restarted loop paid that once. A run that claimed
-- without a filter now leaves its claimer's whole cursor on its history row,
-- typed, so a row written by hand cannot hold a cursor the claim would
-- refuse; the next process reads the newest one in its first exchange and
-- walks from there (tick/engine/cursor.py says why that is exact).
CREATE TYPE awc.claim_seed AS (
    after_p       integer,      -- the cursor: a key of jobs_ready_idx,
    after_run_at  timestamptz,  -- (-priority, run_at, id)
    after_id      bigint,
    xmax          xid8,         -- the snapshot of the claim that moved it
    xip           xid8[],
    rewind_p      integer,      -- the first key passed over with jobs due later
    rewind_run_at timestamptz,
    rewind_id     bigint,
    rewind_due    timestamptz,  -- when the earliest of those is due
    jobs          bigint        -- awc.jobs_id_seq then: how much a probe from it reads
);
ALTER TABLE awc.ticks ADD COLUMN cursor awc.claim_seed;
-- The newest cursor, one probe away however many rows are without one.
CREATE INDEX ticks_cursor_idx ON awc.ticks (id) WHERE (cursor).xmax IS NOT NULL;
-- The cursor as finish_tick and record_tick store it: null without one.
CREATE FUNCTION awc.seed_of(after_p integer, after_run_at timestamptz, after_id bigint,
                           xmax xid8, xip xid8[], rewind_p integer,
                           rewind_run_at timestamptz, rewind_id bigint,
                           rewind_in float8) RETURNS awc.claim_seed
    LANGUAGE sql AS $$
    SELECT CASE WHEN after_p IS NOT NULL AND xmax IS NOT NULL THEN
        ROW(after_p, after_run_at, after_id, xmax, xip, rewind_p, rewind_run_at, rewind_id,
            CASE WHEN rewind_p IS NOT NULL THEN
                now() + make_interval(secs => least(greatest(coalesce(rewind_in, 0), 0), 1e9)) END,
            coalesce(pg_sequence_last_value('awc.jobs_id_seq'), 0))::awc.claim_seed END
$$;
