"""The declared ABI of a bare decoder, read from legacy ``model.io`` metadata or from an
onnxruntime-genai ``genai_config.json`` folder, and checked against the decoder graph.

Everything lowering needs is read from what the package declares (names, KV pairs, end ids,
context bound, search defaults); nothing is guessed from a model's or a tensor's name.

A ``model.io`` package is a document of the format: it is checked against the published schema
and read through the typed model (``model`` is open upstream, so keys it does not define are
accepted and never read). A ``model.io`` field this runtime does not implement (embeddings as
the sequence input, shared KV, encoder inputs, static caches, ...) is refused with rule H93,
naming the field; a declared ABI that cannot be lowered (a name the graph lacks, unpaired KV
names, a genai_config key or value this runtime cannot honour) is refused with rule H91.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import PackageError, Violation
from ..artifacts import TextGraphTooLarge, confine, load_model, signature
from ..docmodel import build
from ..model import Metadata, ModelIO
from ..parse import find_metadata, parse_metadata
from ..rules.catalogue import hint_for
from ..rules.context import DocumentOrder
from ..runtime_contracts import DECODE_INPUT_PORTS, DECODE_OUTPUT_PORTS
from ..structure import schema_violations

GENAI_CONFIG = "genai_config.json"

# Top-level sections of a model.io document carried into the lowered document as written, so
# they are validated and honoured exactly like an authored document's.
CARRIED_SECTIONS = (
    "required_capabilities", "quantization", "hardware_requirements", "package", "generation",
)  # fmt: skip
# Sections that need a workflow of their own: a lowered bare decoder has none to attach them to.
UNLOWERED_SECTIONS = ("adapters", "preprocessing", "profiles", "speculative")
# `model` fields (upstream ModelCapabilities) carried into the lowered document: the facts, not
# the legacy `io` block (a workflow document never carries both).
MODEL_FACTS = (
    "attention", "max_sequence_length", "vocab_size", "runtime_configurable",
    "mixture_of_experts", "sharding",
)  # fmt: skip

# model.io (upstream ModelIoSpec), field by field: what this runtime reads, what it accepts as
# changing nothing for it, and what it does not implement (H93).
IO_READ = (
    "token_input", "logits_output", "attention_mask_input", "position_ids_input", "kv_inputs",
    "kv_outputs",
)  # fmt: skip
# field -> the one value accepted (None: any value); each is the historical default upstream
IO_ACCEPTED = {
    "sequence_source": "token_ids",
    "kv_ownership": "owned",
    "kv_layout": "head_major_bnsh",
    "aliasing": None,  # carried into the KV group; this runtime never aliases
    "hidden_output": None,  # checked against the graph, never fetched
}
IO_UNSUPPORTED = {
    "inputs_embeds_input": "embeddings as a sequence input",
    "encoder_hidden_states_input": "encoder hidden states (an encoder-decoder graph)",
    "audio_features_input": "audio features (an encoder graph)",
    "cross_kv_inputs": "cross-attention KV (an encoder-decoder graph)",
    "cross_kv_outputs": "cross-attention KV (an encoder-decoder graph)",
    "state_pairs": "loop-carried recurrent state pairs",
    "optional_inputs": "optional graph inputs with absent-value contracts",
    "static_cache": "a fixed-capacity (TensorScatter) static KV cache",
}
UNSUPPORTED_VALUES = {
    "sequence_source": "a decoder driven by embeddings (inputs_embeds)",
    "kv_ownership": "KV read from another graph (shared ownership)",
    "kv_layout": "a KV layout other than head_major_bnsh",
}

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
# search keys written to the lowered document's generation.defaults (upstream
# GenerationDefaults fields); `random_seed` has no such field and becomes the seed's default
_SEARCH_DEFAULTS = ("max_length", "do_sample", "temperature", "top_k", "top_p")


@dataclass(frozen=True)
class KVPair:
    input: str
    output: str
    index: int  # position in the declared pairing
    # key | value, and the layer: declared by onnxruntime-genai's name templates; a model.io
    # package declares pairs only, so both stay unknown (they are never guessed from names)
    role: str | None = None
    layer: int | None = None
    shape: tuple = ()  # the past contract: "batch", static ints, "past_sequence"

    @property
    def cell(self) -> str:
        """The name of the pair's state cell in the lowered workflow."""
        if self.role is None or self.layer is None:
            return f"kv_{self.index}"
        return f"kv_{self.layer}_{self.role}"


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
    # generation.defaults of the lowered document (upstream GenerationDefaults fields), from a
    # genai_config search section; a model.io document's own generation section is carried
    defaults: dict = field(default_factory=dict)
    # the total length the token policy enforces on every row (genai_config search.max_length)
    max_length: int = 0
    seed: int = 0  # the seed input's default (genai_config search.random_seed)
    aliasing: str = "forbidden"  # the KV group's aliasing (model.io.aliasing)
    # Sections of a model.io document carried into the lowered document as written (and so
    # validated and honoured like any authored section): package, generation, hardware, ...
    carried: dict = field(default_factory=dict)


class _Problems:
    def __init__(self, root: Path, prefix: tuple, document: dict | None = None):
        self.root = root
        self.prefix = prefix
        self.found: list[Violation] = []
        self.order = DocumentOrder(document) if document is not None else None

    def add(self, path: tuple, message: str, code: str = "H91") -> None:
        self.found.append(Violation(code, (*self.prefix, *path), message, hint_for(code)))

    def unsupported(self, path: tuple, message: str) -> None:
        """A valid declaration this runtime does not implement (H93)."""
        self.add(path, message, "H93")

    def raise_if_any(self) -> None:
        if self.found:
            raise PackageError(self.root, _in_document_order(self.found, self.order))


def _in_document_order(violations: list[Violation], order) -> list[Violation]:
    if order is None:
        return violations
    return sorted(violations, key=lambda v: (order(v.path), v.code, v.message))


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
    metadata_path = find_metadata(root)
    document, violations = parse_metadata(metadata_path)
    if not violations:
        violations = schema_violations(document)  # the published schema, as for any document
    if violations:
        order = DocumentOrder(document) if isinstance(document, dict) else None
        raise PackageError(root, _in_document_order(violations, order))
    metadata: Metadata = build(Metadata, document)
    problems = _Problems(root, (), document)
    for key in UNLOWERED_SECTIONS:
        if key in document:
            problems.unsupported(
                (key,),
                f"{key!r} is not lowered for a bare model.io decoder (this runtime lowers the "
                "decoder alone; declare a workflow to use it)",
            )
    model = metadata.model
    io: ModelIO = model.io
    for key, description in IO_UNSUPPORTED.items():
        if getattr(io, key):  # None, or an empty optional_inputs mapping, when not declared
            problems.unsupported(
                ("model", "io", key),
                f"model.io.{key} declares {description}, which this runtime does not implement",
            )
    for key, accepted in IO_ACCEPTED.items():
        value = getattr(io, key)
        if value is not None and accepted is not None and value != accepted:
            problems.unsupported(
                ("model", "io", key),
                f"model.io.{key} = {_shown(value)} declares {UNSUPPORTED_VALUES[key]}, which "
                f"this runtime does not implement (only {accepted!r})",
            )
    embeds = io.sequence_source == "inputs_embeds"  # refused above: no token input needed
    for key in ("token_input", "logits_output"):
        if getattr(io, key) is None and not (key == "token_input" and embeds):
            problems.unsupported(
                ("model", "io", key),
                f"model.io.{key} is not declared, and this runtime does not resolve an "
                "undeclared port from the graph's shapes",
            )
    kv_in, kv_out = io.kv_inputs or (), io.kv_outputs or ()
    if len(kv_in) != len(kv_out):
        problems.add(
            ("model", "io", "kv_outputs"),
            f"{len(kv_in)} kv_inputs but {len(kv_out)} kv_outputs; they pair up one to one",
        )
    problems.raise_if_any()
    artifact = _single_graph(root, problems)
    pairs = tuple(KVPair(a, b, i) for i, (a, b) in enumerate(zip(kv_in, kv_out, strict=True)))
    tokenizer = metadata.package.tokenizer if metadata.package else None
    special = dict(tokenizer.special_tokens) if tokenizer else {}
    eos, pad = special.get("eos"), special.get("pad")
    carried = {k: document[k] for k in CARRIED_SECTIONS if k in document}
    facts = {k: document["model"][k] for k in MODEL_FACTS if k in document["model"]}
    if facts:
        carried = {"model": facts, **carried}
    return _with_graph(
        root,
        problems,
        {
            **{k: ("model", "io", k) for k in IO_READ},
            "artifact": ("model", "io"),
            "inputs": ("model", "io"),
            "hidden_output": ("model", "io", "hidden_output"),
            "kv_layout": ("model", "io", "kv_layout" if io.kv_layout else "kv_inputs"),
            "vocab_size": ("model", "vocab_size"),
            "eos": ("package", "tokenizer", "special_tokens", "eos", "id"),
            "pad": ("package", "tokenizer", "special_tokens", "pad", "id"),
        },
        source="model_io",
        artifact=artifact,
        token_input=io.token_input,
        logits_output=io.logits_output,
        attention_mask_input=io.attention_mask_input,
        position_ids_input=io.position_ids_input,
        kv=pairs,
        eos_token_ids=(eos.id,) if eos is not None else (),
        pad_token_id=pad.id if pad is not None else 0,
        context_length=model.max_sequence_length,
        vocab_size=model.vocab_size,
        aliasing=io.aliasing or "forbidden",
        carried=carried,
        hidden_output=io.hidden_output,
    )


def _shown(value) -> str:
    return repr(value) if isinstance(value, str) else "a stride descriptor"


def _single_graph(root: Path, problems: _Problems) -> str:
    graphs = sorted(p.name for p in root.iterdir() if p.name.endswith((".onnx", ".onnx.textproto")))
    if len(graphs) != 1:
        problems.add(
            ("model", "io"),
            f"the package folder holds {len(graphs)} ONNX graphs ({', '.join(graphs) or 'none'})"
            "; a model.io package holds exactly one, the decoder",
        )
        problems.raise_if_any()
    return graphs[0]


# ------------------------------------------------------------------ onnxruntime-genai


def from_genai_config(root: Path) -> DecoderABI:
    problems = _Problems(root, (GENAI_CONFIG,))
    # the metadata parser, with its limits (A98-A102) and duplicate keys (A76)
    config, violations = parse_metadata(root / GENAI_CONFIG, prefix=(GENAI_CONFIG,))
    if violations:
        raise PackageError(root, violations)
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
    if not isinstance(model_type, str) or model_type not in DECODER_TYPES:
        problems.add(
            ("model", "type"),
            f"model type {model_type!r} is not a decoder-only type this runtime lowers "
            f"(supported: {', '.join(sorted(DECODER_TYPES))})",
        )
    _check_types(model, _MODEL_TYPES, problems, ("model",))
    _check_types(decoder, _DECODER_TYPES, problems, ("model", "decoder"))
    for where, section in (
        (("model", "decoder", "inputs"), inputs),
        (("model", "decoder", "outputs"), outputs),
    ):
        _check_types(section, dict.fromkeys(section, _NAME), problems, where)
    _check_types(search, _SEARCH_TYPES, problems, ("search",))
    eos_ids = model.get("eos_token_id")
    if isinstance(eos_ids, list) and not all(_is_int(e) for e in eos_ids):
        problems.add(
            ("model", "eos_token_id"), "model.eos_token_id must be an integer or a list of integers"
        )
    problems.raise_if_any()
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
    names = {}
    for kind in ("key", "value"):
        past = inputs.get(f"past_{kind}_names", f"past_key_values.%d.{kind}")
        present = outputs.get(f"present_{kind}_names", f"present.%d.{kind}")
        for layer in range(layers):
            names[layer, kind] = (_name(past, layer), _name(present, layer))
    pairs = [
        KVPair(*names[key], index=i, role=key[1], layer=key[0])
        for i, key in enumerate(sorted(names))
    ]
    eos = model.get("eos_token_id", ())
    eos = (eos,) if isinstance(eos, int) else tuple(eos)
    pad = model.get("pad_token_id")
    if pad is None:
        pad = eos[0] if eos else 0
    defaults = {key: search[key] for key in _SEARCH_DEFAULTS if key in search}
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
            "eos": ("model", "eos_token_id"),
            "pad": ("model", "pad_token_id") if "pad_token_id" in model else None,
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
        defaults=defaults,
        max_length=int(search.get("max_length") or 0),
        seed=max(int(search.get("random_seed", 0)), 0),  # -1: "random" in onnxruntime-genai
    )


def _name(template: str, layer: int) -> str:
    return template.replace("%d", str(layer))


# Kinds of genai_config values: what each field must hold before lowering reads it.
_INT = ("an integer", lambda v: _is_int(v))
_COUNT = ("an integer >= 0", lambda v: _is_int(v) and v >= 0)
_POSITIVE = ("an integer >= 1", lambda v: _is_int(v) and v >= 1)
_TOKEN = ("a token id (an integer >= 0)", lambda v: _is_int(v) and v >= 0)
_NUMBER = ("a number", lambda v: _is_int(v) or (isinstance(v, float) and math.isfinite(v)))
_BOOL = ("true or false", lambda v: isinstance(v, bool))
_NAME = ("a non-empty string", lambda v: isinstance(v, str) and v != "")
_OBJECT = ("an object", lambda v: isinstance(v, dict))
_EOS = (
    "a token id or a list of token ids",
    lambda v: (_is_int(v) and v >= 0) or isinstance(v, list),
)
# Layers are enumerated before the graph is read: bounded, so a hostile count cannot hang.
MAX_LAYERS = 4096
_LAYERS = (f"an integer from 0 to {MAX_LAYERS}", lambda v: _is_int(v) and 0 <= v <= MAX_LAYERS)

_MODEL_TYPES = {
    "type": _NAME, "context_length": _POSITIVE, "vocab_size": _POSITIVE,
    "bos_token_id": _INT, "eos_token_id": _EOS, "pad_token_id": _TOKEN,
    "decoder_start_token_id": _INT, "sep_token_id": _INT, "decoder": _OBJECT,
}  # fmt: skip
_DECODER_TYPES = {
    "filename": _NAME, "head_size": _COUNT, "hidden_size": _COUNT,
    "num_attention_heads": _COUNT, "num_key_value_heads": _COUNT,
    "num_hidden_layers": _LAYERS, "session_options": _OBJECT, "inputs": _OBJECT,
    "outputs": _OBJECT,
}  # fmt: skip
_SEARCH_TYPES = {
    "max_length": _COUNT, "min_length": _COUNT, "do_sample": _BOOL, "num_beams": _INT,
    "num_return_sequences": _INT, "temperature": _NUMBER, "top_k": _COUNT, "top_p": _NUMBER,
    "random_seed": _INT, "repetition_penalty": _NUMBER, "diversity_penalty": _NUMBER,
    "no_repeat_ngram_size": _COUNT, "length_penalty": _NUMBER, "early_stopping": _BOOL,
    "past_present_share_buffer": _BOOL,
}  # fmt: skip


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63


def _check_types(section: dict, kinds: dict, problems: _Problems, where: tuple) -> None:
    """H91 for every field of ``section`` whose value is not of the kind lowering reads."""
    for key, (kind, holds) in kinds.items():
        if key in section and not holds(section[key]):
            value = section[key]
            shown = (
                repr(value)
                if isinstance(value, (int, float, str, bool)) or value is None
                else type(value).__name__
            )
            if len(shown) > 40:
                shown = shown[:37] + "..."
            problems.add((*where, key), f"{'.'.join((*where, key))} must be {kind}, not {shown}")


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
    hidden_output: str | None = None,
    **fields,
) -> DecoderABI:
    """Check the declared names against the decoder graph; read KV layout and vocabulary.
    ``where`` maps a field (``token_input``, ``kv_inputs``, ``artifact``, ...) to its place in
    the declaring document."""
    path, problem = confine(root, fields["artifact"])
    if problem:
        problems.add(where["artifact"], f"decoder graph: {problem}")
        problems.raise_if_any()
    try:
        sig = signature(load_model(path), path)
    except TextGraphTooLarge as exc:
        problems.add(where["artifact"], f"decoder graph: {exc}", "C103")
        problems.raise_if_any()
    except Exception as exc:  # onnx raises DecodeError, ParseError, ...
        problems.add(where["artifact"], f"decoder graph {fields['artifact']} cannot be read: {exc}")
        problems.raise_if_any()
    model_io = fields["source"] == "model_io"
    for key in ("attention_mask_input", "position_ids_input"):
        name = fields[key]
        if name is not None and name not in sig.inputs:
            if not model_io:
                fields[key] = None  # onnxruntime-genai feeds these only when the graph has them
            else:
                problems.add(where[key], f"the graph has no input {name!r}")
    if fields["token_input"] not in sig.inputs:
        problems.add(where["token_input"], f"the graph has no input {fields['token_input']!r}")
    if fields["logits_output"] not in sig.outputs:
        problems.add(where["logits_output"], f"the graph has no output {fields['logits_output']!r}")
    if hidden_output is not None and hidden_output not in sig.outputs:
        problems.add(where["hidden_output"], f"the graph has no output {hidden_output!r}")
    for pair in fields["kv"]:
        for name, own in ((pair.input, DECODE_INPUT_PORTS), (pair.output, DECODE_OUTPUT_PORTS)):
            if name in own:  # the KV names become the decode component's own ports
                problems.add(
                    where["kv_inputs" if own is DECODE_INPUT_PORTS else "kv_outputs"],
                    f"KV name {name!r} is a port of the decode contract; this runtime cannot "
                    "lower a graph whose KV tensor has that name",
                )
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
    else:
        tokens = [("eos", t) for t in fields["eos_token_ids"]]
        if where.get("pad") is not None:  # a declared pad id (the default is an end id, or 0)
            tokens.append(("pad", fields["pad_token_id"]))
        for what, token in tokens:
            if not 0 <= token < vocab_size:
                problems.add(
                    where[what],
                    f"{'end' if what == 'eos' else 'pad'} token id {token} is outside the "
                    f"vocabulary of {vocab_size}",
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
        if model_io and (len(dims) != 4 or symbolic[1] != 2):
            problems.add(
                where["kv_layout"],
                f"KV input {pair.input!r} has shape {list(dims)}, not the head-major layout "
                "[batch, heads, sequence, head_size] model.io declares (head_major_bnsh, also "
                "meant when kv_layout is absent)",
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
