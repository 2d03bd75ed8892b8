"""F rules: the speculative decoding contract (components, rollback, effects, chained proposals)."""

from __future__ import annotations

from ..model import ChainedProposal, ClonableSafety, OnnxImplementation, RewindableSafety
from ..speculative_block import resolve, speculative_components
from .context import Ctx

SPEC = ("speculative",)


def _groups(ctx: Ctx) -> dict:
    """The state service groups (the F rules run only on a package with a workflow)."""
    serving = ctx.workflow.serving
    return dict(serving.state_service.groups) if serving else {}


def check_rollback(ctx: Ctx, spec) -> None:
    wf = ctx.workflow
    groups = _groups(ctx)
    width = spec.max_proposal_width
    to_check: dict[str, tuple] = {}
    for i, name in enumerate(spec.rollback_state):
        path = (*SPEC, "rollback_state", i)
        if name in wf.state:
            group = wf.state[name].service_group
            if group is not None and group in groups:
                to_check.setdefault(group, path)
        elif name in groups:
            to_check.setdefault(name, path)
        else:
            ctx.add(
                "F60", path, f"rollback_state names {name!r}, which is neither a cell nor a group"
            )
    # Follow cascades: groups that move together roll back together.
    pending = list(to_check)
    while pending:
        gname = pending.pop()
        caps = groups[gname].capabilities
        for target in caps.cascade if caps else ():
            if target in groups and target not in to_check:
                to_check[target] = to_check[gname]
                pending.append(target)
    for gname in to_check:
        caps = groups[gname].capabilities
        bound = caps.rollback_positions if caps else None
        if bound is None or bound < width:
            have = "no rollback_positions" if bound is None else f"rollback_positions {bound}"
            ctx.add(
                "F60",
                (
                    "pipeline",
                    "workflow",
                    "serving",
                    "state_service",
                    "groups",
                    gname,
                    "capabilities",
                    "rollback_positions",
                ),
                f"group {gname!r} rolls back with the speculative state ({have}) but "
                f"max_proposal_width is {width}",
            )


def _innermost_regions(loops, proposer: str, target: str) -> list:
    found = []
    for info in loops:
        inner = _innermost_regions(info.children, proposer, target)
        if inner:
            found += inner
        elif proposer in info.components and target in info.components:
            found.append(info)
    return found


def check_region_effects(ctx: Ctx, spec) -> None:
    wf = ctx.workflow
    width = spec.max_proposal_width
    reported: set[str] = set()
    # the components of each innermost loop invoking both proposer and target; without such a
    # loop there is no iterated region and the two components alone are constrained
    regions = [
        region.components
        for region in _innermost_regions(ctx.flow.loops, spec.proposer, spec.target)
    ] or [{spec.proposer, spec.target}]
    for components in regions:
        for comp_name in sorted(components):
            comp = wf.components.get(comp_name)
            for effect in comp.effects if comp else ():
                domain = wf.effects.get(effect)
                if domain is None or effect in reported:
                    continue  # undeclared effects are C24
                safety = domain.speculation_safety
                ok = isinstance(safety, ClonableSafety) or (
                    isinstance(safety, RewindableSafety) and safety.max_depth >= width
                )
                if not ok:
                    reported.add(effect)
                    have = (
                        f"is rewindable to depth {safety.max_depth}"
                        if isinstance(safety, RewindableSafety)
                        else f"is `speculation_safety: {{kind: {safety.kind}}}`"
                    )
                    ctx.add(
                        "F61",
                        ("pipeline", "workflow", "effects", effect, "speculation_safety"),
                        f"effect {effect!r} is used in the speculative region ({comp_name!r}) "
                        f"but {have}; max_proposal_width is {width}",
                    )


def check_chained(ctx: Ctx, spec, chained: ChainedProposal) -> None:
    wf = ctx.workflow
    path = (*SPEC, "proposal_execution")
    proposer_in = ctx.port_names(spec.proposer, "inputs") or []
    proposer_out = ctx.port_names(spec.proposer, "outputs") or []
    for key, ports, kind in (
        ("token_embedding_input", proposer_in, "input"),
        ("logits_output", proposer_out, "output"),
    ):
        port = getattr(chained, key)
        if port is None or port not in ports:
            have = "it is missing" if port is None else f"{port!r} is not one"
            ctx.add(
                "F62",
                (*path, key),
                f"chained proposals need {key}: an {kind} port of the proposer "
                f"{spec.proposer!r}; {have}",
            )
    if not chained.recurrent and chained.folded_carry_output is None:
        ctx.add(
            "F62",
            path,
            "a chained proposal threads recurrence: declare `recurrent` cells or a "
            "`folded_carry_output`",
        )
    seen: set[str] = set()
    for i, rec in enumerate(chained.recurrent):
        rpath = (*path, "recurrent", i, "state")
        if rec.state in seen:
            ctx.add("F62", rpath, f"recurrent cell {rec.state!r} is listed twice")
            continue
        seen.add(rec.state)
        if rec.state not in wf.state:
            ctx.add("F62", rpath, f"recurrent cell {rec.state!r} is not declared under state")
            continue
        if rec.state not in spec.rollback_state:
            ctx.add("F62", rpath, f"recurrent cell {rec.state!r} must also be in rollback_state")
        aliases = [
            a
            for group in _groups(ctx).values()
            if (a := group.ports.get(spec.proposer, {}).get(rec.state)) is not None
        ]
        if not any(
            a.access == "read_write" and a.input == rec.input and a.output == rec.output
            for a in aliases
        ):
            have = (
                "; it has none"
                if not aliases
                else "; it has "
                + ", ".join(f"{a.access} {a.input!r} -> {a.output!r}" for a in aliases)
            )
            ctx.add(
                "F62",
                rpath,
                f"recurrent cell {rec.state!r} needs a read_write alias {rec.input!r} -> "
                f"{rec.output!r} under serving groups' ports.{spec.proposer}{have}",
            )
    if chained.folded_carry_output is not None:
        check_folded_carry(ctx, spec, chained, proposer_out)


def check_folded_carry(ctx: Ctx, spec, chained, proposer_out) -> None:
    wf = ctx.workflow
    path = (*SPEC, "proposal_execution")
    if chained.folded_carry_output not in proposer_out:
        ctx.add(
            "F63",
            (*path, "folded_carry_output"),
            f"folded_carry_output {chained.folded_carry_output!r} is not an output of the "
            f"proposer {spec.proposer!r}",
        )
    context = spec.port_bindings.get("target_hidden_context")
    # A missing token_embedding_input is reported once, as F62.
    if chained.token_embedding_input is not None and context != chained.token_embedding_input:
        ctx.add(
            "F63",
            (*SPEC, "port_bindings", "target_hidden_context"),
            "a folded carry needs port_bindings.target_hidden_context equal to "
            f"token_embedding_input {chained.token_embedding_input!r}; it is "
            + ("missing" if context is None else repr(context)),
        )
    seed = chained.folded_carry_seed
    target_out = ctx.port_names(spec.target, "outputs") or []
    if seed is None:
        ctx.add("F63", (*path, "folded_carry_seed"), "a folded carry needs folded_carry_seed")
    elif seed.component != spec.target or seed.output not in target_out:
        ctx.add(
            "F63",
            (*path, "folded_carry_seed"),
            f"folded_carry_seed must name an output of the target {spec.target!r}; it names "
            f"output {seed.output!r} of {seed.component!r}",
        )
    emb = chained.token_embedding
    if emb is None:
        ctx.add("F63", (*path, "token_embedding"), "a folded carry needs token_embedding")
        return
    target = wf.components.get(spec.target)
    if emb.component != spec.target or target is None:
        ctx.add(
            "F63",
            (*path, "token_embedding", "component"),
            f"token_embedding must come from the target {spec.target!r}, not {emb.component!r}",
        )
    elif not isinstance(target.implementation, OnnxImplementation):
        ctx.add(
            "F63",
            (*path, "token_embedding", "component"),
            f"token_embedding needs an ONNX target; {spec.target!r} is "
            f"{target.implementation.kind}",
        )
    else:
        graph = ctx.graphs.get(spec.target)
        if graph is not None and emb.table not in graph.initializers:
            ctx.add(
                "F63",
                (*path, "token_embedding", "table"),
                f"token_embedding table {emb.table!r} is not an initializer of the graph of "
                f"the target {spec.target!r}",
            )


def port_dtype(ctx: Ctx, component: str, port: str) -> str | None:
    """The dtype of a component's input port: declared on the component, else its graph's."""
    comp = ctx.component(component)
    declared = (comp.ports.inputs or {}) if comp is not None and comp.ports else {}
    if port in declared:
        return getattr(declared[port], "dtype", None)
    graph = ctx.graphs.get(component)
    value = graph.inputs.get(port) if graph is not None else None
    return value.dtype if value is not None else None


def check_speculative_block(ctx: Ctx) -> None:
    """What the speculative-block executor needs of the package (F115-F117): it resolves, or
    the package is refused naming what is missing."""
    wf = ctx.workflow
    names = speculative_components(wf) if wf else []
    for extra in names[1:]:
        ctx.add(
            "F117",
            ("pipeline", "workflow", "components", extra, "contract", "id"),
            f"a second speculative-block component ({extra!r} after {names[0]!r}): this runtime "
            "runs one speculative decode per workflow",
        )
    spec = ctx.metadata.speculative
    if (
        names
        and spec is not None
        and not (spec.proposer in wf.components and spec.target in wf.components)
    ):
        return  # F59
    for name in names[:1]:
        _, problems = resolve(wf, spec, name, ctx.port_names, lambda c, p: port_dtype(ctx, c, p))
        for code, path, message in problems:
            ctx.add(code, path, message)


def check(ctx: Ctx) -> None:
    check_speculative_block(ctx)
    spec = ctx.metadata.speculative
    if spec is None:
        return
    wf = ctx.workflow
    if wf is None:
        ctx.add("F59", SPEC, "a speculative section needs pipeline.workflow")
        return
    ok = True
    for key in ("proposer", "target"):
        name = getattr(spec, key)
        if name not in wf.components:
            ok = False
            ctx.add("F59", (*SPEC, key), f"speculative {key} {name!r} is not a declared component")
    check_rollback(ctx, spec)
    if not ok:
        return
    check_region_effects(ctx, spec)
    if isinstance(spec.proposal_execution, ChainedProposal):
        check_chained(ctx, spec, spec.proposal_execution)
