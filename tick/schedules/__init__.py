"""Durable schedules (SPEC §15): recurring jobs that need no long-running
process. `times.py` computes fire times, purely; firing, the ledger and the
operations on a connection build on it."""
