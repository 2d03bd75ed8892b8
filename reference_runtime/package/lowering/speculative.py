"""A bare decoder lowered with a draft: speculative decoding without an authored workflow.

``Engine.from_dir(target, draft=folder)`` (``reference-runtime run TARGET --draft FOLDER``)
attaches a second bare decoder, the draft, to the target. The lowered workflow runs
``onnx-genai.speculative-block@1`` with a **chained** proposal whose proposer reads token ids
(the draft's ``token_embedding_input`` is its integer token input, and there is no
``token_embedding`` table): the draft embeds its own tokens, keeps its own KV cache (its cells
are ``recurrent`` and in ``rollback_state``, in a group with a ``sequence_axis``), and is
driven like a decoder (docs/speculative.md, "A proposer that reads token ids").

The document names the draft's graph under the folder name ``draft/``: the package the loader
validates *mounts* the given draft folder there (``Package.mounts``), and only that folder: every
other artifact path stays confined to the target's folder. Written out with the draft's files
under ``draft/``, the document is an ordinary authored package (the generated
``speculative_lowered`` fixture is exactly that).

What a speculative step cannot honour is refused here with H91, naming both decoders: vocabularies
of different sizes (the ids are compared as they are: ``vocabulary: identical``), a decoder
without an attention mask input or without KV (a cache is rolled back by masking and
truncating it), a draft whose context is shorter than the target's, a target that samples by
default (speculative decoding here verifies greedily), and a target graph stored under
``draft/`` itself.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from ...errors import Violation
from ..rules.catalogue import hint_for
from ..runtime_contracts import SPECULATIVE_CONTRACT
from .abi import DecoderABI
from .document import (
    CONTRACT_VERSION,
    _cell,
    _contract,
    _literal,
    request_inputs,
)

# the folder name under which the lowered document names the draft's files
DRAFT_FOLDER = "draft"
# speculative.max_proposal_width of a lowered pair, and the default proposal width
MAX_PROPOSAL_WIDTH = 4


def pairing_problems(target: DecoderABI, draft: DecoderABI) -> list[Violation]:
    """H91 for each thing that keeps ``draft`` from proposing for ``target``."""
    found = []

    def add(where: str, message: str, fix: str | None = None) -> None:
        found.append(Violation("H91", ("draft", where), message, fix or hint_for("H91")))

    if target.vocab_size != draft.vocab_size:
        add(
            "vocab_size",
            f"the draft's vocabulary has {draft.vocab_size} ids and the target's "
            f"{target.vocab_size}: speculative decoding compares the draft's token ids with "
            "the target's as they are (vocabulary: identical)",
            "Attach a draft trained on the target's tokenizer (the same vocabulary size).",
        )
    for who, abi in (("target", target), ("draft", draft)):
        if abi.attention_mask_input is None:
            add(
                "attention_mask_input",
                f"the {who} graph has no attention mask input: speculative decoding rolls a "
                "rejected proposal out of a cache by masking it",
                "Export the decoder with an attention_mask input.",
            )
        if not abi.kv:
            add(
                "kv_inputs",
                f"the {who} declares no KV cache: speculative decoding verifies and proposes "
                "through each decoder's own cache",
                "Declare the decoder's past/present KV names.",
            )
    short = (
        isinstance(target.context_length, int)
        and isinstance(draft.context_length, int)
        and draft.context_length < target.context_length
    )
    if short:
        add(
            "context_length",
            f"the draft's context ({draft.context_length}) is shorter than the target's "
            f"({target.context_length}): the draft reads every position the target does",
            "Attach a draft whose context is at least the target's.",
        )
    generation = target.carried.get("generation") or {}
    defaults = {**(generation.get("defaults") or {}), **target.defaults}
    if defaults.get("do_sample"):
        add(
            "do_sample",
            "the target decodes by sampling by default (do_sample: true), and speculative "
            "decoding here verifies greedily",
            "Set do_sample to false in the target's defaults, or run it without a draft.",
        )
    if PurePosixPath(target.artifact.replace("\\", "/")).parts[:1] == (DRAFT_FOLDER,):
        add(
            "artifact",
            f"the target's graph {target.artifact!r} is stored under {DRAFT_FOLDER}/, the folder "
            "name the lowered document gives the draft",
            f"Move the target's graph out of its {DRAFT_FOLDER}/ folder.",
        )
    return found


def _kv_contract(abi: DecoderABI, shape: tuple, sequence: str, optional: bool = False) -> dict:
    dims = tuple(sequence if d == "past_sequence" else d for d in shape)
    return _contract(abi.kv_dtype, *dims, optional=optional)


def lower_with_draft(target: DecoderABI, draft: DecoderABI) -> dict:
    """The workflow document of ``target`` decoding speculatively with ``draft``."""
    rows = _contract
    one = _contract("int64", 1, aligned=False)
    width = MAX_PROPOSAL_WIDTH
    opt = {"optional": True}
    roles = (("target", target, "target_sequence"), ("draft", draft, "proposer_sequence"))

    def cell(role: str, pair) -> str:
        return f"{role}_{pair.cell}"

    # ------------------------------------------------------------- the speculative component
    port_in = {
        "tokens": {**rows("int64", "batch", "prompt_sequence"), **opt},
        "lengths": {**rows("int64", "batch"), **opt},
        "pending": {**rows("int64", "batch", "pending_width"), **opt},
        "pending_lengths": {**rows("int64", "batch"), **opt},
        "target_mask": {**rows("int64", "batch", "target_sequence"), **opt},
        "proposer_mask": {**rows("int64", "batch", "proposer_sequence"), **opt},
        "active": {**rows("bool", "batch"), **opt},
        "generated": {**rows("int64", "batch"), **opt},
        "finish_reason": {**rows("int64", "batch"), **opt},
        "max_new_tokens": one,
        "proposal_width": {**one, **opt},
        "eos_token_ids": _contract("int64", "end_ids", aligned=False, optional=True),
    }
    port_out = {
        "tokens": rows("int64", "batch", "block"),
        "accepted_len": rows("int64", "batch"),
        "pending": rows("int64", "batch", "next_pending_width"),
        "pending_lengths": rows("int64", "batch"),
        "target_mask": rows("int64", "batch", "next_target_sequence"),
        "proposer_mask": rows("int64", "batch", "next_proposer_sequence"),
        "next_active": rows("bool", "batch"),
        "running": _contract("bool", 1, aligned=False),
        "done": rows("bool", "batch"),
        "generated": rows("int64", "batch"),
        "finish_reason": rows("int64", "batch"),
        "capacity": _contract("int64", 1, aligned=False, optional=True),
    }
    for role, abi, sequence in roles:
        for pair in abi.kv:
            name = cell(role, pair)
            port_in[name] = _kv_contract(abi, pair.shape, sequence, optional=True)
            port_out[f"{name}_next"] = _kv_contract(abi, pair.shape, f"next_{sequence}")
    parameters = {
        "target_tokens_input": target.token_input,
        "target_mask_input": target.attention_mask_input or "",
        "target_positions_input": target.position_ids_input or "",
        "target_logits_output": target.logits_output,
        "context_length": target.context_length or 0,
        "max_length": target.max_length,
        "pad_token_id": target.pad_token_id,
        "proposer_mask_input": draft.attention_mask_input or "",
        "proposer_positions_input": draft.position_ids_input or "",
    }
    components = {
        "target": {"implementation": {"kind": "onnx", "artifact": target.artifact}},
        "draft": {
            "implementation": {"kind": "onnx", "artifact": f"{DRAFT_FOLDER}/{draft.artifact}"}
        },
        "speculate": {
            "implementation": {"kind": "binding"},
            "ports": {"inputs": port_in, "outputs": port_out},
            "contract": {
                "id": SPECULATIVE_CONTRACT,
                "version": CONTRACT_VERSION,
                "parameters": parameters,
            },
        },
    }

    # ------------------------------------------------------------- inputs and outputs
    end_ids = list(target.eos_token_ids)
    inputs = {
        **request_inputs(target),
        "request.proposal_width": {
            "contract": one,
            "role": {"kind": "opaque"},
            "source": {"kind": "application", "name": "proposal_width"},
            "required": False,
            "default": width,
        },
    }
    if end_ids:
        inputs["package.eos_token_ids"] = _literal(
            _contract("int64", len(end_ids), aligned=False), end_ids
        )
    outputs = {
        "tokens": {
            "contract": rows("int64", "batch", "generated_sequence"),
            "role": "tokens",
            "stage": "pre_adapter",
        },
        "finish_reasons": {
            "contract": rows("int64", "batch"),
            "role": "tensor",
            "stage": "pre_adapter",
        },
    }

    # ------------------------------------------------------------- state
    def state_cell(contract: dict, initializer: str, axis: int | None = None, **extra) -> dict:
        """A cell; one with an ``axis`` grows along it up to the prefill's ``capacity``."""
        recurrence = (
            {"kind": "invariant"}
            if axis is None
            else {"kind": "bounded", "axis": axis, "max": "prefill.capacity"}
        )
        return _cell(contract, initializer, recurrence, **extra)

    state = {
        "running": state_cell(_contract("bool", 1, aligned=False), "prefill.running"),
        "active": state_cell(rows("bool", "batch"), "prefill.active"),
        "done": state_cell(rows("bool", "batch"), "prefill.done"),
        "generated": state_cell(rows("int64", "batch"), "prefill.generated"),
        "finish_reason": state_cell(rows("int64", "batch"), "prefill.finish_reason"),
        "accepted": state_cell(rows("int64", "batch"), "prefill.accepted"),
        "pending": state_cell(rows("int64", "batch", "pending_width"), "prefill.pending", 1),
        "pending_lengths": state_cell(rows("int64", "batch"), "prefill.pending_lengths"),
        "target_mask": state_cell(
            rows("int64", "batch", "target_sequence"), "prefill.target_mask", 1
        ),
        "proposer_mask": state_cell(
            rows("int64", "batch", "proposer_sequence"), "prefill.proposer_mask", 1
        ),
    }
    groups = {}
    for role, abi, sequence in roles:
        group = f"{role}_cache"
        model_ports, own_ports = {}, {}
        for pair in abi.kv:
            name = cell(role, pair)
            state[name] = state_cell(
                _kv_contract(abi, pair.shape, sequence),
                f"prefill.{name}",
                abi.sequence_axis,
                service_group=group,
                management="runtime",
                release_boundary="invocation",
            )
            port = {"input": pair.input, "output": pair.output, "access": "read_write"}
            if pair.role is not None:
                port["role"] = pair.role
            if pair.layer is not None:
                port["layer"] = pair.layer
            model_ports[name] = port
            own_ports[name] = {"input": name, "output": f"{name}_next"}
        groups[group] = {
            "kind": "full_attention",
            "layout": "bnsh" if abi.sequence_axis == 2 else f"axis{abi.sequence_axis}",
            "sequence_axis": abi.sequence_axis,
            "aliasing": abi.aliasing,
            "capabilities": {"rollback_positions": width},
            "ports": {role: model_ports, "speculate": own_ports},
        }

    # ------------------------------------------------------------- steps
    prefill_in = {
        "tokens": "request.prompt_tokens",
        "lengths": "request.prompt_lengths",
        "max_new_tokens": "request.max_new_tokens",
        "proposal_width": "request.proposal_width",
        **({"eos_token_ids": "package.eos_token_ids"} if end_ids else {}),
    }
    prefill_out = {
        "tokens": "prefill.tokens",
        "accepted_len": "prefill.accepted",
        "pending": "prefill.pending",
        "pending_lengths": "prefill.pending_lengths",
        "target_mask": "prefill.target_mask",
        "proposer_mask": "prefill.proposer_mask",
        "next_active": "prefill.active",
        "running": "prefill.running",
        "done": "prefill.done",
        "generated": "prefill.generated",
        "finish_reason": "prefill.finish_reason",
        "capacity": "prefill.capacity",
    }
    step_in = {
        "pending": "pending",
        "pending_lengths": "pending_lengths",
        "target_mask": "target_mask",
        "proposer_mask": "proposer_mask",
        "active": "active",
        "generated": "generated",
        "finish_reason": "finish_reason",
        "max_new_tokens": "request.max_new_tokens",
        "proposal_width": "request.proposal_width",
        **({"eos_token_ids": "package.eos_token_ids"} if end_ids else {}),
    }
    carried = [
        "running", "active", "done", "generated", "finish_reason", "accepted", "pending",
        "pending_lengths", "target_mask", "proposer_mask",
    ]  # fmt: skip
    for role, abi, _ in roles:
        for pair in abi.kv:
            name = cell(role, pair)
            prefill_out[f"{name}_next"] = f"prefill.{name}"
            step_in[name] = name
            carried.append(name)
    step_out = {
        port: value.replace("prefill.", "step.")
        for port, value in prefill_out.items()
        if port != "capacity"
    }
    steps = [
        {"kind": "invoke", "component": "speculate", "inputs": prefill_in, "outputs": prefill_out},
        {"kind": "emit", "value": "prefill.tokens", "output": "tokens", "mode": "append",
         "valid_length": "prefill.accepted"},
        {
            "kind": "loop",
            "steps": [
                {"kind": "invoke", "component": "speculate", "inputs": step_in,
                 "outputs": step_out},
                {"kind": "emit", "value": "step.tokens", "output": "tokens", "mode": "append",
                 "valid_length": "step.accepted"},
            ],
            "continue_when": "running",
            "max_iterations": "request.max_new_tokens",
            "carried": [{"cell": c, "next": f"step.{c}"} for c in carried],
        },
        {"kind": "emit", "value": "finish_reason", "output": "finish_reasons", "mode": "replace"},
    ]  # fmt: skip

    # ------------------------------------------------------------- the speculative section
    speculative = {
        "proposer": "draft",
        "target": "target",
        "vocabulary": {"kind": "identical"},
        "max_proposal_width": width,
        "rollback_state": ["target_cache", *(cell("draft", p) for p in draft.kv)],
        "distribution_preserving": True,
        "proposal_execution": {
            "kind": "chained",
            "token_embedding_input": draft.token_input,
            "logits_output": draft.logits_output,
            "recurrent": [
                {"state": cell("draft", p), "input": p.input, "output": p.output} for p in draft.kv
            ],
        },
    }
    capabilities = [
        "workflow_ssa", "linear_effects", "nested_control_flow", "typed_emit",
        "emit_valid_length", "loop_carried_state", "control_flow_loop",
        "serving_service_contract", "kv_cache", "bounded_state_recurrence",
    ]  # fmt: skip
    document = {"schema_version": "1.0", **target.carried}
    # a genai_config search section: its greedy default and its length bound (the sampling
    # parameters have nothing to feed: the workflow decodes greedily)
    defaults = {k: v for k, v in target.defaults.items() if k in ("do_sample", "max_length")}
    if defaults and "generation" not in document:
        document["generation"] = {"defaults": defaults}
    document["pipeline"] = {
        "workflow": {
            "manifest": {"capabilities": capabilities},
            "inputs": inputs,
            "outputs": outputs,
            "components": components,
            "state": state,
            "serving": {
                "active": "active",
                "done": "done",
                "accepted_len": "accepted",
                "state_service": {"groups": groups},
            },
            "steps": steps,
        }
    }
    document["speculative"] = speculative
    return document
