"""H72 / H73: capabilities derived from the structure, the manifest, and admission against
what the runtime publishes (docs/format.md, "Sections whose behaviour the upstream snapshot
leaves to the runtime")."""

from __future__ import annotations

from ... import dtypes
from ...support import KNOWN_CAPABILITIES
from ..abis import ADAPTER_ABIS, ADAPTIVE_PROPOSAL_BUDGET
from ..model import AdapterImplementation, BoundedRecurrence
from ..runtime_contracts import BATCH_CONTRACT
from .context import Ctx

MANIFEST = ("pipeline", "workflow", "manifest", "capabilities")


def derived_capabilities(ctx: Ctx) -> dict[str, str]:
    """Capability -> why the structure needs it (in a stable order)."""
    md = ctx.metadata
    wf = ctx.workflow
    need: dict[str, str] = {}
    if wf is None:
        return need
    features = ctx.flow.features if ctx.flow else set()
    need["workflow_ssa"] = "every workflow"
    if "linear_effects" in features or wf.effects or any(c.effects for c in wf.components.values()):
        need["linear_effects"] = (
            "a loop that carries cells or emits, a branch case that emits, or declared effects"
        )
    if features & {"loop", "branch"}:
        need["nested_control_flow"] = "a loop or branch"
    if "iteration" in features:
        need["loop_induction_values"] = "a loop declares `iteration`"
    if "emit" in features:
        need["typed_emit"] = "an emit step"
    if "event" in features:
        need["streaming_emit"] = "an `event` emit"
    if "valid_length" in features:
        need["emit_valid_length"] = "an emit with `valid_length`"
    if any(i.present_as for i in wf.inputs.values()):
        need["input_presence"] = "an input with `present_as`"
    if wf.serving is not None:
        need["serving_service_contract"] = "a `serving` section"
    if any(c.scope == "session" for c in wf.state.values()):
        need["session_state_lease"] = "a session-scoped cell"
    if any(isinstance(c.recurrence, BoundedRecurrence) for c in wf.state.values()):
        need["bounded_state_recurrence"] = "a bounded recurrence"
    if any(c.class_ == "advisory" for c in wf.state.values()):
        need["advisory_state"] = "an advisory cell"
    adapter_abis = {
        c.implementation.abi
        for c in wf.components.values()
        if isinstance(c.implementation, AdapterImplementation)
    }
    contract_ids = {c.contract.id for c in wf.components.values() if c.contract is not None}
    roles = {getattr(i.role, "role", None) for i in wf.inputs.values()}
    if md.adapters is not None or "onnx-genai.parameter-overlay" in adapter_abis:
        need["parameter_adapters"] = "an adapters section or a parameter-overlay component"
    if md.adapters is not None or any(r and r.startswith("adapter_") for r in roles):
        need["heterogeneous_adapter_batching"] = "an adapters section or an adapter_* input role"
    for abi in sorted(adapter_abis | contract_ids):
        spec = ADAPTER_ABIS.get(abi)
        if spec is not None and spec.capability and spec.capability not in need:
            need[spec.capability] = f"a component with ABI or contract {abi}"
    if BATCH_CONTRACT in contract_ids:
        need["continuous_batching"] = f"a component with contract {BATCH_CONTRACT}"
    if ADAPTIVE_PROPOSAL_BUDGET in contract_ids:
        need["adaptive_proposal_budget"] = f"a component with contract {ADAPTIVE_PROPOSAL_BUDGET}"
    return need


def check(ctx: Ctx) -> None:
    md = ctx.metadata
    wf = ctx.workflow
    manifest = list(wf.manifest.capabilities) if wf else []
    derived = derived_capabilities(ctx)
    reported_by_g68 = set()
    if md.adapters is not None:
        reported_by_g68 = {"parameter_adapters", "heterogeneous_adapter_batching"}
    for cap, why in derived.items():
        if cap not in manifest and cap not in reported_by_g68:
            ctx.add(
                "H72",
                MANIFEST,
                f"the workflow uses {cap!r} ({why}) but the manifest does not list it",
                f"Add {cap!r} to pipeline.workflow.manifest.capabilities.",
            )
    hardware = md.hardware_requirements
    for i, name in enumerate(hardware.required_dtypes or () if hardware else ()):
        if dtypes.canonical(name) not in dtypes.ONNX_ELEM_TYPE or name == "string":
            ctx.add(
                "H93",
                ("hardware_requirements", "required_dtypes", i),
                f"the package requires dtype {name!r}, which this runtime cannot compute with",
            )
    supported = ctx.support.capabilities
    declared: dict[str, tuple] = {}
    for i, cap in enumerate(md.required_capabilities):
        declared.setdefault(cap, ("required_capabilities", i))
    for i, cap in enumerate(manifest):
        declared.setdefault(cap, (*MANIFEST, i))
    # a derived capability the manifest leaves out is H72 above; one it lists is checked here
    unsupported = [cap for cap in declared if cap not in supported]
    for cap in unsupported:
        what = (
            "is not supported by this runtime"
            if cap in KNOWN_CAPABILITIES
            else "is not a capability of the format (an unknown extension)"
        )
        ctx.add(
            "H73",
            declared[cap],
            f"capability {cap!r} {what}; the package needs {len(unsupported)} unsupported "
            f"capabilit{'y' if len(unsupported) == 1 else 'ies'}: {', '.join(unsupported)}",
        )
