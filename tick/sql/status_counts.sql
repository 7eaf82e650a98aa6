-- Jobs by kind and state, for `awc status`.
SELECT kind, state, count(*)
FROM awc.jobs
GROUP BY kind, state
ORDER BY kind, state
