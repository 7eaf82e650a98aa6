-- Every console action is recorded (SPEC §19): `console.<action>`, with the
-- job or schedule as the subject (job_id stays NULL: the same job may be
-- retried from the console many times, and audit_events_job_idx keeps one
-- row per job and event for the handlers' own events).
INSERT INTO awc.audit_events (event, subject, detail)
VALUES (%(event)s, %(subject)s, %(detail)s)
