"""The drivers (SPEC §7, §8): how settings become a running engine.

    compose.py     the one place settings become a connection, an Engine and
                   a RunSpec, in the SPEC §3 startup order
    once.py        `awc tick`: one tick, its report and its exported metrics
    loop.py        `awc loop` and `awc maintenance run`, under the supervisor
    aws_lambda.py  the Lambda entry point (template.yaml's Handler)
    supervisor.py, health.py   what the loop runs its parts with

Kept empty of imports: the Lambda entry's cold start pays for nothing else.
"""
