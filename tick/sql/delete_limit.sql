-- `awc limits clear` (SPEC §18); its claim log goes with it (ON DELETE CASCADE).
DELETE FROM awc.limits WHERE scope = %(scope)s AND name = %(name)s
RETURNING 1
