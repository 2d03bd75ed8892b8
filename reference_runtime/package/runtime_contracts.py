"""The runtime contracts this runtime implements, as the loader checks them (rule C92): the
parameters and ports a ``binding`` component keyed to ``onnx-genai.autoregressive-decode@1``,
``onnx-genai.token-policy@1`` or ``onnx-genai.continuous-batch@1`` must declare (their
executors are in ``executors/decoding.py`` and ``executors/batching.py``; docs/lowering.md
describes them), and those of ``onnx-genai.speculative-block@1`` (``executors/speculative.py``;
docs/speculative.md; what it needs of the ``speculative`` section is checked by the F rules of
``rules/speculative.py``)."""

from __future__ import annotations

from ..dtypes import canonical
from .artifacts import TextGraphTooLarge, confine, graph_problems, load_model, signature

DECODE_CONTRACT = "onnx-genai.autoregressive-decode"
POLICY_CONTRACT = "onnx-genai.token-policy"
SPECULATIVE_CONTRACT = "onnx-genai.speculative-block"
BATCH_CONTRACT = "onnx-genai.continuous-batch"
# the key under which a serving loop tells the batch executor how many requests wait for a slot
# (in the running request's context state)
BATCH_WAITING = "onnx-genai.continuous-batch/waiting"

DECODE_PARAMETERS = {
    "artifact", "token_input", "logits_output", "attention_mask_input", "position_ids_input",
    "padding", "pad_token_id",
}  # fmt: skip
POLICY_PARAMETERS = {"context_length", "max_length", "pad_token_id"}
# the target graph's names, the stop bound and the pad id; a block proposal also names the
# proposer graph's (checked by rule F115, since only a block proposal reads them)
SPECULATIVE_PARAMETERS = {
    "target_tokens_input", "target_mask_input", "target_positions_input",
    "target_logits_output", "context_length", "pad_token_id",
}  # fmt: skip
BLOCK_PARAMETERS = (
    "proposer_tokens_input", "proposer_mask_input", "proposer_positions_input", "proposal_output",
)  # fmt: skip
BATCH_PARAMETERS = {"max_slots"}
# Input ports of runtime contracts that take one value for every row ([1]) or one per row
# ([batch]): a served batch gives them one per row where its requests disagree.
SHARED_OR_PER_ROW_PORTS = {POLICY_CONTRACT: frozenset({"max_new_tokens"})}
# The decode contract's own ports; every other port of the component is a graph KV port.
DECODE_INPUT_PORTS = ("tokens", "lengths", "attention_mask", "max_new_tokens")
DECODE_OUTPUT_PORTS = ("logits", "attention_mask", "sequence_lengths", "capacity")


def kv_ports(ports) -> tuple[list[str], list[str]]:
    """The past-KV input ports and present-KV output ports of a decode component (the ports
    that are not the contract's own), each in declaration order: they pair up positionally."""
    inputs = [p for p in (ports.inputs if ports else ()) if p not in DECODE_INPUT_PORTS]
    outputs = [p for p in (ports.outputs if ports else ()) if p not in DECODE_OUTPUT_PORTS]
    return inputs, outputs


REQUIRED_PORTS = {
    "onnx-genai.autoregressive-decode": (
        ("tokens", "lengths"),
        ("logits", "attention_mask", "sequence_lengths"),
    ),
    "onnx-genai.token-policy": (
        ("logits", "active", "generated", "sequence_lengths", "max_new_tokens", "temperature",
         "top_k", "top_p", "min_p", "seed"),
        ("token", "next_active", "done", "generated", "finish_reason", "step_lengths",
         "emitted"),
    ),
    "onnx-genai.speculative-block": (
        ("max_new_tokens",),
        ("tokens", "accepted_len", "next_active", "running", "done", "generated",
         "finish_reason", "pending", "pending_lengths", "target_mask"),
    ),
    "onnx-genai.continuous-batch": (("active", "next_active", "accepted"), ("live", "accepted_len")),
}  # fmt: skip
KNOWN_PARAMETERS = {
    "onnx-genai.autoregressive-decode": DECODE_PARAMETERS,
    "onnx-genai.token-policy": POLICY_PARAMETERS,
    "onnx-genai.speculative-block": SPECULATIVE_PARAMETERS | set(BLOCK_PARAMETERS) | {"max_length"},
    "onnx-genai.continuous-batch": BATCH_PARAMETERS,
}
# a speculative-block's max_length: the total length bound of the token policy (0: none)
OPTIONAL_PARAMETERS = {"onnx-genai.speculative-block": {*BLOCK_PARAMETERS, "max_length"}}


def contract_problems(root, contract, ports) -> list[tuple[tuple, str, str]]:
    """What a runtime-contract component declares that its executor cannot run with:
    ``[(path below the component, message, code)]``. The code is C92, but for a decoder graph
    refused for what it holds, which keeps the code of its own rule (C104, C105, C125, ...)."""
    return [_coded(*item) for item in _problems(root, contract, ports)]


def _coded(where: tuple, message: str, code: str = "C92") -> tuple[tuple, str, str]:
    return where, message, code


def _problems(root, contract, ports) -> list[tuple[tuple, str]]:
    """``[(path below the component, message)]`` for C92; ``(path, message, code)`` for the
    decoder graph refused for what it holds."""
    known = KNOWN_PARAMETERS.get(contract.id)
    if known is None:
        return []
    parameters = dict(contract.parameters)
    found = []
    for key in sorted(known - set(parameters) - OPTIONAL_PARAMETERS.get(contract.id, set())):
        found.append((("contract", "parameters"), f"parameter {key!r} is missing"))
    for key in sorted(set(parameters) - known):
        found.append((("contract", "parameters", key), f"parameter {key!r} is unknown"))
    need_in, need_out = REQUIRED_PORTS[contract.id]
    declared_in = set((ports.inputs or {}) if ports else ())
    declared_out = set((ports.outputs or {}) if ports else ())
    for port in need_in:
        if port not in declared_in:
            found.append((("ports", "inputs"), f"input port {port!r} is not declared"))
    for port in need_out:
        if port not in declared_out:
            found.append((("ports", "outputs"), f"output port {port!r} is not declared"))
    if contract.id != DECODE_CONTRACT or found:
        return found
    if parameters["padding"] not in ("left", "right"):
        found.append((("contract", "parameters", "padding"), "padding is not left or right"))
    path, problem = confine(root, str(parameters["artifact"]))
    if problem:
        return [*found, (("contract", "parameters", "artifact"), problem)]
    try:
        model = load_model(path)
        sig = signature(model, path)
    except TextGraphTooLarge as exc:
        return [*found, (("contract", "parameters", "artifact"), f"decoder graph: {exc}", "C103")]
    except Exception as exc:  # onnx raises DecodeError, ParseError, ...
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return [*found, (("contract", "parameters", "artifact"), f"unreadable graph: {first}")]
    refused = graph_problems(model, path.parent)
    if refused:
        code, why = refused[0]
        return [*found, (("contract", "parameters", "artifact"), f"decoder graph: {why}", code)]
    for key in ("token_input", "logits_output", "attention_mask_input", "position_ids_input"):
        if not isinstance(parameters[key], str):
            found.append((("contract", "parameters", key), f"{key} is not a graph name (string)"))
    if found:
        return found
    graph_inputs = [parameters["token_input"]]
    graph_inputs += [
        parameters[k] for k in ("attention_mask_input", "position_ids_input") if parameters[k]
    ]
    for name in graph_inputs:
        if name not in sig.inputs:
            found.append((("contract", "parameters"), f"the decoder graph has no input {name!r}"))
    if parameters["logits_output"] not in sig.outputs:
        found.append(
            (
                ("contract", "parameters"),
                f"the decoder graph has no output {parameters['logits_output']!r}",
            )
        )
    kv_in, kv_out = kv_ports(ports)
    for side, names, values in (("input", kv_in, sig.inputs), ("output", kv_out, sig.outputs)):
        for name in names:
            where = ("ports", f"{side}s", name)
            value = values.get(name)
            if value is None:
                found.append((where, f"the decoder graph has no KV {side} {name!r}"))
                continue
            # the executor feeds the cells to the graph as they are: a KV port is its graph value
            declared = getattr(ports, f"{side}s")[name]
            for key, want, have in (
                ("dtype", canonical(declared.dtype), value.dtype),
                ("rank", declared.rank, value.rank),
            ):
                if have is not None and want != have:
                    found.append(
                        (
                            (*where, key),
                            f"KV {side} port {name!r} declares {key} {want} but the decoder "
                            f"graph's {side} is {have}",
                        )
                    )
    if len(kv_in) != len(kv_out):
        found.append(
            (
                ("ports", "outputs"),
                f"{len(kv_in)} KV input port(s) but {len(kv_out)} KV output port(s); they pair "
                "up one to one",
            )
        )
    if "capacity" in declared_out and "max_new_tokens" not in declared_in:
        found.append((("ports", "inputs"), "output 'capacity' needs the input 'max_new_tokens'"))
    return found
