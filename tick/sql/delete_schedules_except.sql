-- `awc schedules sync --prune`: remove every schedule the file does not name.
DELETE FROM awc.schedules WHERE name <> ALL (%(keep)s::text[]) RETURNING name
