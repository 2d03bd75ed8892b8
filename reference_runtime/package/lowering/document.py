"""The canonical workflow of a bare decoder: a pure function of its :class:`DecoderABI`.

The document is what an author would write for the decoder by hand: a prefill in the loop's
setup, then per iteration the token policy, a per-row emit and one decode step, with the KV
cells in a runtime-managed state service group. Both components are ``binding`` components
keyed by contract id, run by this runtime's contract executors
(``reference_runtime.executors.decoding``); the decoder graph itself runs beneath them through
the ordinary component seam (ONNX Runtime or the native executor). Contract parameters are
scalars (upstream ``ScalarValue``): the graph's KV names are the decoder component's own KV
ports, and the end ids reach the policy as a literal input.
"""

from __future__ import annotations

import yaml

from .abi import DecoderABI

DECODE_CONTRACT = "onnx-genai.autoregressive-decode"
POLICY_CONTRACT = "onnx-genai.token-policy"
BATCH_CONTRACT = "onnx-genai.continuous-batch"
CONTRACT_VERSION = "1"
# the batch slots a lowered decoder's continuous-batch component allows (Engine.serve's default)
LOWERED_MAX_SLOTS = 8


def _contract(dtype: str, *shape, aligned: bool = True, optional: bool = False) -> dict:
    out: dict = {"dtype": dtype, "rank": len(shape), "shape": list(shape)}
    if aligned:
        out["batch_layout"] = {"kind": "request_aligned", "axis": 0}
    if optional:
        out["optional"] = True
    return out


def _request(contract: dict, role: str, default=None) -> dict:
    out = {
        "contract": contract,
        "role": {"kind": "runtime", "version": "1.0", "role": role},
        "source": {"kind": "request"},
        "required": default is None,
    }
    if default is not None:
        out["default"] = default
    return out


def request_inputs(abi: DecoderABI) -> dict:
    """The inputs every lowered decoder takes from a request: its prompt rows (left-aligned),
    each row's length (-1: the whole row) and the new-token bound."""
    return {
        "request.prompt_tokens": _request(
            _contract("int64", "batch", "prompt_sequence"), "prompt_tokens"
        ),
        "request.prompt_lengths": {
            "contract": _contract("int64", "batch"),
            "role": {"kind": "opaque"},
            "source": {"kind": "application", "name": "prompt_lengths"},
            "required": False,
            "default": -1,
        },
        "request.max_new_tokens": _request(
            _contract("int64", 1, aligned=False), "max_output_tokens", default_max_new_tokens(abi)
        ),
    }


def _literal(contract: dict, value) -> dict:
    return {
        "contract": contract,
        "role": {"kind": "opaque"},
        "source": {"kind": "literal"},
        "required": False,
        "default": value,
    }


def _cell(contract: dict, initializer: str, recurrence: dict, **extra) -> dict:
    return {
        "contract": contract,
        "scope": "invocation",
        "class": "semantic",
        "initializer": initializer,
        "recurrence": recurrence,
        **extra,
    }


def default_max_new_tokens(abi: DecoderABI) -> int:
    """The ``max_new_tokens`` input's own default: the context bound (a request that does not
    say is bounded by ``generation.defaults.max_length`` first, where the package declares it)."""
    if isinstance(abi.context_length, int) and abi.context_length > 0:
        return abi.context_length
    return 256


def batches(abi: DecoderABI) -> bool:
    """Whether the lowered loop may be served in a continuous batch: unless the package's
    ``model.runtime_configurable.continuous_batching`` says it may not."""
    configurable = abi.carried.get("model", {}).get("runtime_configurable") or {}
    return configurable.get("continuous_batching") is not False


def lower_abi(abi: DecoderABI) -> dict:
    batch = _contract
    vocab = abi.vocab_size
    one = _contract("int64", 1, aligned=False)
    kv_inputs = {
        p.input: _contract(abi.kv_dtype, *p.shape, optional=True) for p in abi.kv
    }  # past, absent at prefill
    kv_outputs = {
        p.output: _contract(
            abi.kv_dtype, *("total_sequence" if d == "past_sequence" else d for d in p.shape)
        )
        for p in abi.kv
    }
    decoder = {
        "implementation": {"kind": "binding"},
        "ports": {
            "inputs": {
                "tokens": batch("int64", "batch", "step"),
                "lengths": batch("int64", "batch"),
                "attention_mask": batch("int64", "batch", "past_sequence", optional=True),
                "max_new_tokens": _contract("int64", 1, aligned=False, optional=True),
                **kv_inputs,
            },
            "outputs": {
                "logits": batch(abi.logits_dtype, "batch", vocab),
                "attention_mask": batch("int64", "batch", "total_sequence"),
                "sequence_lengths": batch("int64", "batch"),
                "capacity": _contract("int64", 1, aligned=False, optional=True),
                **kv_outputs,
            },
            "roles": {"tokens": "token_ids", "logits": "logits"},
        },
        "contract": {
            "id": DECODE_CONTRACT,
            "version": CONTRACT_VERSION,
            "bindings": {"tokens": "tokens", "logits": "logits"},
            "parameters": {
                "artifact": abi.artifact,
                "token_input": abi.token_input,
                "logits_output": abi.logits_output,
                "attention_mask_input": abi.attention_mask_input or "",
                "position_ids_input": abi.position_ids_input or "",
                "padding": abi.padding,
                "pad_token_id": abi.pad_token_id,
            },
        },
    }
    end_ids = list(abi.eos_token_ids)
    policy = {
        "implementation": {"kind": "binding"},
        "ports": {
            "inputs": {
                "logits": batch(abi.logits_dtype, "batch", vocab),
                "active": batch("bool", "batch"),
                "generated": batch("int64", "batch"),
                "sequence_lengths": batch("int64", "batch"),
                # one bound for every row, or one per row (a served batch's requests)
                "max_new_tokens": _contract("int64", "limits", aligned=False),
                "temperature": batch("float32", "batch"),
                "top_k": batch("int64", "batch"),
                "top_p": batch("float32", "batch"),
                "min_p": batch("float32", "batch"),
                "seed": batch("int64", "batch"),
                "eos_token_ids": _contract("int64", "end_ids", aligned=False, optional=True),
            },
            "outputs": {
                "token": batch("int64", "batch", 1),
                "next_active": batch("bool", "batch"),
                "done": batch("bool", "batch"),
                "generated": batch("int64", "batch"),
                "finish_reason": batch("int64", "batch"),
                "step_lengths": batch("int64", "batch"),
                "emitted": batch("bool", "batch"),
            },
        },
        "contract": {
            "id": POLICY_CONTRACT,
            "version": CONTRACT_VERSION,
            "bindings": {"logits": "logits", "token": "token"},
            "parameters": {
                "context_length": abi.context_length or 0,
                "max_length": abi.max_length,
                "pad_token_id": abi.pad_token_id,
            },
        },
    }
    batcher = {
        "implementation": {"kind": "binding"},
        "ports": {
            "inputs": {
                "active": batch("bool", "batch"),
                "next_active": batch("bool", "batch"),
                "accepted": batch("int64", "batch"),
            },
            "outputs": {
                "live": _contract("bool", 1, aligned=False),
                "accepted_len": batch("int64", "batch"),
            },
        },
        "contract": {
            "id": BATCH_CONTRACT,
            "version": CONTRACT_VERSION,
            "parameters": {"max_slots": LOWERED_MAX_SLOTS},
        },
    }
    # A request that does not say takes generation.defaults first (do_sample, temperature,
    # top_k, top_p, max_length), then these inputs' own defaults: the values sampling uses
    # when nothing narrows it (temperature 1, no top-k/top-p/min-p filter).
    inputs = {
        **request_inputs(abi),
        "request.temperature": _request(batch("float32", "batch"), "sampling_temperature", 1.0),
        "request.top_k": _request(batch("int64", "batch"), "sampling_top_k", 0),
        "request.top_p": _request(batch("float32", "batch"), "sampling_top_p", 1.0),
        "request.min_p": _request(batch("float32", "batch"), "sampling_min_p", 0.0),
        "request.seed": _request(batch("int64", "batch"), "seed", abi.seed),
        "package.active": _literal(batch("bool", "batch"), True),
        "package.not_done": _literal(batch("bool", "batch"), False),
        "package.zero": _literal(batch("int64", "batch"), 0),
        "package.one": _literal(one, 1),
        # every row accepts one token per decode step
        "package.one_row": _literal(batch("int64", "batch"), 1),
    }
    if end_ids:
        inputs["package.eos_token_ids"] = _literal(
            _contract("int64", len(end_ids), aligned=False), end_ids
        )
    outputs = {
        "tokens": {
            "contract": batch("int64", "batch", "generated_sequence"),
            "role": "tokens",
            "stage": "pre_adapter",
        },
        "finish_reasons": {
            "contract": batch("int64", "batch"),
            "role": "tensor",
            "stage": "pre_adapter",
        },
    }
    invariant = {"kind": "invariant"}
    # The cache axis holds the prompt (padded to the longest row) and one position per decode
    # step: the prefill reports that bound as its capacity.

    def growing(axis: int, increment: str) -> dict:
        return {"kind": "growing", "axis": axis, "increment": increment, "max": "prefill.capacity"}

    state = {
        "logits": _cell(batch(abi.logits_dtype, "batch", vocab), "prefill.logits", invariant),
        "active": _cell(batch("bool", "batch"), "package.active", invariant),
        "done": _cell(batch("bool", "batch"), "package.not_done", invariant),
        "generated": _cell(batch("int64", "batch"), "package.zero", invariant),
        "finish_reason": _cell(batch("int64", "batch"), "package.zero", invariant),
        "sequence_lengths": _cell(batch("int64", "batch"), "prefill.sequence_lengths", invariant),
        "attention_mask": _cell(
            batch("int64", "batch", "mask_sequence"),
            "prefill.attention_mask",
            growing(1, "package.one"),
        ),
        # The conversation of a session: each turn's prompt is what it holds followed by the
        # new tokens; after the turn it holds that prompt plus the tokens the turn published.
        "conversation": {
            "contract": _contract("int64", 1, "conversation", aligned=False),
            "scope": "session",
            "class": "semantic",
            "initializer": "request.prompt_tokens",
            "recurrence": growing(1, "package.one"),
            "management": "runtime",
            "release_boundary": "session",
            "session": {
                "policy": "exclusive",
                "continuation": {
                    "kind": "prompt_prefix",
                    "prompt_input": "request.prompt_tokens",
                    "tokens_output": "tokens",
                },
            },
        },
    }

    group_ports = {}
    for pair in abi.kv:
        state[pair.cell] = _cell(
            _contract(abi.kv_dtype, *pair.shape),
            f"prefill.{pair.output}",
            growing(abi.sequence_axis, "package.one_row"),
            service_group="decoder_cache",
            management="runtime",
            release_boundary="invocation",
        )
        port = {"input": pair.input, "output": pair.output}
        if pair.role is not None:
            port["role"] = pair.role
        if pair.layer is not None:
            port["layer"] = pair.layer
        group_ports[pair.cell] = port
    serving = {
        "active": "active",
        "done": "done",
        "accepted_len": "package.one_row",
        "state_service": {
            "groups": {
                "decoder_cache": {
                    "kind": "full_attention",
                    "layout": "bnsh" if abi.sequence_axis == 2 else f"axis{abi.sequence_axis}",
                    "sequence_axis": abi.sequence_axis,
                    "logical_lengths": "sequence_lengths",
                    "aliasing": abi.aliasing,
                    "ports": {"decoder": group_ports},
                }
            }
        },
    }
    prefill = {
        "kind": "invoke",
        "component": "decoder",
        "inputs": {
            "tokens": "request.prompt_tokens",
            "lengths": "request.prompt_lengths",
            "max_new_tokens": "request.max_new_tokens",
        },
        "outputs": {
            "logits": "prefill.logits",
            "attention_mask": "prefill.attention_mask",
            "sequence_lengths": "prefill.sequence_lengths",
            "capacity": "prefill.capacity",
            **{p.output: f"prefill.{p.output}" for p in abi.kv},
        },
    }
    select = {
        "kind": "invoke",
        "component": "policy",
        "inputs": {
            "logits": "logits",
            "active": "active",
            "generated": "generated",
            "sequence_lengths": "sequence_lengths",
            "max_new_tokens": "request.max_new_tokens",
            "temperature": "request.temperature",
            "top_k": "request.top_k",
            "top_p": "request.top_p",
            "min_p": "request.min_p",
            "seed": "request.seed",
            **({"eos_token_ids": "package.eos_token_ids"} if end_ids else {}),
        },
        "outputs": {
            "token": "step.token",
            "next_active": "step.active",
            "done": "step.done",
            "generated": "step.generated",
            "finish_reason": "step.finish_reason",
            "step_lengths": "step.lengths",
            "emitted": "step.emitted",
        },
    }
    emit = {
        "kind": "emit",
        "value": "step.token",
        "output": "tokens",
        "mode": "append",
        "when": "step.emitted",
    }
    decode = {
        "kind": "invoke",
        "component": "decoder",
        "inputs": {
            "tokens": "step.token",
            "lengths": "step.lengths",
            "attention_mask": "attention_mask",
            **{p.input: p.cell for p in abi.kv},
        },
        "outputs": {
            "logits": "step.logits",
            "attention_mask": "step.attention_mask",
            "sequence_lengths": "step.sequence_lengths",
            **{p.output: f"step.{p.output}" for p in abi.kv},
        },
    }
    # the batch's liveness bit and each row's progress in this step (one token per row that ran)
    progress = {
        "kind": "invoke",
        "component": "batch",
        "inputs": {"active": "active", "next_active": "step.active", "accepted": "package.one_row"},
        "outputs": {"live": "step.live", "accepted_len": "step.accepted_len"},
    }
    carried = [
        {"cell": "logits", "next": "step.logits"},
        {"cell": "active", "next": "step.active"},
        {"cell": "done", "next": "step.done"},
        {"cell": "generated", "next": "step.generated"},
        {"cell": "finish_reason", "next": "step.finish_reason"},
        {"cell": "sequence_lengths", "next": "step.sequence_lengths"},
        {"cell": "attention_mask", "next": "step.attention_mask"},
        *({"cell": p.cell, "next": f"step.{p.output}"} for p in abi.kv),
    ]
    loop = {
        "kind": "loop",
        "setup": [prefill],
        "steps": [select, emit, decode, *([progress] if batches(abi) else [])],
        "continue_when": "active",
        "max_iterations": "request.max_new_tokens",
        "carried": carried,
    }
    finish = {
        "kind": "emit",
        "value": "finish_reason",
        "output": "finish_reasons",
        "mode": "replace",
    }
    capabilities = [
        "workflow_ssa", "linear_effects", "nested_control_flow", "typed_emit",
        "loop_carried_state", "control_flow_loop", "serving_service_contract", "kv_cache",
        "session_state_lease",
    ]  # fmt: skip
    components = {"decoder": decoder, "policy": policy}
    if batches(abi):
        capabilities.append("continuous_batching")
        components["batch"] = batcher
    document = {"schema_version": "1.0", **abi.carried}
    if abi.defaults and "generation" not in document:
        document["generation"] = {"defaults": dict(abi.defaults)}
    document["pipeline"] = {
        "workflow": {
            "manifest": {"capabilities": capabilities},
            "inputs": inputs,
            "outputs": outputs,
            "components": components,
            "state": state,
            "serving": serving,
            "steps": [loop, finish],
        }
    }
    return document


class _Dumper(yaml.SafeDumper):
    """Writes a value used twice in full each time (no YAML anchors or aliases)."""

    def ignore_aliases(self, data) -> bool:
        return True


def to_yaml(document: dict) -> str:
    """Deterministic YAML text (insertion order, block style, no line folding, no aliases)."""
    return yaml.dump(
        document, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1 << 16
    )
