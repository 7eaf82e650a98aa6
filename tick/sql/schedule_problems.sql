-- Schedules with a `missed` or `overlap` fire recorded in the last 24 hours
-- (`awc status`, SPEC §15, §22): a 03:00 run that never happened is named
-- without opening each schedule. Read through the ledger's recorded_at index,
-- so it costs the last day's fires whatever the ledger's length.
SELECT schedule, status, count(*) AS fires, max(fire_at) AS last_fire_at
FROM awc.schedule_fires
WHERE status IN ('missed', 'overlap')
  AND recorded_at >= now() - interval '24 hours'
GROUP BY schedule, status
ORDER BY schedule, status
LIMIT 1000
