-- A rate limit's claims out of its window (SPEC §18, §23). A claim forgets
-- the old claims of the limits and keys it counts; a key never claimed
-- again, or a limit whose rate was cleared, kept its rows for ever (a
-- per-key rate over many short-lived tenants: a row per job they ran). At
-- most %(limit)s rows a batch; `after_secs` is not used (each row's limit
-- says how long it counts).
DELETE FROM awc.limit_claims AS c
WHERE c.ctid = ANY (ARRAY(
    SELECT o.ctid
    FROM awc.limit_claims AS o
    JOIN awc.limits AS l ON l.scope = o.scope AND l.name = o.name
    WHERE l.per_secs IS NULL OR o.at <= now() - make_interval(secs => l.per_secs)
    LIMIT %(limit)s))
  -- a claim may have forgotten it meanwhile, and a row may be counted again
  AND EXISTS (SELECT 1 FROM awc.limits AS l
              WHERE l.scope = c.scope AND l.name = c.name
                AND (l.per_secs IS NULL OR c.at <= now() - make_interval(secs => l.per_secs)))
