-- The database's clock (SPEC §15): every time decision awc makes (when a
-- schedule next fires, when a delayed job runs) is on this clock, the one
-- the claim and the due check compare with, never the host's.
SELECT now()
