-- A job dead-lettered by a Fail outcome (a handler's Fail, an unknown kind, a
-- payload its model refuses) is finished when it fails (SPEC §22). The Fail
-- statement stopped setting `finished_at` when it gained the error history,
-- so such jobs had none: `awc retry/discard --older-than` never matched
-- them, and AWC_DEAD_LETTER_RETENTION_SECS never pruned them. The statement
-- sets it again; the jobs failed meanwhile take the time of their last
-- change, which is when they failed.
UPDATE awc.jobs
SET finished_at = updated_at
WHERE state = 'FAILED' AND finished_at IS NULL;
