"""The drivers (SPEC §7, §8): how settings become a running engine.

    compose.py     the one place settings become a connection, an Engine and
                   a RunSpec, in the SPEC §3 startup order
    once.py        `awc tick`: one tick, its report and its exported metrics
    loop.py        `awc loop` and `awc maintenance run`, under the supervisor
    aws_lambda.py  the Lambda entry point (template.yaml's Handler), with
                   lambda_event.py (the event), lambda_secret.py (the
                   database secret), lambda_warm.py (what a warm
                   environment keeps) and lambda_invoke.py (a local run)
    supervisor.py, health.py   what the loop runs its parts with

Kept empty of imports: the Lambda entry's cold start pays for nothing else.
"""
