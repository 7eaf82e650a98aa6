"""Screenshots of every console page for the README (SPEC §19).

    python -m tests.screenshots [docs/console]

Creates a scratch database on DATABASE_URL's server (else the machine's
127.0.0.1:5432), fills it with a day of plausible history, starts `awc ui`
and saves one PNG per page with the headless Chromium the browser tests use.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from tests.support import ROOT, fresh_database, new_browser, sign_in, start_console, stop
from tick.migrate import migrate

DEMO = """
INSERT INTO awc.jobs (kind, queue, state, attempts, payload, last_error, run_at, started_at,
                      finished_at, updated_at, created_at)
SELECT (ARRAY['email.send', 'report.build', 'snapshot.validate', 'gc.sweep',
              'webhook.deliver'])[1 + n % 5],
       (ARRAY['default', 'reports', 'maintenance'])[1 + n % 3],
       (ARRAY['COMPLETED', 'COMPLETED', 'COMPLETED', 'PENDING', 'COMPLETED', 'COMPLETED',
              'COMPLETED', 'COMPLETED', 'COMPLETED', 'COMPLETED', 'COMPLETED', 'FAILED',
              'COMPLETED', 'CANCELLED'])[1 + n % 14],
       1 + n % 3, jsonb_build_object('tenant', 'acme', 'n', n, 'to', 'user' || n || '@example.com'),
       CASE WHEN n % 14 = 11 THEN 'TimeoutError: upstream did not answer within 30 s' END,
       now() - n * interval '7 seconds', now() - n * interval '7 seconds',
       CASE WHEN n % 14 NOT IN (3) THEN now() - n * interval '7 seconds' + interval '2 s' END,
       now() - n * interval '7 seconds', now() - n * interval '7 seconds' - interval '1 s'
FROM generate_series(1, 5000) AS n;
UPDATE awc.jobs SET state = 'RUNNING', locked_by = 'awc-loop-1',
       locked_until = now() + interval '4 minutes', claim_token = gen_random_uuid(),
       progress = 0.35, checkpoint = '{"next_tree": "b7e1f0", "done": 35000}'::jsonb,
       continues = 2, finished_at = NULL
WHERE id IN (4, 18, 32);
INSERT INTO awc.ticks (driver, worker_id, started_at, finished_at, deadline_at, claimed,
                       completed, retried, failed, fired, stop_reason)
SELECT (ARRAY['lambda', 'loop', 'tick', 'maintenance'])[1 + n % 4],
       (ARRAY['awc-lambda', 'awc-loop-1', 'awc-cron', 'awc-maint'])[1 + n % 4],
       now() - n * interval '4 minutes', now() - n * interval '4 minutes' + interval '3 s',
       now() - n * interval '4 minutes' + interval '55 s',
       20 + (n * 7) % 40, 20 + (n * 7) % 40 - n % 4 - n % 3, n % 4, n % 3, n % 2, 'drained'
FROM generate_series(1, 360) AS n;
INSERT INTO awc.ticks (driver, worker_id, started_at, deadline_at, claimed)
VALUES ('tick', 'awc-cron', now() - interval '97 minutes', now() - interval '96 minutes', 12);
INSERT INTO awc.ticks (driver, worker_id, started_at, finished_at, error)
VALUES ('lambda', 'awc-lambda', now() - interval '3 hours', now() - interval '3 hours',
        'database: could not connect to db.internal:5432');
INSERT INTO awc.schedules (name, cron, timezone, kind, next_fire_at, last_fire_at, paused)
VALUES ('nightly-report', '0 3 * * *', 'Europe/Berlin', 'report.build',
        now() + interval '20 hours', now() - interval '4 hours', false),
       ('hourly-gc', '0 * * * *', 'UTC', 'gc.sweep', now() + interval '31 minutes',
        now() - interval '29 minutes', false),
       ('validate-snapshots', '*/15 * * * *', 'UTC', 'snapshot.validate',
        now() + interval '6 minutes', now() - interval '9 minutes', false),
       ('weekly-digest', '0 8 * * 1', 'America/New_York', 'email.send',
        now() + interval '5 days', now() - interval '2 days', true);
INSERT INTO awc.schedule_fires (schedule, fire_at, status, job_id)
SELECT 'hourly-gc', date_trunc('hour', now()) - n * interval '1 hour',
       CASE WHEN n = 5 THEN 'missed' ELSE 'enqueued' END, CASE WHEN n = 5 THEN NULL ELSE n * 10 END
FROM generate_series(0, 23) AS n;
INSERT INTO awc.schedule_fires (schedule, fire_at, status, job_id)
VALUES ('nightly-report', now() - interval '4 hours', 'enqueued', 2),
       ('validate-snapshots', now() - interval '9 minutes', 'enqueued', 8);
INSERT INTO awc.limits (scope, name, max_running, rate, per_secs, paused, paused_from)
VALUES ('kind', 'webhook.deliver', 4, 100, 60, false, NULL),
       ('queue', 'reports', 2, NULL, NULL, false, NULL),
       ('kind', 'email.send', 0, NULL, NULL, true, NULL);
-- A dead letter with its error history (SPEC §22), stored oldest first as
-- the engine appends it: three runs, the last cut at its deadline where its
-- handler hung.
UPDATE awc.jobs SET attempts = 3, max_attempts = 3,
       last_error = 'DeadlineExceeded: deadline exceeded',
       errors = jsonb_build_array(
         jsonb_build_object('attempt', 1, 'at', now() - interval '31 minutes',
           'error', 'KeyError: "since"',
           'traceback', E'Traceback (most recent call last):\\n'
             || E'  File "/srv/app/reports/build.py", line 37, in build_report\\n'
             || E'    window = payload.options["since"]\\n'
             || E'KeyError: "since"\\n'),
         jsonb_build_object('attempt', 2, 'at', now() - interval '9 minutes',
           'error', 'TimeoutError: upstream did not answer within 30 s',
           'traceback', E'Traceback (most recent call last):\\n'
             || E'  File "/srv/app/reports/build.py", line 41, in build_report\\n'
             || E'    rows = fetch_ledger(payload.tenant, since=payload.since)\\n'
             || E'  File "/srv/app/reports/ledger.py", line 88, in fetch_ledger\\n'
             || E'    return client.get(f"/ledger/{tenant}", timeout=30).json()\\n'
             || E'TimeoutError: upstream did not answer within 30 s\\n'),
         jsonb_build_object('attempt', 3, 'at', now() - interval '77 seconds',
           'error', 'DeadlineExceeded: deadline exceeded',
           'traceback', E'Stack at the deadline (most recent call last):\\n'
             || E'  File "/srv/app/reports/build.py", line 41, in build_report\\n'
             || E'    rows = fetch_ledger(payload.tenant, since=payload.since)\\n'
             || E'  File "/srv/app/reports/ledger.py", line 88, in fetch_ledger\\n'
             || E'    return client.get(f"/ledger/{tenant}", timeout=None).json()\\n'))
WHERE id = 11;
-- A small graph (SPEC §20): an export fanned out to three thumbnails, an index
-- after all three, an email after the index; then the export and two
-- thumbnails finish (their trigger counts the children down) and one runs.
INSERT INTO awc.jobs (id, kind, queue)
VALUES (9001, 'export.run', 'reports'), (9002, 'thumbnail.make', 'default'),
       (9003, 'thumbnail.make', 'default'), (9004, 'thumbnail.make', 'default'),
       (9005, 'index.build', 'default'), (9006, 'email.send', 'default');
SELECT awc.declare_parents(n, ARRAY[9001]) FROM generate_series(9002, 9004) AS n;
SELECT awc.declare_parents(9005, ARRAY[9002, 9003, 9004], 'run');
SELECT awc.declare_parents(9006, ARRAY[9005]);
UPDATE awc.jobs SET state = 'COMPLETED', attempts = 1, started_at = now() - interval '3 minutes',
       finished_at = now() - interval '150 seconds', result = '{"rows": 48210}'
WHERE id = 9001;
UPDATE awc.jobs SET state = 'COMPLETED', attempts = 1, started_at = now() - interval '140 s',
       finished_at = now() - interval '95 seconds', result = jsonb_build_object('key', id)
WHERE id IN (9002, 9003);
UPDATE awc.jobs SET state = 'RUNNING', attempts = 1, started_at = now() - interval '20 s',
       locked_by = 'awc-loop-1', locked_until = now() + interval '40 seconds',
       claim_token = gen_random_uuid()
WHERE id = 9004;
ANALYZE awc.jobs;
"""

PAGES = [("overview", "/"), ("jobs", "/jobs"), ("jobs-failed", "/jobs?state=FAILED"),
         ("job", "/jobs/4"), ("job-failed", "/jobs/11"), ("job-dependencies", "/jobs/9005"),
         ("bulk", "/jobs/bulk?action=retry&state=FAILED"),
         ("schedules", "/schedules"), ("schedule", "/schedules/hourly-gc"),
         ("ticks", "/ticks"),
         # Just after the Pause of email.send (SPEC §22): the page says what it did.
         ("limits", "/limits?did=pause&target=kind:email.send")]


def main(out: Path) -> None:
    server = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    name = fresh_database(server, None)
    url = make_conninfo(server, dbname=name)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            migrate(conn)
            conn.execute(DEMO)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWC_")}
        env.update(DATABASE_URL=url, PYTHONPATH=str(ROOT))
        proc, base = start_console(env)
        browser = new_browser()
        try:
            sign_in(browser, base)
            out.mkdir(parents=True, exist_ok=True)
            for shot, path in PAGES:
                browser.get(base + path)
                if shot == "job-failed":  # the history is collapsed on the page: open it
                    browser.execute_script(
                        "document.querySelectorAll('details').forEach(d => d.open = true)")
                height = browser.execute_script("return document.body.scrollHeight")
                browser.set_window_size(1400, min(max(int(height) + 20, 600), 1600))
                browser.save_screenshot(str(out / f"{shot}.png"))
                print(out / f"{shot}.png")
        finally:
            browser.quit()
            stop(proc)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/console"))
