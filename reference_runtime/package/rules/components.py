"""C rules: components, their contracts, adapter ABIs, overrides, row scope and effects."""

from __future__ import annotations

from ..abis import ADAPTER_ABIS, TEXT_ASSEMBLY
from ..model import (
    AdapterImplementation,
    BindingImplementation,
    OnnxImplementation,
    RequestAlignedLayout,
    RequestExpandedLayout,
)
from ..runtime_contracts import contract_problems
from .context import Ctx

ATTENTION_GROUP_KINDS = ("full_attention", "sliding_attention", "multi_latent_attention")


def _cpath(name: str, *rest):
    return ("pipeline", "workflow", "components", name, *rest)


def check_adapter(ctx: Ctx, name: str, comp, impl: AdapterImplementation) -> None:
    wf = ctx.workflow
    supported = ctx.support.adapter_abis.get(impl.abi)
    if supported is None:
        ctx.add(
            "C18",
            _cpath(name, "implementation", "abi"),
            f"adapter ABI {impl.abi!r} is not supported by this runtime (supported: "
            f"{', '.join(sorted(ctx.support.adapter_abis))})",
        )
        return
    if supported != impl.version:
        ctx.add(
            "C18",
            _cpath(name, "implementation", "version"),
            f"adapter ABI {impl.abi}@{impl.version} is not supported (this runtime "
            f"implements {impl.abi}@{supported})",
        )
        return
    pinned = wf.manifest.adapter_abis.get(impl.abi)
    if pinned != impl.version:
        ctx.add(
            "C18",
            ("pipeline", "workflow", "manifest", "adapter_abis", impl.abi),
            f"component {name!r} uses adapter ABI {impl.abi}@{impl.version} but the manifest "
            + ("does not pin it" if pinned is None else f"pins version {pinned!r}"),
            f"Add `{impl.abi}: '{impl.version}'` to pipeline.workflow.manifest.adapter_abis.",
        )
    abi = ADAPTER_ABIS[impl.abi]
    contract = comp.contract
    if contract is None:
        if abi.needs_contract:
            ctx.add(
                "C20",
                _cpath(name, "contract"),
                f"adapter {name!r} ({impl.abi}) needs a contract with an action "
                f"({', '.join(abi.actions)})",
            )
        return
    if contract.id != impl.abi or contract.version != impl.version:
        ctx.add(
            "C20",
            _cpath(name, "contract", "id" if contract.id != impl.abi else "version"),
            f"adapter {name!r} implements {impl.abi}@{impl.version} but its contract is "
            f"{contract.id}@{contract.version}",
        )
        return
    if not abi.actions:
        return
    action = contract.parameters.get("action")
    if action is None:
        ctx.add(
            "C20",
            _cpath(name, "contract", "parameters", "action"),
            f"adapter {name!r} declares no action (one of: {', '.join(abi.actions)})",
        )
        return
    if action not in abi.actions:
        ctx.add(
            "C20",
            _cpath(name, "contract", "parameters", "action"),
            f"{action!r} is not an action of {impl.abi} (one of: {', '.join(abi.actions)})",
        )
        return
    missing = [role for role in abi.actions[action] if role not in contract.bindings]
    if missing:
        ctx.add(
            "C20",
            _cpath(name, "contract", "bindings"),
            f"action {action!r} of {impl.abi} needs binding(s): {', '.join(missing)}",
        )
    outputs = abi.action_outputs.get(action, ())
    for role in abi.actions[action]:
        port = contract.bindings.get(role)
        if port is None:
            continue
        direction = "outputs" if role in outputs else "inputs"
        if port not in getattr(comp.ports, direction):
            ctx.add(
                "C20",
                _cpath(name, "contract", "bindings", role),
                f"role {role!r} of action {action!r} is an {direction[:-1]}: it must bind a "
                f"declared {direction[:-1]} port of {name!r}, not {port!r}",
            )


def check_contract_ports(ctx: Ctx, name: str, comp) -> None:
    contract = comp.contract
    known = set()
    for direction in ("inputs", "outputs"):
        names = ctx.port_names(name, direction)
        if names is None:
            return
        known |= set(names)
    if contract is not None:
        for role, port in contract.bindings.items():
            if port not in known:
                ctx.add(
                    "C19",
                    _cpath(name, "contract", "bindings", role),
                    f"contract role {role!r} is bound to {port!r}, which is not a port of {name!r}",
                )
    for port in comp.ports.roles:
        if port not in known:
            ctx.add(
                "C19",
                _cpath(name, "ports", "roles", port),
                f"port role declared for {port!r}, which is not a port of {name!r}",
            )


def check_row_scope(ctx: Ctx, name: str, comp) -> None:
    """C23: a component holding per-request state on request-aligned ports declares its row
    axis; every row-scoped port reaches that axis, and request-aligned ones align on it."""
    axes = set()
    for direction in ("inputs", "outputs"):
        for contract in getattr(comp.ports, direction).values():
            if isinstance(contract.batch_layout, RequestAlignedLayout | RequestExpandedLayout):
                axes.add(contract.batch_layout.axis)
    state = [*comp.effects, *comp.cache_affects_state]
    if comp.row_scope is None:
        if axes and state:
            ctx.add(
                "C23",
                _cpath(name, "row_scope"),
                f"component {name!r} keeps state ({', '.join(state)}) on request-aligned "
                "ports but declares no row_scope",
            )
        return
    axis = comp.row_scope.axis
    if axes and axes != {axis}:
        ctx.add(
            "C23",
            _cpath(name, "row_scope", "axis"),
            f"row_scope axis {axis} is not the request axis of the ports "
            f"({', '.join(map(str, sorted(axes)))})",
        )
    for direction in ("inputs", "outputs"):
        for port, contract in getattr(comp.ports, direction).items():
            if contract.batch_layout.kind != "shared" and axis >= contract.rank:
                ctx.add(
                    "C23",
                    _cpath(name, "row_scope", "axis"),
                    f"row_scope axis {axis} is beyond row-scoped {direction[:-1]} port {port!r} "
                    f"of rank {contract.rank}",
                )
    if comp.effects and not comp.row_scope.stateful:
        ctx.add(
            "C23",
            _cpath(name, "row_scope", "stateful"),
            f"component {name!r} keeps state ({', '.join(comp.effects)}) on request-aligned "
            "ports but its row_scope says `stateful: false`",
        )


def check(ctx: Ctx) -> None:
    wf = ctx.workflow
    if wf is None:
        return
    for name, comp in wf.components.items():
        impl = comp.implementation
        if "." in name:  # empty names are refused by the schema (C16 as well)
            ctx.add(
                "C16",
                _cpath(name),
                f"component name {name!r} contains '.'",
            )
        if isinstance(impl, AdapterImplementation):
            check_adapter(ctx, name, comp, impl)
        if isinstance(impl, BindingImplementation) and comp.contract is not None:
            ident = f"{comp.contract.id}@{comp.contract.version}"
            if ident not in ctx.support.binding_contracts:
                ctx.add(
                    "C80",
                    _cpath(name, "contract", "id"),
                    f"no executor for binding contract {ident} in this runtime (supported: "
                    f"{', '.join(sorted(ctx.support.binding_contracts)) or 'none'})",
                )
            else:
                for where, problem, code in contract_problems(ctx.root, comp.contract, comp.ports):
                    ctx.add(code, _cpath(name, *where), f"{ident} on {name!r}: {problem}")
        check_contract_ports(ctx, name, comp)
        if comp.application_overridable and (
            comp.contract is None or not isinstance(impl, OnnxImplementation)
        ):
            why = "has no contract" if comp.contract is None else f"is {impl.kind}, not onnx"
            ctx.add(
                "C21",
                _cpath(name, "application_overridable"),
                f"component {name!r} is application_overridable but {why}",
            )
        for i, effect in enumerate(comp.effects):
            if effect not in wf.effects:
                ctx.add(
                    "C24",
                    _cpath(name, "effects", i),
                    f"effect domain {effect!r} is not declared under pipeline.workflow.effects",
                )
        check_row_scope(ctx, name, comp)
        check_overlay_target(ctx, name, comp)

    check_manifest_abis(ctx)
    text_assembly = [
        n
        for n, c in wf.components.items()
        if isinstance(c.implementation, AdapterImplementation)
        and c.implementation.abi == TEXT_ASSEMBLY
    ]
    for extra in text_assembly[1:]:
        ctx.add(
            "C81",
            _cpath(extra),
            f"a package has at most one text-assembly adapter ({text_assembly[0]!r} is the first)",
        )
    check_sequence_role(ctx)


def check_manifest_abis(ctx: Ctx) -> None:
    """C18 on pins no component uses (a used ABI is reported at its component)."""
    wf = ctx.workflow
    used = {
        c.implementation.abi
        for c in wf.components.values()
        if isinstance(c.implementation, AdapterImplementation)
    }
    for abi, version in wf.manifest.adapter_abis.items():
        supported = ctx.support.adapter_abis.get(abi)
        if abi in used or supported == version:
            continue
        ctx.add(
            "C18",
            ("pipeline", "workflow", "manifest", "adapter_abis", abi),
            f"the manifest pins adapter ABI {abi}@{version}, which this runtime does not support "
            + (
                f"(it implements {abi}@{supported})"
                if supported
                else f"(supported: {', '.join(sorted(ctx.support.adapter_abis))})"
            ),
        )


def check_overlay_target(ctx: Ctx, name: str, comp) -> None:
    """C22: a component keyed to the parameter-overlay contract (whatever implements it) names
    an adapters target by its component and initializer. (An overlay adapter under another
    contract is refused by C20 alone.)"""
    if comp.contract is None or comp.contract.id != "onnx-genai.parameter-overlay":
        return
    params = comp.contract.parameters
    component, parameter = params.get("component"), params.get("parameter")
    ppath = _cpath(name, "contract", "parameters")
    missing = [
        key
        for key, value in (("component", component), ("parameter", parameter))
        if not isinstance(value, str) or not value.strip()
    ]
    if missing:
        ctx.add(
            "C22",
            ppath,
            f"overlay {name!r} must name its target with non-empty string parameters "
            f"{' and '.join(missing)} (the target's component and initializer)",
        )
        return
    adapters = ctx.metadata.adapters
    targets = adapters.target_manifest.targets if adapters else ()
    if not any(t.initializer == parameter and t.component == component for t in targets):
        known = ", ".join(f"{t.component}.{t.initializer}" for t in targets) or "none"
        # Point at the component when no target lives in it, else at the parameter.
        wrong = "parameter" if any(t.component == component for t in targets) else "component"
        ctx.add(
            "C22",
            (*ppath, wrong),
            f"overlay {name!r} targets {component}/{parameter}, which is not an "
            f"adapters.target_manifest target (targets: {known})",
        )


def check_sequence_role(ctx: Ctx) -> None:
    """C25: a lone ONNX component that owns attention state must declare its sequence input."""
    wf = ctx.workflow
    onnx_components = [
        n for n, c in wf.components.items() if isinstance(c.implementation, OnnxImplementation)
    ]
    if len(onnx_components) != 1 or wf.serving is None:
        return
    (name,) = onnx_components
    owns_attention = any(
        group.kind in ATTENTION_GROUP_KINDS and name in group.ports
        for group in wf.serving.state_service.groups.values()
    )
    comp = wf.components[name]
    roles = set(comp.ports.roles.values())
    if owns_attention and not roles & {"token_ids", "inputs_embeds"}:
        ctx.add(
            "C25",
            _cpath(name, "ports", "roles"),
            f"{name!r} owns attention state but declares no token_ids or inputs_embeds port role",
        )


def check_after_steps(ctx: Ctx) -> None:
    """C81 (invoked text assembly): needs the step walk's invocation counts (``ctx.flow``,
    set whenever there is a workflow)."""
    wf = ctx.workflow
    if wf is None:
        return
    for step in ctx.flow.invokes:
        comp = wf.components.get(step.component)
        if (
            comp is not None
            and isinstance(comp.implementation, AdapterImplementation)
            and comp.implementation.abi == TEXT_ASSEMBLY
        ):
            ctx.add(
                "C81",
                (*step.path, "component"),
                f"{step.component!r} is a text-assembly adapter; it runs at the API boundary "
                "and cannot be invoked inside the workflow",
            )
