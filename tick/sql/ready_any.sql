-- Whether a job may be ready now (SPEC §14, decision 0040): asked last in a
-- tick's maintenance pass, after its rescue, so that a run with nothing to
-- do ends without its claim (whose statements' parse and plan were most of
-- an empty tick's exchanges on a new connection). Conservative: any ready
-- job of any kind or queue says yes. Read from jobs_ready_idx one priority
-- at a time (a skip scan: the next priority, then a job of it due now), so
-- a backlog of jobs due later costs a probe per priority, not a read of
-- them; past 64 priorities it says yes without looking further.
WITH RECURSIVE priorities AS (
    (SELECT -j.priority::int AS p, 1 AS n
     FROM awc.jobs AS j
     WHERE j.state = 'PENDING' AND j.waiting = 0
     ORDER BY -j.priority::int
     LIMIT 1)
    UNION ALL
    SELECT (SELECT -j.priority::int
            FROM awc.jobs AS j
            WHERE j.state = 'PENDING' AND j.waiting = 0 AND -j.priority::int > s.p
            ORDER BY -j.priority::int
            LIMIT 1),
           s.n + 1
    FROM priorities AS s
    WHERE s.p IS NOT NULL AND s.n < 64
)
SELECT EXISTS (
    SELECT 1
    FROM priorities AS s
    WHERE s.p IS NOT NULL
      AND (s.n >= 64 OR EXISTS (SELECT 1
                                FROM awc.jobs AS j
                                WHERE j.state = 'PENDING' AND j.waiting = 0
                                  AND -j.priority::int = s.p AND j.run_at <= now()))
)
