-- Mark the hourly prune done.
UPDATE awc.maintenance SET last_run_at = now() WHERE step = 'prune'
