"""The base of every model a client (or a queue) sends us."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Request models reject unknown fields, so a typo is a 400, not a silent default."""

    model_config = ConfigDict(extra="forbid")
