"""The console (SPEC §19): `awc ui`, in the `ui` extra.

access (token, sessions, CSRF, throttle), filters (request values), reads
(bounded page queries), actions (changes with their audit events), render
and chart (how values look), pages (the endpoints), app (routes and the
guard every request passes).
"""
