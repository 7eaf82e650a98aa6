-- A tick's history row is opened once, however often its first exchange is
-- sent (SPEC §16, docs/decisions/0035).
--
-- A tick whose connection was lost during its first exchange (the
-- maintenance pass, which opens its row) could not tell whether the row had
-- been written: sent again, the opening would leave a second row and the
-- first one shown as died, so the tick ended there, exit 1. A tick now names
-- its row with a random key (`row_key`) sent with each opening; the key is
-- unique, so an opening sent again returns the row the first one wrote, and
-- a failed tick's record completes that row instead of adding one. A loop's
-- stretches and rows written by an older awc have none.
ALTER TABLE awc.ticks ADD COLUMN row_key uuid;
CREATE UNIQUE INDEX ticks_row_key_idx ON awc.ticks (row_key) WHERE row_key IS NOT NULL;
