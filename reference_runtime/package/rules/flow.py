"""What the step walk records for the later rule families (``ctx.flow``): invocation counts,
emits, loops and the components they invoke, the features that derive capabilities, the cells
each loop carries, and the root scope."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import DocPath
from ..model import EmitStep, InvokeStep, LoopStep
from .scope import Def, Scope


@dataclass
class LoopInfo:
    step: LoopStep
    components: set[str] = field(default_factory=set)
    children: list[LoopInfo] = field(default_factory=list)


@dataclass
class EmitInfo:
    step: EmitStep
    value: Def | None
    per_row: bool


@dataclass
class Flow:
    root: Scope
    invokes: list[InvokeStep] = field(default_factory=list)
    emits: list[EmitInfo] = field(default_factory=list)
    loops: list[LoopInfo] = field(default_factory=list)
    features: set[str] = field(default_factory=set)
    carried: dict[str, list[DocPath]] = field(default_factory=dict)
