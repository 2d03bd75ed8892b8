"""What the ``onnx-genai.speculative-block@1`` executor reads of a package, resolved once from the
declarations (never from names or shapes): the proposer and target of the ``speculative``
section, the graph names its parameters give, the proposal execution (``block`` or ``chained``)
and every cell it carries, with the ports through which each enters and leaves the contract's
component and the proposer or target.

The loader reports what does not resolve (rules F115-F117, ``rules/speculative.py``); the
executor (``executors/speculative.py``) runs on the plan. docs/speculative.md describes both.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import ChainedProposal, MappedVocabulary, OnnxImplementation
from .runtime_contracts import BLOCK_PARAMETERS, SPECULATIVE_CONTRACT

TARGET_NAMES = ("target_tokens_input", "target_mask_input", "target_positions_input")


@dataclass(frozen=True)
class CellPlan:
    """One carried cell: it enters the contract's component at ``own_input`` and leaves at
    ``own_output``; the model (``target`` or ``proposer``) reads it at ``model_input`` and
    writes its next value at ``model_output``. ``sequence_axis`` is its group's (a cache that is
    truncated on rollback); ``None`` for a chained proposal's recurrent cell (restored)."""

    cell: str
    own_input: str
    own_output: str
    model: str
    model_input: str
    model_output: str
    sequence_axis: int | None


@dataclass(frozen=True)
class Plan:
    component: str
    proposer: str
    target: str
    chained: ChainedProposal | None  # None: a block proposal
    max_width: int
    parameters: dict
    cells: tuple[CellPlan, ...]

    def names(self, prefix: str) -> dict[str, str | None]:
        """The graph names of the target (``prefix`` "target") or a block proposer."""
        keys = ("tokens_input", "mask_input", "positions_input")
        out = {k: (self.parameters.get(f"{prefix}_{k}") or None) for k in keys}
        return out


def _problem(code: str, path: tuple, message: str) -> tuple:
    return (code, path, message)


def speculative_components(workflow) -> list[str]:
    return [
        name
        for name, comp in workflow.components.items()
        if comp.contract is not None and comp.contract.id == SPECULATIVE_CONTRACT
    ]


def _params_path(name: str, key: str | None = None) -> tuple:
    path = ("pipeline", "workflow", "components", name, "contract", "parameters")
    return (*path, key) if key else path


def resolve(workflow, spec, name: str, port_names) -> tuple[Plan | None, list]:
    """The plan of speculative-block component ``name`` and the problems that keep it from
    running: ``[(code, path, message)]``. ``port_names(component, "inputs" | "outputs")`` gives
    a component's known port names (None when unknown)."""
    problems: list = []
    comp = workflow.components[name]
    if spec is None:
        problems.append(
            _problem(
                "F115",
                ("pipeline", "workflow", "components", name, "contract", "id"),
                f"{SPECULATIVE_CONTRACT} on {name!r} needs a `speculative` section naming its "
                "proposer and target",
            )
        )
        return None, problems
    if isinstance(spec.vocabulary, MappedVocabulary):
        problems.append(
            _problem(
                "F117",
                ("speculative", "vocabulary", "kind"),
                "a `mapped` vocabulary is not supported by this runtime's speculative executor "
                "(proposer ids are compared with the target's as they are)",
            )
        )
    for role in ("proposer", "target"):
        other = workflow.components.get(getattr(spec, role))
        if other is not None and not isinstance(other.implementation, OnnxImplementation):
            problems.append(
                _problem(
                    "F115",
                    ("speculative", role),
                    f"the speculative {role} {getattr(spec, role)!r} must be an ONNX component: "
                    f"{name!r} runs its graph (it is {other.implementation.kind})",
                )
            )
    if problems:
        return None, problems
    params = dict(comp.contract.parameters)
    chained = spec.proposal_execution
    chained = chained if isinstance(chained, ChainedProposal) else None
    target_in = port_names(spec.target, "inputs") or []
    target_out = port_names(spec.target, "outputs") or []
    proposer_in = port_names(spec.proposer, "inputs") or []
    proposer_out = port_names(spec.proposer, "outputs") or []

    def graph_name(key, names, kind, who, optional):
        value = params.get(key)
        if value is None:
            return
        if (
            not isinstance(value, str)
            or (not value and not optional)
            or (value and value not in names)
        ):
            have = "must not be empty" if value == "" else f"is {value!r}, not one"
            problems.append(
                _problem(
                    "F115",
                    _params_path(name, key),
                    f"{key} names an {kind} of the {who} {getattr(spec, who)!r}; it {have}",
                )
            )

    for key in TARGET_NAMES:
        graph_name(key, target_in, "input", "target", key == "target_positions_input")
    graph_name("target_logits_output", target_out, "output", "target", False)
    if chained is None:
        for key in BLOCK_PARAMETERS:
            if key not in params:
                problems.append(
                    _problem(
                        "F115",
                        _params_path(name),
                        f"a block proposal needs parameter {key!r} (the proposer graph's name)",
                    )
                )
        for key in BLOCK_PARAMETERS[:3]:
            graph_name(key, proposer_in, "input", "proposer", key == "proposer_positions_input")
        graph_name("proposal_output", proposer_out, "output", "proposer", False)
    else:
        for key in BLOCK_PARAMETERS:
            if key in params:
                problems.append(
                    _problem(
                        "F115",
                        _params_path(name, key),
                        f"parameter {key!r} names a block proposer's graph, but the proposal "
                        "execution is chained (it reads the proposer from the speculative section)",
                    )
                )
        problems += _chained_problems(workflow, spec, chained, name, port_names)
    cells = _cells(workflow, spec, chained, name, problems)
    if problems:
        return None, problems
    plan = Plan(name, spec.proposer, spec.target, chained, spec.max_proposal_width, params, cells)
    return plan, problems


def _chained_problems(workflow, spec, chained, name, port_names) -> list:
    problems = []
    path = ("speculative", "proposal_execution")
    if chained.token_embedding is None:
        problems.append(
            _problem(
                "F116",
                (*path, "token_embedding"),
                f"{SPECULATIVE_CONTRACT} reads a chained proposal's token_embedding (the target "
                "table each proposed token is embedded with before it is fed back); it is missing",
            )
        )
    if chained.folded_carry_output is not None:
        own_in = port_names(name, "inputs") or []
        own_out = port_names(name, "outputs") or []
        for direction, ports in (("input", own_in), ("output", own_out)):
            if "carry" not in ports:
                problems.append(
                    _problem(
                        "F116",
                        ("pipeline", "workflow", "components", name, "ports", f"{direction}s"),
                        f"a folded carry ({chained.folded_carry_output!r}) is carried from step "
                        f"to step through {name!r}'s {direction} port 'carry', which is not "
                        "declared",
                    )
                )
    return problems


def _cells(workflow, spec, chained, name, problems) -> tuple[CellPlan, ...]:
    """Every cell the target or proposer reads through a service group, carried through the
    contract's component; every rollback cell among them."""
    groups = workflow.serving.state_service.groups if workflow.serving else {}
    recurrent = {r.state: r for r in (chained.recurrent if chained else ())}
    found: list[CellPlan] = []
    refused: set[str] = set()  # cells reported as unsupported: not reported again below
    for gname, group in groups.items():
        for role in ("target", "proposer"):
            model = getattr(spec, role)
            for cell, alias in group.ports.get(model, {}).items():
                gpath = ("pipeline", "workflow", "serving", "state_service", "groups", gname)
                own = group.ports.get(name, {}).get(cell)
                if own is None or own.access != "read_write" or own.output is None:
                    problems.append(
                        _problem(
                            "F115",
                            (*gpath, "ports"),
                            f"cell {cell!r} of the {role} {model!r} must be carried through "
                            f"{name!r}: declare a read_write alias for it under ports.{name}",
                        )
                    )
                    continue
                axis = group.sequence_axis
                if (axis is None) != (cell in recurrent):
                    refused.add(cell)
                if axis is None and cell not in recurrent:
                    problems.append(
                        _problem(
                            "F117",
                            (*gpath, "sequence_axis"),
                            f"cell {cell!r} of the {role} {model!r} has no sequence axis: this "
                            "runtime rolls a cache back by truncating it along its group's "
                            "sequence_axis (only a chained proposal's recurrent cells are "
                            "restored instead)",
                        )
                    )
                    continue
                if cell in recurrent and axis is not None:
                    problems.append(
                        _problem(
                            "F117",
                            (*gpath, "sequence_axis"),
                            f"recurrent cell {cell!r} is in a group with a sequence axis: this "
                            "runtime restores recurrent cells whole, one value per row",
                        )
                    )
                    continue
                out = alias.output or alias.input
                found.append(CellPlan(cell, own.input, own.output, role, alias.input, out, axis))
    carried = {c.cell for c in found} | refused
    state = workflow.state
    for i, entry in enumerate(spec.rollback_state):
        members = (
            [entry] if entry in state else [c for c, v in state.items() if v.service_group == entry]
        )
        for member in members:
            if member not in carried:
                problems.append(
                    _problem(
                        "F115",
                        ("speculative", "rollback_state", i),
                        f"rollback cell {member!r} is not read by the proposer or target through "
                        f"a service group and carried through {name!r}, so it cannot be rolled "
                        "back",
                    )
                )
    return tuple(found)
