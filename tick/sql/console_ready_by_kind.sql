-- The console's overview: ready jobs per kind (SPEC §19). The kinds are
-- found by skipping through jobs_ready_kind_idx one kind at a time (at most
-- %(kinds)s of them), and each kind's count stops at %(cap)s, so the work is
-- bounded whatever the backlog.
WITH RECURSIVE kinds AS (
    (SELECT kind FROM awc.jobs WHERE state = 'PENDING' ORDER BY kind LIMIT 1)
    UNION ALL
    SELECT (SELECT j.kind FROM awc.jobs AS j
            WHERE j.state = 'PENDING' AND j.kind > k.kind
            ORDER BY j.kind LIMIT 1)
    FROM kinds AS k
    WHERE k.kind IS NOT NULL
)
SELECT k.kind,
       (SELECT count(*) FROM (SELECT 1 FROM awc.jobs AS j
                              WHERE j.state = 'PENDING' AND j.kind = k.kind
                              LIMIT %(cap)s) AS capped) AS pending,
       (SELECT count(*) FROM (SELECT 1 FROM awc.jobs AS j
                              WHERE j.state = 'RUNNING' AND j.locked_until IS NOT NULL
                                AND j.kind = k.kind
                              LIMIT %(cap)s) AS capped) AS running
FROM (SELECT kind FROM kinds WHERE kind IS NOT NULL LIMIT %(kinds)s) AS k
