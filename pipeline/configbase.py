"""Base class of every typed config object (job spec, CLI options, actor config).

Frozen and strict: unknown keys are rejected and values are validated once, so
the same objects can be built from YAML by the driver, pickled to actors and
trusted there.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)
