-- Operator retry (SPEC §4.2), of one job (`awc retry`, the console) or many
-- (the console's bulk retry, SPEC §19): the FAILED or CANCELLED jobs among
-- %(ids)s return to PENDING with a fresh attempt budget, claimable at once,
-- and waiting loops are woken. A job whose dedupe key a live job holds stays
-- as it is (`awc retry` says so), and of several sharing one key only the
-- newest is revived, so the statement never trips the key's unique index
-- (a producer enqueueing that key at the same moment still can: the caller
-- reports it). The count of jobs revived, and their ids.
WITH reviving AS MATERIALIZED (
    -- The revived jobs' row triggers leave their descendants to the caller,
    -- which revives those of all of them at once after this statement
    -- (revive_descendants.sql, decision 0033).
    SELECT set_config('awc.reviving', 'on', true) AS set
), picked AS (
    SELECT DISTINCT ON (coalesce(j.dedupe_key, j.id::text)) j.id
    FROM ONLY awc.jobs AS j
    WHERE j.id = ANY(%(ids)s::bigint[])
      AND j.state IN ('FAILED', 'CANCELLED')
      -- Names no producer writes (a row of plain SQL) cannot enter the
      -- ready jobs' indexes: one such row failed the whole retry.
      AND length(j.kind) <= 200 AND length(j.queue) <= 200
      AND coalesce(length(j.key), 0) <= 200 AND coalesce(length(j.dedupe_key), 0) <= 1000
      AND (j.dedupe_key IS NULL OR NOT EXISTS (
               SELECT 1 FROM ONLY awc.jobs AS live
               WHERE live.dedupe_key = j.dedupe_key AND live.state IN ('PENDING', 'RUNNING')))
    ORDER BY coalesce(j.dedupe_key, j.id::text), j.id DESC
), revived AS (
    UPDATE ONLY awc.jobs AS j
    SET state = 'PENDING',
        attempts = 0,
        run_at = now(),
        result = NULL,
        finished_at = NULL,
        locked_by = NULL,
        locked_until = NULL,
        claim_token = NULL,
        updated_at = now()
    FROM picked, reviving
    WHERE j.id = picked.id
      AND j.state IN ('FAILED', 'CANCELLED')
    RETURNING j.id
)
SELECT count(*), pg_notify('awc_jobs', ''), coalesce(array_agg(id), '{}') FROM revived
