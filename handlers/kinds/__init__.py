"""The AWC kinds (SPEC §10), one module each, named after its kind; beside
them the payload models, the domain records and their writes, and the pure
workspace TTL rule. Importing a kind's module registers its handler.
"""

# Each kind with its own lease (None: AWC_WORKER_LEASE_SECS), read at
# registration: the modules are imported when a job of theirs is first run.
KINDS: dict[str, int | None] = {
    "snapshot_validate": 600, "snapshot_scrub": 600, "workspace_expire": None,
    "snapshot_retain": None, "gc_sweep": 900, "prune": None,
}
