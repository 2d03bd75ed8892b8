"""The declared ABI of a bare decoder, read from legacy ``model.io`` metadata or from an
onnxruntime-genai ``genai_config.json`` folder, and checked against the decoder graph.

Everything lowering needs is read from what the package declares (names, KV layout, end ids,
context bound, search defaults); nothing is guessed from a model's name. A key this runtime
does not know, or a value it cannot honour (beam search, repetition penalty, ...), is refused
with rule H91, naming the key.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import PackageError, Violation
from ..package.artifacts import confine, load_model, signature
from ..package.parse import find_metadata, parse_metadata
from ..package.rules.catalogue import hint_for

GENAI_CONFIG = "genai_config.json"
CARRIED_SECTIONS = ("package", "generation", "hardware_requirements")

# onnxruntime-genai model types that are plain decoder-only language models.
DECODER_TYPES = frozenset(
    {
        "chatglm", "gemma", "gemma2", "gemma3_text", "gpt2", "granite", "llama", "mistral",
        "nemotron", "olmo", "phi", "phi3", "phi3small", "phimoe", "qwen2", "qwen3", "smollm3",
    }
)  # fmt: skip

_MODEL_KEYS = {
    "type", "context_length", "vocab_size", "bos_token_id", "eos_token_id", "pad_token_id",
    "decoder_start_token_id", "sep_token_id", "decoder",
}  # fmt: skip
_DECODER_KEYS = {
    "filename", "head_size", "hidden_size", "num_attention_heads", "num_key_value_heads",
    "num_hidden_layers", "session_options", "inputs", "outputs",
}  # fmt: skip
_DECODER_INPUT_KEYS = {
    "input_ids", "attention_mask", "position_ids", "past_key_names", "past_value_names",
}  # fmt: skip
_DECODER_OUTPUT_KEYS = {"logits", "present_key_names", "present_value_names"}
# Execution hints: accepted, and without effect on results.
_SESSION_OPTION_KEYS = {
    "log_id", "provider_options", "intra_op_num_threads", "inter_op_num_threads",
    "enable_profiling", "log_severity_level", "enable_cpu_mem_arena", "enable_mem_pattern",
    "graph_optimization_level", "custom_ops_library", "use_env_allocators",
}  # fmt: skip
# search key -> the only value this runtime can honour (None: any value is honoured)
_SEARCH_KEYS = {
    "max_length": None,
    "min_length": 0,
    "do_sample": None,
    "num_beams": 1,
    "num_return_sequences": 1,
    "temperature": None,
    "top_k": None,
    "top_p": None,
    "random_seed": None,
    "repetition_penalty": 1.0,
    "diversity_penalty": 0.0,
    "no_repeat_ngram_size": 0,
    "length_penalty": None,  # beam search only; no effect with one beam
    "early_stopping": None,  # beam search only
    "past_present_share_buffer": None,  # a memory layout hint
}


_IO_FIELDS = (
    "token_input", "logits_output", "attention_mask_input", "position_ids_input", "kv_inputs",
    "kv_outputs",
)  # fmt: skip


@dataclass(frozen=True)
class KVPair:
    input: str
    output: str
    layer: int
    role: str  # key | value | combined
    shape: tuple = ()  # the past contract: "batch", static ints, "past_sequence"


@dataclass(frozen=True)
class DecoderABI:
    """What lowering reads; a pure description of the package (no paths outside it)."""

    source: str  # "model_io" | "genai_config"
    artifact: str  # relative to the package folder
    token_input: str
    logits_output: str
    attention_mask_input: str | None
    position_ids_input: str | None
    kv: tuple[KVPair, ...]
    kv_dtype: str
    sequence_axis: int
    logits_dtype: str
    vocab_size: int
    eos_token_ids: tuple[int, ...]
    pad_token_id: int
    context_length: int | None
    padding: str = "left"
    search: dict = field(default_factory=dict)  # max_length, do_sample, temperature, ...
    # Sections of a model.io document carried into the lowered document as written (and so
    # validated and honoured like any authored section): package, generation, hardware.
    carried: dict = field(default_factory=dict)


class _Problems:
    def __init__(self, root: Path, prefix: tuple):
        self.root = root
        self.prefix = prefix
        self.found: list[Violation] = []

    def add(self, path: tuple, message: str) -> None:
        self.found.append(Violation("H91", (*self.prefix, *path), message, hint_for("H91")))

    def raise_if_any(self) -> None:
        if self.found:
            raise PackageError(self.root, self.found)


# ------------------------------------------------------------------ package shapes


def package_shape(root: Path) -> str:
    """``authored`` (a workflow document), ``model_io`` (legacy metadata with ``model.io`` and
    no pipeline), ``genai_config`` (an onnxruntime-genai folder) or ``none``."""
    metadata = find_metadata(root)
    if metadata is not None:
        document, _ = parse_metadata(metadata)
        return "model_io" if is_model_io(document) else "authored"
    if (root / GENAI_CONFIG).is_file():
        return "genai_config"
    return "none"


def is_model_io(document) -> bool:
    """A parsed metadata document that describes a bare decoder by ``model.io`` alone."""
    if not isinstance(document, dict) or "pipeline" in document:
        return False
    model = document.get("model")
    return isinstance(model, dict) and isinstance(model.get("io"), dict)


# ------------------------------------------------------------------ legacy model.io


def from_model_io(root: Path) -> DecoderABI:
    metadata = find_metadata(root)
    document, violations = parse_metadata(metadata)
    if violations:
        raise PackageError(root, violations)
    problems = _Problems(root, ())
    known_top = {"schema_version", "model", *CARRIED_SECTIONS}
    for key in document:
        if key not in known_top:
            problems.add((key,), f"{key!r} is not read from a bare model.io decoder package")
    model = document["model"]
    known_model = {
        "name", "architecture", "max_sequence_length", "vocab_size", "num_layers",
        "hidden_size", "num_attention_heads", "num_key_value_heads", "head_size",
        "bos_token_id", "eos_token_ids", "pad_token_id", "io", "artifact",
    }  # fmt: skip
    for key in model:
        if key not in known_model:
            problems.add(("model", key), f"unknown key {key!r} in model")
    io = model["io"]
    for key in io:
        if key not in _IO_FIELDS:
            problems.add(("model", "io", key), f"unknown key {key!r} in model.io")
    for key in ("token_input", "logits_output"):
        if not isinstance(io.get(key), str):
            problems.add(("model", "io", key), f"model.io.{key} is required (a graph name)")
    kv_in, kv_out = list(io.get("kv_inputs") or []), list(io.get("kv_outputs") or [])
    if len(kv_in) != len(kv_out):
        problems.add(
            ("model", "io", "kv_outputs"),
            f"{len(kv_in)} kv_inputs but {len(kv_out)} kv_outputs; they pair up one to one",
        )
    problems.raise_if_any()
    artifact = model.get("artifact") or _single_graph(root, problems)
    pairs = []
    for i, (a, b) in enumerate(zip(kv_in, kv_out, strict=True)):
        role = "key" if a.endswith(".key") else "value" if a.endswith(".value") else "combined"
        layer = i // 2 if role != "combined" else i
        pairs.append(KVPair(a, b, layer, role))
    eos = model.get("eos_token_ids") or ()
    return _with_graph(
        root,
        problems,
        {
            **{k: ("model", "io", k) for k in _IO_FIELDS},
            "artifact": ("model", "artifact"),
            "inputs": ("model", "io"),
            "vocab_size": ("model", "vocab_size"),
        },
        source="model_io",
        artifact=artifact,
        token_input=io["token_input"],
        logits_output=io["logits_output"],
        attention_mask_input=io.get("attention_mask_input"),
        position_ids_input=io.get("position_ids_input"),
        kv=tuple(pairs),
        eos_token_ids=tuple(int(e) for e in eos),
        pad_token_id=int(model.get("pad_token_id") or 0),
        context_length=model.get("max_sequence_length"),
        vocab_size=model.get("vocab_size"),
        search={},
        carried={k: document[k] for k in CARRIED_SECTIONS if k in document},
    )


def _single_graph(root: Path, problems: _Problems) -> str:
    graphs = sorted(p.name for p in root.iterdir() if p.name.endswith((".onnx", ".onnx.textproto")))
    if len(graphs) != 1:
        problems.add(
            ("model",),
            f"the package folder holds {len(graphs)} ONNX graphs ({', '.join(graphs) or 'none'})"
            "; a model.io package has exactly one, or names it in model.artifact",
        )
        problems.raise_if_any()
    return graphs[0]


# ------------------------------------------------------------------ onnxruntime-genai


def from_genai_config(root: Path) -> DecoderABI:
    problems = _Problems(root, (GENAI_CONFIG,))
    try:
        config = json.loads((root / GENAI_CONFIG).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        problems.add((), f"{GENAI_CONFIG} cannot be read as JSON: {exc}")
        problems.raise_if_any()
    if not isinstance(config, dict):
        problems.add((), f"{GENAI_CONFIG} must hold an object")
        problems.raise_if_any()
    for key in config:
        if key not in ("model", "search"):
            problems.add((key,), f"unknown or unsupported key {key!r}")
    model = _object(config, "model", problems, ())
    search = _object(config, "search", problems, (), required=False)
    decoder = _object(model, "decoder", problems, ("model",))
    _known(model, _MODEL_KEYS, problems, ("model",))
    _known(decoder, _DECODER_KEYS, problems, ("model", "decoder"))
    inputs = _object(decoder, "inputs", problems, ("model", "decoder"))
    outputs = _object(decoder, "outputs", problems, ("model", "decoder"))
    _known(inputs, _DECODER_INPUT_KEYS, problems, ("model", "decoder", "inputs"))
    _known(outputs, _DECODER_OUTPUT_KEYS, problems, ("model", "decoder", "outputs"))
    options = decoder.get("session_options") or {}
    if isinstance(options, dict):
        _known(options, _SESSION_OPTION_KEYS, problems, ("model", "decoder", "session_options"))
    model_type = model.get("type")
    if model_type not in DECODER_TYPES:
        problems.add(
            ("model", "type"),
            f"model type {model_type!r} is not a decoder-only type this runtime lowers "
            f"(supported: {', '.join(sorted(DECODER_TYPES))})",
        )
    for key, value in search.items():
        if key not in _SEARCH_KEYS:
            problems.add(("search", key), f"unknown or unsupported search option {key!r}")
        elif _SEARCH_KEYS[key] is not None and value != _SEARCH_KEYS[key]:
            problems.add(
                ("search", key),
                f"search.{key} = {value!r} is not supported (only {_SEARCH_KEYS[key]!r})",
            )
    for key in ("num_hidden_layers", "filename"):
        if key not in decoder:
            problems.add(("model", "decoder", key), f"model.decoder.{key} is required")
    problems.raise_if_any()
    layers = int(decoder["num_hidden_layers"])
    pairs = []
    for kind in ("key", "value"):
        past = inputs.get(f"past_{kind}_names", f"past_key_values.%d.{kind}")
        present = outputs.get(f"present_{kind}_names", f"present.%d.{kind}")
        for layer in range(layers):
            pairs.append(KVPair(_name(past, layer), _name(present, layer), layer, kind))
    pairs.sort(key=lambda p: (p.layer, p.role))
    eos = model.get("eos_token_id", ())
    eos = (eos,) if isinstance(eos, int) else tuple(eos)
    pad = model.get("pad_token_id")
    if pad is None:
        pad = eos[0] if eos else 0
    defaults = {
        key: search[key]
        for key in ("max_length", "do_sample", "temperature", "top_k", "top_p", "random_seed")
        if key in search
    }
    return _with_graph(
        root,
        problems,
        {
            "artifact": ("model", "decoder", "filename"),
            "token_input": ("model", "decoder", "inputs", "input_ids"),
            "attention_mask_input": ("model", "decoder", "inputs", "attention_mask"),
            "position_ids_input": ("model", "decoder", "inputs", "position_ids"),
            "logits_output": ("model", "decoder", "outputs", "logits"),
            "kv_inputs": ("model", "decoder", "inputs", "past_key_names"),
            "kv_outputs": ("model", "decoder", "outputs", "present_key_names"),
            "inputs": ("model", "decoder", "inputs"),
            "vocab_size": ("model", "vocab_size"),
        },
        source="genai_config",
        artifact=decoder["filename"],
        token_input=inputs.get("input_ids", "input_ids"),
        logits_output=outputs.get("logits", "logits"),
        attention_mask_input=inputs.get("attention_mask", "attention_mask"),
        position_ids_input=inputs.get("position_ids", "position_ids"),
        kv=tuple(pairs),
        eos_token_ids=tuple(int(e) for e in eos),
        pad_token_id=int(pad),
        context_length=model.get("context_length"),
        vocab_size=model.get("vocab_size"),
        search=defaults,
    )


def _name(template: str, layer: int) -> str:
    return template % layer if "%d" in template else template


def _object(parent: dict, key: str, problems: _Problems, where: tuple, required=True) -> dict:
    value = parent.get(key)
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        problems.add((*where, key), f"{'.'.join((*where, key))} must be an object")
        problems.raise_if_any()
    return value


def _known(section: dict, keys: set, problems: _Problems, where: tuple) -> None:
    for key in section:
        if key not in keys:
            problems.add((*where, key), f"unknown or unsupported key {key!r} in {'.'.join(where)}")


# ------------------------------------------------------------------ the graph


def _with_graph(
    root: Path,
    problems: _Problems,
    where: dict,
    *,
    vocab_size,
    **fields,
) -> DecoderABI:
    """Check the declared names against the decoder graph; read KV layout and vocabulary.
    ``where`` maps a field (``token_input``, ``kv``, ``artifact``, ...) to its place in the
    declaring document."""
    path, problem = confine(root, fields["artifact"])
    if problem:
        problems.add(where["artifact"], f"decoder graph: {problem}")
        problems.raise_if_any()
    try:
        sig = signature(load_model(path), path)
    except Exception as exc:  # onnx raises DecodeError, ParseError, ...
        problems.add(where["artifact"], f"decoder graph {fields['artifact']} cannot be read: {exc}")
        problems.raise_if_any()
    for key in ("attention_mask_input", "position_ids_input"):
        name = fields[key]
        if name is not None and name not in sig.inputs:
            if fields["source"] == "genai_config":
                fields[key] = None  # onnxruntime-genai feeds these only when the graph has them
            else:
                problems.add(where[key], f"the graph has no input {name!r}")
    if fields["token_input"] not in sig.inputs:
        problems.add(where["token_input"], f"the graph has no input {fields['token_input']!r}")
    if fields["logits_output"] not in sig.outputs:
        problems.add(where["logits_output"], f"the graph has no output {fields['logits_output']!r}")
    for pair in fields["kv"]:
        if pair.input not in sig.inputs:
            problems.add(where["kv_inputs"], f"the graph has no KV input {pair.input!r}")
        if pair.output not in sig.outputs:
            problems.add(where["kv_outputs"], f"the graph has no KV output {pair.output!r}")
    declared = {fields["token_input"], fields["attention_mask_input"], fields["position_ids_input"]}
    declared |= {p.input for p in fields["kv"]}
    for name in sig.required_inputs:
        if name not in declared:
            problems.add(
                where["inputs"], f"graph input {name!r} is not declared, so it could not be fed"
            )
    problems.raise_if_any()
    logits = sig.outputs[fields["logits_output"]]
    graph_vocab = logits.dims[-1] if logits.dims else None
    if isinstance(graph_vocab, int):
        if vocab_size is not None and vocab_size != graph_vocab:
            problems.add(
                where["vocab_size"],
                f"vocab_size {vocab_size} differs from the graph's logits ({graph_vocab})",
            )
        vocab_size = graph_vocab
    if not isinstance(vocab_size, int):
        problems.add(
            where["vocab_size"], "the vocabulary size is neither declared nor in the graph"
        )
    axes, kv_dtype, pairs = set(), "float32", []
    for pair in fields["kv"]:
        value = sig.inputs[pair.input]
        kv_dtype = value.dtype or "float32"
        dims = value.dims or ()
        symbolic = [i for i, d in enumerate(dims) if not isinstance(d, int)]
        if len(symbolic) != 2 or symbolic[0] != 0:
            problems.add(
                where["kv_inputs"],
                f"KV input {pair.input!r} has shape {list(dims)}: expected a symbolic batch "
                "axis 0, one symbolic sequence axis and static head sizes",
            )
            continue
        axes.add(symbolic[1])
        shape = tuple(
            "batch" if i == 0 else "past_sequence" if i == symbolic[1] else d
            for i, d in enumerate(dims)
        )
        pairs.append(dataclasses.replace(pair, shape=shape))
    if len(axes) > 1 or len({sig.inputs[p.input].dtype for p in fields["kv"]}) > 1:
        problems.add(where["kv_inputs"], "KV inputs differ in dtype or sequence axis")
    problems.raise_if_any()
    fields["kv"] = tuple(pairs)
    return DecoderABI(
        **fields,
        kv_dtype=kv_dtype,
        sequence_axis=axes.pop() if axes else 2,
        logits_dtype=logits.dtype or "float32",
        vocab_size=vocab_size,
    )


def read_abi(root: Path, shape: str) -> DecoderABI:
    return from_model_io(root) if shape == "model_io" else from_genai_config(root)
