"""Payload models of the built-in kinds (SPEC §10). Extra fields are refused."""

from __future__ import annotations

from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SnapshotPayload(_Payload):
    """`snapshot_validate`, `snapshot_scrub`, `snapshot_retain`."""

    snapshot_id: UUID


class WorkspacePayload(_Payload):
    """`workspace_expire`."""

    workspace_id: UUID


class TenantPayload(_Payload):
    """`gc_sweep`."""

    tenant_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class PrunePayload(_Payload):
    """`prune` takes nothing."""
