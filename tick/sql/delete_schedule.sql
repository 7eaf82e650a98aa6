-- Remove a schedule (SPEC §15); its ledger stays until pruned by age.
DELETE FROM awc.schedules WHERE name = %(name)s RETURNING name
