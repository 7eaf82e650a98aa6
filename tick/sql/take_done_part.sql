-- The emptied part takes completions from now on (SPEC §24).
UPDATE awc.done_parts SET current = true, began = now() WHERE slot = %(slot)s
