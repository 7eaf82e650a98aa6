"""The AWC kinds (SPEC §10), one module each, named after its kind; beside
them the payload models, the domain records and their writes, and the pure
workspace TTL rule. Importing a kind's module registers its handler.
"""

KINDS = ("snapshot_validate", "snapshot_scrub", "workspace_expire", "snapshot_retain",
         "gc_sweep", "prune")
