-- The console's overview chart (SPEC §19): completed, failed and retried
-- jobs per hour over the last 24 hours, summed from the tick history
-- (ticks_started_idx bounds the read to a day of rows). Every hour is
-- present, empty ones as zeros.
SELECT h.hour,
       coalesce(sum(t.completed), 0)::bigint,
       coalesce(sum(t.failed), 0)::bigint,
       coalesce(sum(t.retried), 0)::bigint
FROM generate_series(date_trunc('hour', now()) - interval '23 hours',
                     date_trunc('hour', now()), interval '1 hour') AS h (hour)
LEFT JOIN awc.ticks AS t
       ON t.started_at >= h.hour AND t.started_at < h.hour + interval '1 hour'
      AND t.started_at >= date_trunc('hour', now()) - interval '23 hours'
GROUP BY h.hour
ORDER BY h.hour
