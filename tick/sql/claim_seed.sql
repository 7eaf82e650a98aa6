-- The cursor a new process's first claim starts from (SPEC §24, decision
-- 0027): the newest one a run left on its history row (finish_tick,
-- record_tick), if a probe from it reads at most %(most)s jobs enqueued
-- since, and if its snapshot is not ahead of this one (a database restored
-- from a dump starts its transaction ids again). None: walk from the start.
-- Its times come back as text in this session's style, as a claim's mark does.
-- Keys as the mark's: -priority, run_at as text, id, run_at in epoch seconds.
SELECT (s.c).after_p, (s.c).after_run_at::text, (s.c).after_id,
       extract(epoch FROM (s.c).after_run_at)::float8,
       (s.c).xmax::text, (s.c).xip::text[],
       (s.c).rewind_p, (s.c).rewind_run_at::text, (s.c).rewind_id,
       extract(epoch FROM (s.c).rewind_run_at)::float8,
       -- seconds until the earliest job it passed over is due
       CASE WHEN isfinite((s.c).rewind_due)
            THEN extract(epoch FROM (s.c).rewind_due)::float8 - extract(epoch FROM now())::float8
       END
FROM (SELECT t.cursor AS c FROM awc.ticks AS t
      WHERE (t.cursor).xmax IS NOT NULL  -- (a row value IS NOT NULL only when all its fields are)
      ORDER BY t.id DESC
      LIMIT 1) AS s
WHERE (s.c).after_p IS NOT NULL AND (s.c).after_run_at IS NOT NULL
  AND (s.c).after_id IS NOT NULL AND (s.c).xmax IS NOT NULL
  AND (s.c).xmax <= pg_snapshot_xmax(pg_current_snapshot())
  AND coalesce(pg_sequence_last_value('awc.jobs_id_seq'), 0) - coalesce((s.c).jobs, 0)
      BETWEEN 0 AND %(most)s
  AND cardinality(coalesce((s.c).xip, '{}')) <= 10000
