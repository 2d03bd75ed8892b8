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
    # a chained proposer that reads token ids (no token_embedding): a decoder with its own cache
    decoder_shaped: bool

    def names(self, prefix: str) -> dict[str, str | None]:
        """The graph names of the target (``prefix`` "target") or of a block or decoder-shaped
        proposer (``prefix`` "proposer")."""
        keys = ("tokens_input", "mask_input", "positions_input")
        out = {k: (self.parameters.get(f"{prefix}_{k}") or None) for k in keys}
        if prefix == "proposer" and self.decoder_shaped:
            out["tokens_input"] = self.chained.token_embedding_input
        return out


# the block parameters a decoder-shaped chained proposal uses (its mask, and its positions)
DECODER_PROPOSER_PARAMETERS = ("proposer_mask_input", "proposer_positions_input")


def is_integer_dtype(dtype) -> bool:
    return isinstance(dtype, str) and dtype.startswith(("int", "uint"))


def decoder_shaped(chained, port_dtype) -> bool:
    """A chained proposal without ``token_embedding`` whose ``token_embedding_input`` is an
    integer port: the proposer embeds its tokens itself (a bare decoder used as a draft), so the
    runtime feeds it token ids. ``port_dtype(port)`` is the proposer input's dtype (or None)."""
    return (
        chained is not None
        and chained.token_embedding is None
        and chained.folded_carry_output is None
        and chained.token_embedding_input is not None
        and is_integer_dtype(port_dtype(chained.token_embedding_input))
    )


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


def resolve(workflow, spec, name: str, port_names, port_dtype) -> tuple[Plan | None, list]:
    """The plan of speculative-block component ``name`` and the problems that keep it from
    running: ``[(code, path, message)]``. ``port_names(component, "inputs" | "outputs")`` gives
    a component's known port names (None when unknown); ``port_dtype(component, port)`` the
    dtype of a component's input port (None when unknown)."""
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
    params = dict(comp.contract.parameters)
    chained = spec.proposal_execution
    chained = chained if isinstance(chained, ChainedProposal) else None
    shaped = decoder_shaped(chained, lambda port: port_dtype(spec.proposer, port))
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
        allowed = DECODER_PROPOSER_PARAMETERS if shaped else ()
        for key in BLOCK_PARAMETERS:
            if key in params and key not in allowed:
                why = (
                    "the proposer is a decoder read through the chained proposal's "
                    "token_embedding_input and logits_output"
                    if shaped
                    else "it reads the proposer from the speculative section"
                )
                problems.append(
                    _problem(
                        "F115",
                        _params_path(name, key),
                        f"parameter {key!r} names a block proposer's graph, but the proposal "
                        f"execution is chained ({why})",
                    )
                )
        if shaped:
            if "proposer_mask_input" not in params:
                problems.append(
                    _problem(
                        "F115",
                        _params_path(name),
                        "a chained proposer that reads token ids keeps its own cache: parameter "
                        "'proposer_mask_input' must name its attention mask input",
                    )
                )
            graph_name("proposer_mask_input", proposer_in, "input", "proposer", False)
            graph_name("proposer_positions_input", proposer_in, "input", "proposer", True)
        problems += _chained_problems(workflow, spec, chained, name, port_names, shaped)
    cells = _cells(workflow, spec, chained, name, problems, shaped)
    if problems:
        return None, problems
    plan = Plan(
        name, spec.proposer, spec.target, chained, spec.max_proposal_width, params, cells, shaped
    )
    return plan, problems


def _chained_problems(workflow, spec, chained, name, port_names, shaped) -> list:
    problems = []
    path = ("speculative", "proposal_execution")
    if chained.token_embedding is None and not shaped:
        problems.append(
            _problem(
                "F116",
                (*path, "token_embedding"),
                f"{SPECULATIVE_CONTRACT} reads a chained proposal's token_embedding (the target "
                "table each proposed token is embedded with before it is fed back); it is "
                "missing, and the proposer's token_embedding_input "
                f"{chained.token_embedding_input!r} is not an integer port (a proposer that "
                "reads token ids embeds them itself and needs no table)",
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


def _cells(workflow, spec, chained, name, problems, shaped) -> tuple[CellPlan, ...]:
    """Every cell the target or proposer reads through a service group, carried through the
    contract's component; every rollback cell among them. A decoder-shaped chained proposer's
    cells (``shaped``) are caches like the target's, recurrent or not."""
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
                restored = cell in recurrent and not shaped  # else truncated, a cache
                if (axis is None) != restored:
                    refused.add(cell)
                if axis is None and not restored:
                    problems.append(
                        _problem(
                            "F117",
                            (*gpath, "sequence_axis"),
                            f"cell {cell!r} of the {role} {model!r} has no sequence axis: this "
                            "runtime rolls a cache back by truncating it along its group's "
                            "sequence_axis (only the recurrent cells of a chained proposal fed "
                            "token embeddings are restored instead)",
                        )
                    )
                    continue
                if restored and axis is not None:
                    problems.append(
                        _problem(
                            "F117",
                            (*gpath, "sequence_axis"),
                            f"recurrent cell {cell!r} is in a group with a sequence axis: this "
                            "runtime restores the recurrent cells of a proposer fed token "
                            "embeddings whole, one value per row (only a proposer that reads "
                            "token ids keeps a cache that is truncated)",
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
