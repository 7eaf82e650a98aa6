-- Finished history in parts that retention truncates (SPEC §24, docs/decisions/0030).
-- A COMPLETED job leaves the hot table at its fenced completion: the
-- completion deletes it there and inserts it, completed, into the current
-- part, one of eight tables that inherit awc.jobs (so `SELECT ... FROM
-- awc.jobs` still reads every job, whatever its state). Retention empties
-- the oldest part with TRUNCATE and makes it current, so pruning COMPLETED
-- jobs costs no DELETE and no VACUUM, and the hot table holds only live
-- jobs, dead letters and cancelled jobs. Each part accepts only COMPLETED
-- rows, so a statement that names a live state never reads the parts
-- (constraint exclusion).
CREATE TABLE awc.jobs_done_0 (
    CONSTRAINT jobs_done_0_state_check CHECK (state = 'COMPLETED')
) INHERITS (awc.jobs);
CREATE UNIQUE INDEX jobs_done_0_id_idx ON awc.jobs_done_0 (id);

CREATE TABLE awc.jobs_done_1 (
    CONSTRAINT jobs_done_1_state_check CHECK (state = 'COMPLETED')
) INHERITS (awc.jobs);
CREATE UNIQUE INDEX jobs_done_1_id_idx ON awc.jobs_done_1 (id);

CREATE TABLE awc.jobs_done_2 (
    CONSTRAINT jobs_done_2_state_check CHECK (state = 'COMPLETED')
) INHERITS (awc.jobs);
CREATE UNIQUE INDEX jobs_done_2_id_idx ON awc.jobs_done_2 (id);

CREATE TABLE awc.jobs_done_3 (
    CONSTRAINT jobs_done_3_state_check CHECK (state = 'COMPLETED')
) INHERITS (awc.jobs);
CREATE UNIQUE INDEX jobs_done_3_id_idx ON awc.jobs_done_3 (id);

CREATE TABLE awc.jobs_done_4 (
    CONSTRAINT jobs_done_4_state_check CHECK (state = 'COMPLETED')
) INHERITS (awc.jobs);
CREATE UNIQUE INDEX jobs_done_4_id_idx ON awc.jobs_done_4 (id);

CREATE TABLE awc.jobs_done_5 (
    CONSTRAINT jobs_done_5_state_check CHECK (state = 'COMPLETED')
) INHERITS (awc.jobs);
CREATE UNIQUE INDEX jobs_done_5_id_idx ON awc.jobs_done_5 (id);

CREATE TABLE awc.jobs_done_6 (
    CONSTRAINT jobs_done_6_state_check CHECK (state = 'COMPLETED')
) INHERITS (awc.jobs);
CREATE UNIQUE INDEX jobs_done_6_id_idx ON awc.jobs_done_6 (id);

CREATE TABLE awc.jobs_done_7 (
    CONSTRAINT jobs_done_7_state_check CHECK (state = 'COMPLETED')
) INHERITS (awc.jobs);
CREATE UNIQUE INDEX jobs_done_7_id_idx ON awc.jobs_done_7 (id);

-- Which part completions go to, and when each part last became current
-- (its era ended when the next one's began). Written by retention only,
-- never per job.
CREATE TABLE awc.done_parts (
    slot    smallint    PRIMARY KEY,
    current boolean     NOT NULL DEFAULT false,
    began   timestamptz,
    CONSTRAINT done_parts_slot_check CHECK (slot BETWEEN 0 AND 7)
);
CREATE UNIQUE INDEX done_parts_current_idx ON awc.done_parts (current) WHERE current;
INSERT INTO awc.done_parts (slot, current, began)
SELECT s, s = 0, CASE WHEN s = 0 THEN now() END FROM generate_series(0, 7) AS s;
