"""E rules: state cells, sessions, serving, state service groups and their update policies."""

from __future__ import annotations

from ... import dtypes
from ..model import (
    AppendUpdate,
    BoundedRecurrence,
    GrowingRecurrence,
    IndexedScatterUpdate,
    InvariantRecurrence,
    ReplaceUpdate,
    RuntimeRole,
)
from .context import Ctx, VType

STATE = ("pipeline", "workflow", "state")
SERVING = ("pipeline", "workflow", "serving")


def _group_path(group: str, *rest):
    return (*SERVING, "state_service", "groups", group, *rest)


def check_cells(ctx: Ctx) -> None:
    wf = ctx.workflow
    groups = wf.serving.state_service.groups if wf.serving else {}
    continuations = []
    for name, cell in wf.state.items():
        path = (*STATE, name)
        rec = cell.recurrence
        axis = getattr(rec, "axis", None)
        if axis is not None and axis >= cell.contract.rank:
            ctx.add(
                "E45",
                (*path, "recurrence", "axis"),
                f"recurrence axis {axis} of cell {name!r} must be below its rank "
                f"{cell.contract.rank}",
            )
            axis = None  # reported; not compared with the group's sequence_axis (E47)
        # E46: session blocks
        if cell.session is not None:
            s = cell.session
            spath = (*path, "session")
            if cell.scope != "session":
                ctx.add(
                    "E46",
                    spath,
                    f"cell {name!r} is invocation-scoped; only session cells lease sessions",
                )
            if s.policy != "exclusive":
                ctx.add(
                    "E46",
                    (*spath, "policy"),
                    f"session policy {s.policy!r} is not supported; use exclusive",
                )
            if s.ttl_seconds is not None:
                ctx.add(
                    "E46",
                    (*spath, "ttl_seconds"),
                    "a session time-to-live is not supported (sessions live until closed)",
                )
            if s.optimistic_metadata_version:
                ctx.add(
                    "E46",
                    (*spath, "optimistic_metadata_version"),
                    "optimistic metadata versioning of sessions is not supported",
                )
            if s.continuation is not None:
                continuations.append(name)
                check_continuation(ctx, name, cell)
        # E48: management and release boundaries
        if cell.service_group is not None and cell.management != "runtime":
            ctx.add(
                "E48",
                (*path, "management"),
                f"cell {name!r} belongs to service group {cell.service_group!r} and must be "
                "`management: runtime`",
            )
        if cell.management in ("runtime", "external") and cell.release_boundary is None:
            ctx.add(
                "E48",
                (*path, "release_boundary"),
                f"{cell.management}-managed cell {name!r} needs a release_boundary",
            )
        if cell.management == "workflow" and cell.release_boundary is not None:
            ctx.add(
                "E48",
                (*path, "release_boundary"),
                f"workflow-managed cell {name!r} must not declare a release_boundary",
            )
        if cell.release_boundary == "session" and cell.scope != "session":
            ctx.add(
                "E48",
                (*path, "release_boundary"),
                f"cell {name!r} is invocation-scoped; it cannot be released at the session boundary",
            )
        # E47: service group membership
        if cell.service_group is not None:
            group = groups.get(cell.service_group)
            if group is None:
                ctx.add(
                    "E47",
                    (*path, "service_group"),
                    f"service group {cell.service_group!r} is not declared under "
                    "serving.state_service.groups",
                )
                continue
            gpath = _group_path(cell.service_group)
            varying = isinstance(rec, GrowingRecurrence | BoundedRecurrence)
            if group.sequence_axis is not None and group.sequence_axis >= cell.contract.rank:
                ctx.add(
                    "E47",
                    (*gpath, "sequence_axis"),
                    f"sequence_axis {group.sequence_axis} is beyond the rank of member cell {name!r}",
                )
            elif (
                group.sequence_axis is not None and axis is not None and axis != group.sequence_axis
            ):
                ctx.add(
                    "E47",
                    (*path, "recurrence", "axis"),
                    f"cell {name!r} varies along axis {axis} but its group's sequence_axis is "
                    f"{group.sequence_axis}",
                )
            appends = group.update is None or isinstance(group.update, AppendUpdate)
            if varying and appends and group.sequence_axis is None:
                ctx.add(
                    "E47",
                    (*gpath, "sequence_axis"),
                    f"group {cell.service_group!r} needs a sequence_axis: member {name!r} varies "
                    "in length",
                )
            if cell.contract.request_axis is None:
                ctx.add(
                    "E47",
                    (*path, "contract", "batch_layout"),
                    f"grouped cell {name!r} needs a request axis (request_aligned or "
                    "request_expanded layout)",
                )
            accepted = wf.serving.accepted_len if wf.serving else None
            if isinstance(rec, GrowingRecurrence) and rec.increment != accepted:
                ctx.add(
                    "E47",
                    (*path, "recurrence", "increment"),
                    f"grouped growing cell {name!r} must grow by serving.accepted_len "
                    f"({accepted!r}), not {rec.increment!r}",
                )
    for extra in continuations[1:]:
        ctx.add(
            "E46",
            (*STATE, extra, "session", "continuation"),
            f"a workflow has at most one session continuation ({continuations[0]!r} is the first)",
        )


def check_continuation(ctx: Ctx, name: str, cell) -> None:
    wf = ctx.workflow
    cont = cell.session.continuation
    path = (*STATE, name, "session", "continuation")
    problems = []
    if cell.class_ != "semantic":
        problems.append("the cell must be `class: semantic`")
    if cell.management != "runtime":
        problems.append("the cell must be `management: runtime`")
    if cell.release_boundary != "session":
        problems.append("the cell must be `release_boundary: session`")
    if isinstance(cell.recurrence, InvariantRecurrence):
        problems.append("the cell must have a growing or bounded recurrence")
    if name in ctx.flow.carried:
        problems.append("the cell must not also be loop-carried")
    contract = cell.contract
    first = contract.shape[0] if contract.shape else None
    if (
        dtypes.canonical(contract.dtype) != "int64"
        or contract.rank != 2
        or (isinstance(first, int) and first != 1)
    ):
        problems.append(
            "the cell holds the conversation as one row of token ids: its contract must be "
            "int64 of rank 2, axis 0 of extent 1 or a symbol"
        )
    for problem in problems:
        ctx.add("E46", path, f"continuation on {name!r}: {problem}")
    prompt = wf.inputs.get(cont.prompt_input)
    if prompt is None or not (
        isinstance(prompt.role, RuntimeRole) and prompt.role.role == "prompt_tokens"
    ):
        ctx.add(
            "E46",
            (*path, "prompt_input"),
            f"continuation on {name!r}: prompt_input {cont.prompt_input!r} must name a "
            "workflow input whose role is prompt_tokens",
        )
    output = wf.outputs.get(cont.tokens_output)
    if output is None or output.role != "tokens":
        ctx.add(
            "E46",
            (*path, "tokens_output"),
            f"continuation on {name!r}: tokens_output {cont.tokens_output!r} must name a "
            "workflow output whose role is tokens",
        )
    elif (
        dtypes.canonical(output.contract.dtype) != dtypes.canonical(cell.contract.dtype)
        or output.contract.rank != cell.contract.rank
    ):
        ctx.add(
            "E46",
            (*path, "tokens_output"),
            f"continuation on {name!r}: output {cont.tokens_output!r} "
            f"({VType.of_contract(output.contract).describe()}) and the cell "
            f"({VType.of_contract(cell.contract).describe()}) must share dtype and rank",
        )


def check_serving(ctx: Ctx) -> None:
    wf = ctx.workflow
    serving = wf.serving
    if serving is None:
        return
    root = ctx.flow.root
    if not serving.state_service.groups:
        ctx.add(
            "E50",
            (*SERVING, "state_service", "groups"),
            "serving.state_service.groups must declare at least one bound state group",
        )
    for key, want in (("active", "bool"), ("done", "bool"), ("accepted_len", "integer")):
        name = getattr(serving, key)
        if name is None:
            if key == "accepted_len" and serving.state_service.groups:
                ctx.add(
                    "E50",
                    (*SERVING, "accepted_len"),
                    "serving.accepted_len is required once state groups exist",
                )
            continue
        d = root.lookup(name)
        if d is None:
            ctx.add(
                "E50",
                (*SERVING, key),
                f"serving.{key} {name!r} is not a value visible at the end of the workflow",
            )
            continue
        t = d.vtype
        ok_dtype = t.dtype is None or (
            t.dtype == "bool" if want == "bool" else t.dtype in dtypes.INTEGER
        )
        # upstream asks a rank-1 control for a request axis 0 (request_axis() == Some(0)),
        # which a request-expanded layout has too
        ok_rank = (
            t.rank is None
            or t.rank == 0
            or (t.rank == 1 and (t.layout is None or t.request_axis == 0))
        )
        if not ok_dtype or not ok_rank:
            ctx.add(
                "E50",
                (*SERVING, key),
                f"serving.{key} {name!r} is {t.describe()}; it must be {want} [] or [B] with "
                "its request axis 0 (request_aligned, or request_expanded)",
            )


def _cell_type(ctx: Ctx, name: str) -> VType | None:
    cell = ctx.workflow.state.get(name)
    return VType.of_contract(cell.contract) if cell else None


def check_groups(ctx: Ctx) -> None:
    wf = ctx.workflow
    if wf.serving is None:
        return
    groups = wf.serving.state_service.groups
    for gname, group in groups.items():
        gpath = _group_path(gname)
        members = {n: c for n, c in wf.state.items() if c.service_group == gname}
        for key in ("logical_lengths", "total_length"):
            ref = getattr(group, key)
            if ref is None:
                continue
            t = _cell_type(ctx, ref)
            if t is None or t.dtype not in dtypes.INTEGER:
                ctx.add(
                    "E51",
                    (*gpath, key),
                    f"{key} {ref!r} of group {gname!r} must name an integer state cell",
                )
            elif key == "logical_lengths":
                cell = wf.state[ref]
                if cell.contract.rank != 1:
                    ctx.add(
                        "E51",
                        (*gpath, key),
                        f"logical_lengths cell {ref!r} of group {gname!r} must be rank one (one "
                        f"length per row), not rank {cell.contract.rank}",
                    )
                if cell.class_ != "semantic":
                    ctx.add(
                        "E51",
                        (*gpath, key),
                        f"logical_lengths cell {ref!r} of group {gname!r} must be semantic "
                        "(lengths are checkpointed and replayed with the state)",
                    )
        if group.aliasing == "required":
            ctx.add(
                "H93",
                (*gpath, "aliasing"),
                f"group {gname!r} declares `aliasing: required` (its components only work when "
                "present is written into past); this runtime never aliases state buffers",
            )
        for i, target in enumerate(group.capabilities.cascade):
            if target not in groups:
                ctx.add(
                    "E51",
                    (*gpath, "capabilities", "cascade", i),
                    f"group {gname!r} cascades to unknown group {target!r}",
                )
        check_group_ports(ctx, gname, group, members)
        check_update(ctx, gname, group, members)


def check_group_ports(ctx: Ctx, gname: str, group, members: dict) -> None:
    wf = ctx.workflow
    groups = wf.serving.state_service.groups
    gpath = _group_path(gname, "ports")
    for comp_name, cells in group.ports.items():
        cpath = (*gpath, comp_name)
        if comp_name not in wf.components:
            ctx.add("E52", cpath, f"group {gname!r} binds unknown component {comp_name!r}")
            continue
        inputs = ctx.port_names(comp_name, "inputs")
        outputs = ctx.port_names(comp_name, "outputs")
        layers: dict[str, list[tuple[int | None, tuple]]] = {}
        for cell_name, port in cells.items():
            ppath = (*cpath, cell_name)
            if cell_name not in wf.state:
                ctx.add("E52", ppath, f"group {gname!r} binds unknown cell {cell_name!r}")
                continue
            owner = wf.state[cell_name].service_group
            # A cell whose own service_group is undeclared is reported once, as E47.
            if cell_name not in members and (owner is None or owner in groups):
                ctx.add(
                    "E52",
                    ppath,
                    f"cell {cell_name!r} is bound in group {gname!r} but belongs to "
                    + (f"group {owner!r}" if owner else "no group"),
                )
            if inputs is not None and port.input not in inputs:
                ctx.add(
                    "E52",
                    (*ppath, "input"),
                    f"{port.input!r} is not an input port of {comp_name!r}",
                )
            if port.output is None and port.access == "read_write":
                ctx.add(
                    "E52",
                    (*ppath, "output"),
                    f"read-write alias of {cell_name!r} on {comp_name!r} has no output port",
                )
            elif port.output is not None and outputs is not None and port.output not in outputs:
                ctx.add(
                    "E52",
                    (*ppath, "output"),
                    f"{port.output!r} is not an output port of {comp_name!r}",
                )
            if port.role is not None:
                layers.setdefault(port.role, []).append((port.layer, ppath))
        for role, entries in layers.items():
            if len(entries) < 2:
                continue
            seen: set[int] = set()
            for layer, ppath in entries:
                if layer is None:
                    ctx.add(
                        "E53",
                        (*ppath, "layer"),
                        f"role {role!r} repeats on {comp_name!r}; each entry needs a layer",
                    )
                elif layer in seen:
                    ctx.add(
                        "E53",
                        (*ppath, "layer"),
                        f"layer {layer} of role {role!r} appears twice on {comp_name!r}",
                    )
                else:
                    seen.add(layer)
        key_layers = {layer for layer, _ in layers.get("key", [])}
        value_layers = {layer for layer, _ in layers.get("value", [])}
        if (key_layers or value_layers) and key_layers != value_layers:
            ctx.add(
                "E53",
                cpath,
                f"key layers {sorted(key_layers, key=str)} and value layers "
                f"{sorted(value_layers, key=str)} of {comp_name!r} differ",
            )


def check_update(ctx: Ctx, gname: str, group, members: dict) -> None:
    wf = ctx.workflow
    gpath = _group_path(gname)
    update = group.update or AppendUpdate(kind="append")
    varying = any(not isinstance(c.recurrence, InvariantRecurrence) for c in members.values())
    # A varying member without sequence_axis is reported once, as E47, at the group.
    if isinstance(update, AppendUpdate) and group.sequence_axis is None and not varying:
        ctx.add(
            "E54",
            (*gpath, "update"),
            f"group {gname!r} appends (the default update) but declares no sequence_axis; "
            "declare one, or `update: {kind: replace}`",
        )
    if isinstance(update, ReplaceUpdate):
        if group.sequence_axis is not None:
            ctx.add(
                "E54",
                (*gpath, "sequence_axis"),
                f"replace group {gname!r} must not declare a sequence_axis",
            )
        for name, cell in members.items():
            if not isinstance(cell.recurrence, InvariantRecurrence):
                ctx.add(
                    "E54",
                    (*STATE, name, "recurrence"),
                    f"cell {name!r} of replace group {gname!r} must be invariant",
                )
    if not isinstance(update, IndexedScatterUpdate):
        return
    upath = (*gpath, "update")
    if group.logical_lengths is None:
        ctx.add(
            "E55",
            (*gpath, "logical_lengths"),
            f"indexed_scatter group {gname!r} needs logical_lengths",
        )
    if group.sequence_axis is None:
        ctx.add(
            "E55",
            (*gpath, "sequence_axis"),
            f"indexed_scatter group {gname!r} needs a sequence_axis",
        )
    wi = wf.state.get(update.write_indices)
    if wi is None:
        why = "no state cell has that name"
    elif wi.class_ != "semantic":
        why = f"the cell is {wi.class_}"
    elif wi.contract.rank != 1 or dtypes.canonical(wi.contract.dtype) not in dtypes.INTEGER:
        why = f"the cell is {VType.of_contract(wi.contract).describe()}"
    else:
        why = None
    if why is not None:
        ctx.add(
            "E55",
            (*upath, "write_indices"),
            f"write_indices {update.write_indices!r} of group {gname!r} must name a semantic "
            f"rank-1 integer cell; {why}",
        )
    cap = wf.inputs.get(update.capacity) or wf.state.get(update.capacity)
    cap_type = VType.of_contract(cap.contract) if cap is not None else None
    if (
        cap_type is None
        or cap_type.dtype not in dtypes.INTEGER
        or not (cap_type.rank == 0 or (cap_type.rank == 1 and cap_type.dims in (None, (1,))))
    ):
        ctx.add(
            "E55",
            (*upath, "capacity"),
            f"capacity {update.capacity!r} of group {gname!r} must name an integer scalar input "
            "or cell; "
            + (f"it is {cap_type.describe()}" if cap_type else "no input or cell has that name"),
        )
    for key in ("write_indices_ports", "kv_length_ports"):
        for comp_name, port in getattr(update, key).items():
            if comp_name not in wf.components:
                ctx.add(
                    "E55",
                    (*upath, key, comp_name),
                    f"{key} of group {gname!r} names unknown component {comp_name!r}",
                )
                continue
            inputs = ctx.port_names(comp_name, "inputs")
            if inputs is not None and port not in inputs:
                ctx.add(
                    "E55",
                    (*upath, key, comp_name),
                    f"{key} of group {gname!r}: {port!r} is not an input port of {comp_name!r}",
                )
    for comp_name, cells in group.ports.items():
        if comp_name not in update.write_indices_ports:
            ctx.add(
                "E55",
                (*upath, "write_indices_ports"),
                f"component {comp_name!r} writes group {gname!r} but has no write_indices_ports entry",
            )
        has_kv = any(p.role in ("key", "value") for p in cells.values())
        if has_kv and comp_name not in update.kv_length_ports:
            ctx.add(
                "E55",
                (*upath, "kv_length_ports"),
                f"component {comp_name!r} binds key/value roles but has no kv_length_ports entry",
            )
    for name, cell in members.items():
        if not isinstance(cell.recurrence, InvariantRecurrence):
            ctx.add(
                "E55",
                (*STATE, name, "recurrence"),
                f"buffer {name!r} of indexed_scatter group {gname!r} must be invariant "
                "(fixed capacity)",
            )


def check_publishing(ctx: Ctx) -> None:
    """E49: runtime/external state reaches an output only with a group checkpoint."""
    wf = ctx.workflow
    groups = wf.serving.state_service.groups if wf.serving else {}

    def published_without_checkpoint(cell_name: str) -> bool:
        cell = wf.state[cell_name]  # a declared cell: carried (origin "cell") or named alike
        if cell.management == "workflow":
            return False
        group = groups.get(cell.service_group) if cell.service_group else None
        return group is None or group.checkpoint is None

    for emit in ctx.flow.emits:
        value = emit.value
        if (
            value is not None
            and value.origin == "cell"
            and published_without_checkpoint(value.name)
        ):
            ctx.add(
                "E49",
                (*emit.step.path, "value"),
                f"emit publishes runtime-managed cell {value.name!r}, whose group has no checkpoint",
            )
    for name in wf.outputs:
        if name in wf.state and published_without_checkpoint(name):
            ctx.add(
                "E49",
                ("pipeline", "workflow", "outputs", name),
                f"output {name!r} has the name of runtime-managed cell {name!r}, whose group "
                "has no checkpoint",
            )


def check(ctx: Ctx) -> None:
    if ctx.workflow is None:
        return
    check_cells(ctx)
    check_serving(ctx)
    check_groups(ctx)
    check_publishing(ctx)
