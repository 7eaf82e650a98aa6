-- Record Complete outcomes (SPEC §4.2, §5), fenced: a row is written only if
-- this claim still holds it. A job cancelled, rescued or re-claimed meanwhile
-- matches nothing and its outcome is discarded.
-- The batch's rows are taken by primary key (id = ANY) and each finds its own
-- token and result by its position in the arrays: with no join to the batch, no
-- plan can walk the RUNNING rows once per batch entry (tests/test_plans.py).
--
-- A completed job leaves the hot table (SPEC §24, docs/decisions/0030): it
-- is deleted there and inserted, completed, into the current finished part,
-- which retention truncates whole. The row is rebuilt column by column in
-- awc.jobs' order (`moved`), so a column added to awc.jobs without being
-- added here fails this statement loudly instead of losing its value
-- (tests/test_finished_parts.py holds the list to the table). With no
-- current part the statement deletes nothing.
WITH part AS MATERIALIZED (
    SELECT slot FROM awc.done_parts WHERE current
), done AS (
    DELETE FROM ONLY awc.jobs AS j
    WHERE j.id = ANY (%(ids)s::bigint[])
      AND j.claim_token = (%(tokens)s::uuid[])[array_position(%(ids)s::bigint[], j.id)]
      AND j.state = 'RUNNING'
      AND EXISTS (SELECT 1 FROM part)
    RETURNING j.*
), moved AS MATERIALIZED (
    SELECT ROW(d.id, d.kind, d.payload, 'COMPLETED', d.queue, d.priority, d.attempts,
               d.max_attempts, d.run_at, NULL, NULL, NULL,
               (%(results)s::jsonb[])[array_position(%(ids)s::bigint[], d.id)],
               d.last_error, d.dedupe_key, d.created_at, now(), d.started_at, now(),
               d.checkpoint, d.progress, d.continues, d.errors, d.ready_xid,
               d.timeout_secs, d.waiting, d.has_children, d.on_parent_failure,
               d.trace_context, d.key)::awc.jobs AS r
    FROM done AS d
), part_0 AS (
    INSERT INTO awc.jobs_done_0 SELECT (m.r).* FROM moved AS m, part WHERE part.slot = 0
), part_1 AS (
    INSERT INTO awc.jobs_done_1 SELECT (m.r).* FROM moved AS m, part WHERE part.slot = 1
), part_2 AS (
    INSERT INTO awc.jobs_done_2 SELECT (m.r).* FROM moved AS m, part WHERE part.slot = 2
), part_3 AS (
    INSERT INTO awc.jobs_done_3 SELECT (m.r).* FROM moved AS m, part WHERE part.slot = 3
), part_4 AS (
    INSERT INTO awc.jobs_done_4 SELECT (m.r).* FROM moved AS m, part WHERE part.slot = 4
), part_5 AS (
    INSERT INTO awc.jobs_done_5 SELECT (m.r).* FROM moved AS m, part WHERE part.slot = 5
), part_6 AS (
    INSERT INTO awc.jobs_done_6 SELECT (m.r).* FROM moved AS m, part WHERE part.slot = 6
), part_7 AS (
    INSERT INTO awc.jobs_done_7 SELECT (m.r).* FROM moved AS m, part WHERE part.slot = 7
)
SELECT (m.r).id, (m.r).state FROM moved AS m
