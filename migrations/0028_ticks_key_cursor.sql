-- The fair claim's key cursor on the history row (SPEC §23, decision 0034):
-- where the next process's rotation across keys starts. Each process kept
-- it for itself, so every `awc tick`, Lambda invocation or restarted loop
-- began at the first key: with more keys than one run claims, the keys
-- late in sort order were never served.
ALTER TABLE awc.ticks ADD COLUMN key_after text;
-- The newest key cursor, one probe away however many rows are without one.
CREATE INDEX ticks_key_after_idx ON awc.ticks (id) WHERE key_after IS NOT NULL;
