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
-- current part the statement deletes nothing. Each part's insert tests its
-- slot once, before it reads a row: the seven parts that are not current
-- read nothing (joined to `part`, each walked every completed row).
-- The claim's token stays on the row: an outcome sent again after its answer
-- was lost with the connection is refused by the fence, and lost_claims.sql
-- reads by the token that the outcome recorded was this holder's own.
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
               d.max_attempts, d.run_at, NULL, NULL, d.claim_token,
               (%(results)s::jsonb[])[array_position(%(ids)s::bigint[], d.id)],
               d.last_error, d.dedupe_key, d.created_at, now(), d.started_at, now(),
               d.checkpoint, d.progress, d.continues, d.errors, d.ready_xid,
               d.timeout_secs, d.waiting, d.has_children, d.on_parent_failure,
               d.trace_context, d.key, d.waited)::awc.jobs AS r
    FROM done AS d
), part_0 AS (
    INSERT INTO awc.jobs_done_0 SELECT (m.r).* FROM moved AS m
    WHERE EXISTS (SELECT 1 FROM part WHERE part.slot = 0)
), part_1 AS (
    INSERT INTO awc.jobs_done_1 SELECT (m.r).* FROM moved AS m
    WHERE EXISTS (SELECT 1 FROM part WHERE part.slot = 1)
), part_2 AS (
    INSERT INTO awc.jobs_done_2 SELECT (m.r).* FROM moved AS m
    WHERE EXISTS (SELECT 1 FROM part WHERE part.slot = 2)
), part_3 AS (
    INSERT INTO awc.jobs_done_3 SELECT (m.r).* FROM moved AS m
    WHERE EXISTS (SELECT 1 FROM part WHERE part.slot = 3)
), part_4 AS (
    INSERT INTO awc.jobs_done_4 SELECT (m.r).* FROM moved AS m
    WHERE EXISTS (SELECT 1 FROM part WHERE part.slot = 4)
), part_5 AS (
    INSERT INTO awc.jobs_done_5 SELECT (m.r).* FROM moved AS m
    WHERE EXISTS (SELECT 1 FROM part WHERE part.slot = 5)
), part_6 AS (
    INSERT INTO awc.jobs_done_6 SELECT (m.r).* FROM moved AS m
    WHERE EXISTS (SELECT 1 FROM part WHERE part.slot = 6)
), part_7 AS (
    INSERT INTO awc.jobs_done_7 SELECT (m.r).* FROM moved AS m
    WHERE EXISTS (SELECT 1 FROM part WHERE part.slot = 7)
), settled AS MATERIALIZED (
    -- SPEC §20 (docs/decisions/0033, migration 0022): the completed parents
    -- count their children down, and the jobs a producer waits for are
    -- announced, in one call made only when the statement has either: jobs
    -- with neither pay this one pass over their rows, nothing more.
    SELECT awc.settle_completed(f.parents, f.waited) AS ready
    FROM (SELECT array_agg((m.r).id ORDER BY (m.r).id) FILTER (WHERE (m.r).has_children)
                     AS parents,
                 array_agg((m.r).id ORDER BY (m.r).id) FILTER (WHERE (m.r).waited) AS waited
          FROM moved AS m) AS f
    WHERE f.parents IS NOT NULL OR f.waited IS NOT NULL
)
SELECT (m.r).id, (m.r).state FROM moved AS m
-- Always true: it makes the statement run `settled`, which nothing else reads.
WHERE (SELECT count(*) FROM settled) >= 0
