-- Jobs by kind and state, for `awc status`; a kind cut to 200 characters,
-- the longest a producer writes (one of megabytes, by plain SQL, printed
-- as a megabyte line).
SELECT left(kind, 200) AS kind, state, count(*)
FROM awc.jobs
GROUP BY 1, state
ORDER BY 1, state
