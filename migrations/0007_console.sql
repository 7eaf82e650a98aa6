-- The console (SPEC §19): what its pages look up that no index served.
-- Dead letters and cancelled jobs, newest first, for the overview's capped
-- counts and the jobs page's state filter; partial, so the rows every drain
-- writes (PENDING, RUNNING, COMPLETED) never enter it.
CREATE INDEX jobs_dead_idx ON awc.jobs (state, id)
    WHERE state IN ('FAILED', 'CANCELLED');

-- A job's detail page names the schedule fire that made it.
CREATE INDEX schedule_fires_job_idx ON awc.schedule_fires (job_id)
    WHERE job_id IS NOT NULL;
