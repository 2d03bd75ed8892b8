"""The typed, immutable model of an ``inference_metadata`` document.

This file is the one source of truth for the document's shape: ``schema.py`` derives the
published JSON Schema (``schema.json``) from these classes, and the loader builds instances of
them from a parsed document. Field constraints carry the rule code they report (``rule=``).

Reading guide: :class:`Metadata` is the root; ``pipeline.workflow`` (:class:`Workflow`) is the
program; steps are a tagged union on ``kind``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from .docmodel import FrozenMap, Node, fld

# ------------------------------------------------------------------ vocabularies

DType = Literal[
    "float32", "fp32", "float16", "fp16", "bfloat16", "bf16",
    "float8_e4m3fn", "float8_e5m2", "fp8_e4m3fn", "fp8_e5m2",
    "int64", "int32", "int16", "int8", "uint64", "uint32", "uint16", "uint8",
    "bool", "string",
]  # fmt: skip

RuntimeRoleName = Literal[
    "prompt_text", "prompt_tokens", "negative_prompt_text", "negative_prompt_tokens", "media",
    "max_iterations", "max_output_tokens", "seed", "guidance_scale", "width", "height",
    "denoising_strength", "sampling_temperature", "sampling_top_k", "sampling_top_p",
    "sampling_min_p", "constraint", "session_id", "adapter_segments", "adapter_counts",
    "adapter_scales", "adapter_active", "row_selection",
]  # fmt: skip

PortRole = Literal[
    "token_ids", "inputs_embeds", "attention_mask", "position_ids", "logits", "hidden_states",
    "encoder_hidden_states", "audio_features",
]  # fmt: skip

OutputRole = Literal["tokens", "text", "tensor", "image", "audio", "video", "logits", "embeddings"]

GenerationField = Literal[
    "max_output_tokens", "temperature", "top_k", "top_p", "min_p", "seed", "guidance_scale",
    "width", "height", "denoising_strength",
]  # fmt: skip

LITERAL_SCHEMA = {
    "$comment": "A scalar (broadcast to every element) or a row-major list of scalars.",
    "anyOf": [
        {"type": ["boolean", "number", "string"]},
        {"type": "array", "items": {"$ref": "#/$defs/LiteralValue"}},
    ],
}

PARAMETER_SCHEMA = {
    "anyOf": [
        {"type": ["boolean", "number", "string"]},
        {"type": "array", "items": {"type": ["boolean", "number", "string"]}},
    ]
}

# Keys removed from the format anywhere they appear (FORMAT.md section 1, "Strict core").
GLOBALLY_REMOVED_KEYS = {
    "slot_ids": "row identity is positional; slots are not serialised",
    "row_ids": "row identity is positional; rows are not serialised",
    "request_epochs": "request epochs were removed from the format",
    "kv_service": "KV storage, paging and slots are runtime choices; declare "
    "serving.state_service groups instead",
}

NAME = {"minLength": 1}


# ------------------------------------------------------------------ tensors


@dataclass(frozen=True)
class SharedLayout(Node):
    kind: Literal["shared"]


@dataclass(frozen=True)
class RequestAlignedLayout(Node):
    kind: Literal["request_aligned"]
    axis: int = fld(schema={"minimum": 0})


@dataclass(frozen=True)
class RequestExpandedLayout(Node):
    kind: Literal["request_expanded"]
    axis: int = fld(schema={"minimum": 0})
    factor: int = fld(rule="B09", schema={"minimum": 1})


@dataclass(frozen=True)
class TokenPackedLayout(Node):
    kind: Literal["token_packed"]
    offsets: str = fld(schema=NAME)
    owner: str = fld(schema=NAME)
    axis: int = fld(0, schema={"minimum": 0})


@dataclass(frozen=True)
class RuntimeSequenceStateLayout(Node):
    kind: Literal["runtime_sequence_state"]


BatchLayout = (
    SharedLayout
    | RequestAlignedLayout
    | RequestExpandedLayout
    | TokenPackedLayout
    | RuntimeSequenceStateLayout
)

Dim = int | str


@dataclass(frozen=True)
class TensorContract(Node):
    """``{dtype, rank, shape?, optional, batch_layout}``: what a value must look like."""

    dtype: DType = fld(rule="B08")
    rank: int = fld(schema={"minimum": 0})
    shape: tuple[Dim, ...] | None = fld(
        None, any_schema={"type": "array", "items": {"$ref": "#/$defs/Dim"}}
    )
    optional: bool = False
    batch_layout: BatchLayout = fld(factory=lambda: SharedLayout(kind="shared"))

    @property
    def request_axis(self) -> int | None:
        layout = self.batch_layout
        if isinstance(layout, RequestAlignedLayout | RequestExpandedLayout):
            return layout.axis
        return None


# ------------------------------------------------------------------ inputs and outputs


@dataclass(frozen=True)
class OpaqueRole(Node):
    kind: Literal["opaque"]


@dataclass(frozen=True)
class RuntimeRole(Node):
    kind: Literal["runtime"]
    version: Literal["1.0"]
    role: RuntimeRoleName


@dataclass(frozen=True)
class RequestSource(Node):
    kind: Literal["request"]


@dataclass(frozen=True)
class ApplicationSource(Node):
    kind: Literal["application"]
    name: str | None = fld(None, schema=NAME)


@dataclass(frozen=True)
class LiteralSource(Node):
    kind: Literal["literal"]


@dataclass(frozen=True)
class ArtifactSource(Node):
    kind: Literal["artifact"]
    location: str = fld(key="path", schema=NAME)  # `path` in the document


@dataclass(frozen=True)
class WorkflowInput(Node):
    contract: TensorContract
    role: OpaqueRole | RuntimeRole
    source: RequestSource | ApplicationSource | LiteralSource | ArtifactSource
    required: bool = True
    default: Any = fld(None, any_schema={"$ref": "#/$defs/LiteralValue"})
    present_as: str | None = fld(None, rule="B12", schema=NAME)
    externally_suppliable: bool = False


@dataclass(frozen=True)
class MediaBlock(Node):
    __required_rule__: ClassVar[str] = "B14"
    container: Literal["wav"]
    encoding: Literal["pcm_s16_le", "pcm_f32_le"]
    sample_rate_hz: int = fld(rule="B14", schema={"minimum": 1})
    channels: int = fld(rule="B14", schema={"minimum": 1})
    source_sample_rate_hz: int | None = fld(None, rule="B14", schema={"minimum": 1})
    delivery: Literal["buffered", "streamed"] = "buffered"


@dataclass(frozen=True)
class WorkflowOutput(Node):
    contract: TensorContract
    role: OutputRole = "tensor"
    stage: Literal["pre_adapter", "post_adapter"] = "pre_adapter"
    value_range: Literal["negative_one_to_one", "zero_to_one", "zero_to_255"] | None = None
    media: MediaBlock | None = None


# ------------------------------------------------------------------ components


@dataclass(frozen=True)
class OnnxImplementation(Node):
    kind: Literal["onnx"]
    artifact: str = fld(rule="C17", schema=NAME)


@dataclass(frozen=True)
class AdapterImplementation(Node):
    kind: Literal["adapter"]
    abi: str = fld(rule="C18", schema=NAME)
    version: str = fld(rule="C18", schema=NAME)
    artifact: str | None = fld(None, schema=NAME)


@dataclass(frozen=True)
class BindingImplementation(Node):
    kind: Literal["binding"]


Implementation = OnnxImplementation | AdapterImplementation | BindingImplementation


@dataclass(frozen=True)
class Ports(Node):
    """Declared ports. A missing ``inputs``/``outputs`` map means "take them from the graph"."""

    inputs: Mapping[str, TensorContract] | None = None
    outputs: Mapping[str, TensorContract] | None = None
    roles: Mapping[str, PortRole] = fld(factory=FrozenMap)


@dataclass(frozen=True)
class ComponentContract(Node):
    id: str = fld(rule="C19", schema=NAME)
    version: str = fld(rule="C19", schema=NAME)
    bindings: Mapping[str, str] = fld(factory=FrozenMap)
    parameters: Mapping[str, Any] = fld(
        factory=FrozenMap, schema={"additionalProperties": PARAMETER_SCHEMA}
    )
    equivalence: Literal["bitwise", "distribution_preserving", "semantic"] = "semantic"


@dataclass(frozen=True)
class RowScope(Node):
    axis: int = fld(rule="C23", schema={"minimum": 0})
    stateful: bool = False


@dataclass(frozen=True)
class Component(Node):
    __removed_keys__: ClassVar[dict[str, str]] = {
        "custom_ops": "custom operators live in the ONNX artifact's opset imports"
    }
    implementation: Implementation
    ports: Ports | None = None
    contract: ComponentContract | None = None
    application_overridable: bool = False
    row_scope: RowScope | None = None
    effects: tuple[str, ...] = fld((), rule="C24", schema={"items": NAME})
    cache_affects_state: tuple[str, ...] = ()


# ------------------------------------------------------------------ state


@dataclass(frozen=True)
class InvariantRecurrence(Node):
    kind: Literal["invariant"]


@dataclass(frozen=True)
class GrowingRecurrence(Node):
    kind: Literal["growing"]
    axis: int = fld(schema={"minimum": 0})
    increment: str = fld(schema=NAME)
    max: str | None = fld(None, schema=NAME)


@dataclass(frozen=True)
class BoundedRecurrence(Node):
    kind: Literal["bounded"]
    axis: int = fld(schema={"minimum": 0})
    max: str = fld(schema=NAME)


Recurrence = InvariantRecurrence | GrowingRecurrence | BoundedRecurrence


@dataclass(frozen=True)
class SessionContinuation(Node):
    kind: Literal["prompt_prefix"]
    prompt_input: str = fld(schema=NAME)
    tokens_output: str = fld(schema=NAME)


@dataclass(frozen=True)
class SessionLease(Node):
    policy: Literal["exclusive", "copy_on_write"] = fld("exclusive", rule="E46")
    ttl_seconds: int | None = fld(None, rule="E46", schema={"minimum": 0})
    optimistic_metadata_version: bool | None = None
    continuation: SessionContinuation | None = None


@dataclass(frozen=True)
class StateCell(Node):
    contract: TensorContract
    scope: Literal["invocation", "session"] = "invocation"
    initializer: str | None = fld(None, schema=NAME)
    recurrence: Recurrence = fld(factory=lambda: InvariantRecurrence(kind="invariant"))
    class_: Literal["semantic", "advisory"] = fld("semantic", key="class")
    management: Literal["workflow", "runtime", "external"] = "workflow"
    release_boundary: Literal["invocation", "session", "row"] | None = None
    service_group: str | None = fld(None, schema=NAME)
    session: SessionLease | None = None


@dataclass(frozen=True)
class AppendUpdate(Node):
    kind: Literal["append"]


@dataclass(frozen=True)
class ReplaceUpdate(Node):
    kind: Literal["replace"]


@dataclass(frozen=True)
class IndexedScatterUpdate(Node):
    kind: Literal["indexed_scatter"]
    write_indices: str = fld(rule="E55", schema=NAME)
    capacity: str = fld(rule="E55", schema=NAME)
    write_indices_ports: Mapping[str, str] = fld(factory=FrozenMap)
    kv_length_ports: Mapping[str, str] = fld(factory=FrozenMap)


@dataclass(frozen=True)
class GroupReuse(Node):
    prefix_reusable: bool = False
    evictable_prefix: bool = False


@dataclass(frozen=True)
class GroupCapabilities(Node):
    rollback_positions: int | None = fld(None, rule="E51", schema={"minimum": 1})
    snapshot: bool = False
    fork: bool = False
    cascade: tuple[str, ...] = fld((), schema={"items": NAME})


@dataclass(frozen=True)
class GroupCheckpoint(Node):
    adapter: str = fld(schema=NAME)
    version: str = fld(schema=NAME)


@dataclass(frozen=True)
class GroupPort(Node):
    input: str = fld(rule="E52", schema=NAME)
    output: str | None = fld(None, rule="E52", schema=NAME)
    role: Literal["key", "value", "combined"] | None = None
    layer: int | None = fld(None, rule="E53", schema={"minimum": 0})
    access: Literal["read_write", "read_only"] = "read_write"


@dataclass(frozen=True)
class StateGroup(Node):
    kind: Literal[
        "full_attention", "sliding_attention", "multi_latent_attention", "recurrent",
        "cross_attention", "encoder",
    ]  # fmt: skip
    layout: str = fld(rule="E51", schema=NAME)
    sequence_axis: int | None = fld(None, schema={"minimum": 0})
    logical_lengths: str | None = fld(None, rule="E51", schema=NAME)
    total_length: str | None = fld(None, rule="E51", schema=NAME)
    aliasing: Literal["forbidden", "permitted", "required"] = "forbidden"
    update: AppendUpdate | ReplaceUpdate | IndexedScatterUpdate | None = None
    reuse: GroupReuse | None = None
    capabilities: GroupCapabilities | None = None
    checkpoint: GroupCheckpoint | None = None
    ports: Mapping[str, Mapping[str, GroupPort]] = fld(factory=FrozenMap)


@dataclass(frozen=True)
class StateService(Node):
    groups: Mapping[str, StateGroup] = fld(rule="E50", schema={"minProperties": 1})


@dataclass(frozen=True)
class ServingContract(Node):
    __removed_keys__: ClassVar[dict[str, str]] = GLOBALLY_REMOVED_KEYS
    active: str = fld(rule="E50", schema=NAME)
    done: str = fld(rule="E50", schema=NAME)
    state_service: StateService
    accepted_len: str | None = fld(None, rule="E50", schema=NAME)


# ------------------------------------------------------------------ effects


@dataclass(frozen=True)
class NoSpeculationSafety(Node):
    kind: Literal["none"]


@dataclass(frozen=True)
class ClonableSafety(Node):
    kind: Literal["clonable"]


@dataclass(frozen=True)
class RewindableSafety(Node):
    kind: Literal["rewindable"]
    max_depth: int = fld(rule="C24", schema={"minimum": 1})


@dataclass(frozen=True)
class EffectDomain(Node):
    retry: Literal["idempotent", "never"] = "never"
    speculation_safety: NoSpeculationSafety | ClonableSafety | RewindableSafety | None = None


# ------------------------------------------------------------------ steps


@dataclass(frozen=True)
class InvokeStep(Node):
    kind: Literal["invoke"]
    component: str = fld(schema=NAME)
    inputs: Mapping[str, str] = fld(factory=FrozenMap, schema={"additionalProperties": NAME})
    outputs: Mapping[str, str] = fld(factory=FrozenMap, schema={"additionalProperties": NAME})


@dataclass(frozen=True)
class LoopIteration(Node):
    value: str = fld(schema=NAME)
    contract: TensorContract


@dataclass(frozen=True)
class Carry(Node):
    cell: str = fld(schema=NAME)
    next: str = fld(schema=NAME)
    initial: str | None = fld(None, schema=NAME)


@dataclass(frozen=True)
class LoopStep(Node):
    kind: Literal["loop"]
    steps: tuple[Step, ...] = fld(rule="D27", schema={"minItems": 1})
    continue_when: str = fld(schema=NAME)
    max_iterations: str = fld(schema=NAME)
    setup: tuple[Step, ...] = ()
    iteration: LoopIteration | None = None
    carried: tuple[Carry, ...] = ()
    termination: Literal["predicate", "generation_eos"] = "predicate"


@dataclass(frozen=True)
class Phi(Node):
    cases: Mapping[str, str] = fld(rule="D36", schema={"additionalProperties": NAME})
    default: str | None = fld(None, rule="D36", schema=NAME)


@dataclass(frozen=True)
class BranchStep(Node):
    kind: Literal["branch"]
    predicate: str = fld(schema=NAME)
    cases: Mapping[str, tuple[Step, ...]] = fld(
        rule="D35",
        schema={
            "minProperties": 1,
            "propertyNames": {
                "pattern": "^(true|false|-?(0|[1-9][0-9]*))$",
                "description": "case keys are 'true', 'false' or decimal integers",
            },
            "additionalProperties": {"minItems": 1, "x-rule": "D27"},
        },
    )
    default: tuple[Step, ...] | None = fld(None, rule="D27", schema={"minItems": 1})
    outputs: Mapping[str, Phi] = fld(factory=FrozenMap)


@dataclass(frozen=True)
class EmitStep(Node):
    kind: Literal["emit"]
    value: str = fld(schema=NAME)
    output: str = fld(schema=NAME)
    mode: Literal["replace", "append", "event"] = "replace"
    axis: int | None = fld(None, schema={"minimum": 0})
    valid_length: str | None = fld(None, schema=NAME)
    when: str | None = fld(None, schema=NAME)


@dataclass(frozen=True)
class SequenceStep(Node):
    kind: Literal["sequence"]
    steps: tuple[Step, ...] = fld(rule="D27", schema={"minItems": 1})


Step = InvokeStep | LoopStep | BranchStep | EmitStep | SequenceStep

# Step kinds that once existed and are now rejected with a dedicated message.
REMOVED_STEP_KINDS = {
    "transfer": "transfers are planned by the runtime, never authored; delete the step",
}


# ------------------------------------------------------------------ workflow


@dataclass(frozen=True)
class Manifest(Node):
    __removed_keys__: ClassVar[dict[str, str]] = {
        "ir_version": "IR and opset versions live in each ONNX artifact, never in metadata",
        "onnx_opsets": "IR and opset versions live in each ONNX artifact, never in metadata",
        "custom_op_versions": "custom operator versions live in each ONNX artifact",
    }
    capabilities: tuple[str, ...] = fld((), schema={"items": NAME})
    adapter_abis: Mapping[str, str] = fld(factory=FrozenMap, schema={"additionalProperties": NAME})


@dataclass(frozen=True)
class Workflow(Node):
    __removed_keys__: ClassVar[dict[str, str]] = {
        "graph": "a workflow is a list of steps; there is no single graph",
        "initial_effects": "effects are inferred from the steps",
        **GLOBALLY_REMOVED_KEYS,
    }
    steps: tuple[Step, ...] = fld(rule="D27", schema={"minItems": 1})
    manifest: Manifest = fld(factory=lambda: Manifest())
    inputs: Mapping[str, WorkflowInput] = fld(factory=FrozenMap)
    outputs: Mapping[str, WorkflowOutput] = fld(factory=FrozenMap)
    components: Mapping[str, Component] = fld(
        factory=FrozenMap, schema={"propertyNames": {"x-rule": "C16"}}
    )
    state: Mapping[str, StateCell] = fld(factory=FrozenMap)
    serving: ServingContract | None = None
    effects: Mapping[str, EffectDomain] = fld(factory=FrozenMap)


@dataclass(frozen=True)
class Pipeline(Node):
    __removed_keys__: ClassVar[dict[str, str]] = {
        "strategy": "pipeline strategies were replaced by pipeline.workflow",
        "phases": "pipeline phases were replaced by pipeline.workflow steps",
    }
    workflow: Workflow


# ------------------------------------------------------------------ generation


@dataclass(frozen=True)
class GenerationDefaults(Node):
    max_output_tokens: int | None = fld(None, schema={"minimum": 0})
    temperature: float | None = fld(None, schema={"minimum": 0})
    top_k: int | None = fld(None, schema={"minimum": 0})
    top_p: float | None = fld(None, schema={"minimum": 0, "maximum": 1})
    min_p: float | None = fld(None, schema={"minimum": 0, "maximum": 1})
    seed: int | None = fld(None, schema={"minimum": 0})
    guidance_scale: float | None = None
    width: int | None = fld(None, schema={"minimum": 1})
    height: int | None = fld(None, schema={"minimum": 1})
    denoising_strength: float | None = fld(None, schema={"minimum": 0, "maximum": 1})


@dataclass(frozen=True)
class OverrideConstraint(Node):
    minimum: float | None = None
    maximum: float | None = None


@dataclass(frozen=True)
class GenerationOverride(Node):
    input: str = fld(rule="G70", schema=NAME)
    constraint: OverrideConstraint | None = None


@dataclass(frozen=True)
class Generation(Node):
    defaults: GenerationDefaults | None = None
    overrides: Mapping[GenerationField, GenerationOverride] = fld(factory=FrozenMap, rule="G70")


# ------------------------------------------------------------------ adapters (LoRA)


@dataclass(frozen=True)
class TargetGraphInputs(Node):
    a: str = fld(rule="G66", schema=NAME)
    b: str = fld(rule="G66", schema=NAME)
    scale: str = fld(rule="G66", schema=NAME)


@dataclass(frozen=True)
class TargetSlice(Node):
    start: int = fld(rule="G66", schema={"minimum": 0})
    length: int = fld(rule="G66", schema={"minimum": 1})


@dataclass(frozen=True)
class AdapterTarget(Node):
    id: str = fld(rule="G66", schema=NAME)
    component: str = fld(rule="G66", schema=NAME)
    input_features: int = fld(rule="G66", schema={"minimum": 1})
    output_features: int = fld(rule="G66", schema={"minimum": 1})
    rank: int = fld(rule="G66", schema={"minimum": 1})
    alpha: float = fld(rule="G66", schema={"exclusiveMinimum": 0})
    initializer: str | None = fld(None, rule="G66", schema=NAME)
    node_name: str | None = fld(None, rule="G66", schema=NAME)
    output_name: str | None = fld(None, rule="G66", schema=NAME)
    activation_dtype: DType | None = None
    layer_index: int | None = fld(None, rule="G66", schema={"minimum": 0})
    graph_inputs: TargetGraphInputs | None = None
    slice: TargetSlice | None = None


@dataclass(frozen=True)
class TargetManifest(Node):
    targets: tuple[AdapterTarget, ...] = fld(rule="G64", schema={"minItems": 1})


@dataclass(frozen=True)
class AdapterSelection(Node):
    segments: str = fld(rule="G65", schema=NAME)
    adapter_counts: str = fld(rule="G65", schema=NAME)
    scales: str = fld(rule="G65", schema=NAME)
    max_adapters: int = fld(rule="G64", schema={"minimum": 1})
    active: str | None = fld(None, rule="G65", schema=NAME)


@dataclass(frozen=True)
class AdapterCache(Node):
    max_entries: int = fld(rule="G64", schema={"minimum": 1})
    eviction: Literal["lru"] = "lru"


@dataclass(frozen=True)
class AdapterPlanning(Node):
    bucket_by_adapter_set: bool = False
    stable_buffers: bool = False
    invalidate_capture_on_eviction: bool = False


@dataclass(frozen=True)
class AdapterProvenance(Node):
    producer: str | None = None
    source: str | None = None
    revision: str | None = None


AdapterLoader = Literal[
    "onnx-genai.adapters.json@1",
    "onnx-genai.adapters.safetensors@1",
    "onnx-genai.adapters.hf-peft@1",
    "onnxruntime.lora-adapter@1",
]


@dataclass(frozen=True)
class AdapterWeights(Node):
    location: str = fld(rule="G67", schema=NAME)
    loader_capability: AdapterLoader = fld(rule="G67")
    format: Literal["json", "safetensors", "hf_peft", "ort_genai"] = fld(rule="G67")
    scale_encoding: Literal["alpha_over_rank", "baked"] = fld("alpha_over_rank", rule="G67")
    config_location: str | None = fld(None, rule="G67", schema=NAME)


@dataclass(frozen=True)
class AdapterBinding(Node):
    target: str = fld(rule="G67", schema=NAME)
    weight_key: str = fld(rule="G67", schema=NAME)


@dataclass(frozen=True)
class AdapterArtifact(Node):
    index: int = fld(rule="G67", schema={"minimum": 0})
    identity: str = fld(rule="G67", schema=NAME)
    version: str = fld(rule="G67", schema=NAME)
    rank: int = fld(rule="G67", schema={"minimum": 1})
    alpha: float = fld(rule="G67", schema={"exclusiveMinimum": 0})
    dtype: DType = fld(rule="G67")
    weights: tuple[AdapterWeights, ...] = fld(rule="G67", schema={"minItems": 1})
    bindings: tuple[AdapterBinding, ...] = fld(rule="G67", schema={"minItems": 1})
    provenance: AdapterProvenance | None = None


@dataclass(frozen=True)
class Adapters(Node):
    target_manifest: TargetManifest
    selection: AdapterSelection
    application_capability: str = fld(rule="G64", schema=NAME)
    artifacts: Mapping[str, AdapterArtifact] = fld(rule="G64", schema={"minProperties": 1})
    discovery_fallback: Literal["disabled", "enabled"] = "disabled"
    portable_fallback: bool = True
    cache: AdapterCache | None = None
    planning: AdapterPlanning | None = None


# ------------------------------------------------------------------ preprocessing programs


@dataclass(frozen=True)
class DecodeOp(Node):
    kind: Literal["decode"]
    format: Literal["png", "wav"]


@dataclass(frozen=True)
class ConvertOp(Node):
    kind: Literal["convert"]
    mode: Literal["rgb", "l"]


@dataclass(frozen=True)
class ResizeOp(Node):
    kind: Literal["resize"]
    height: int = fld(schema={"minimum": 1})
    width: int = fld(schema={"minimum": 1})
    interpolation: Literal["nearest", "bilinear", "bicubic"] = "bilinear"


@dataclass(frozen=True)
class ResampleOp(Node):
    kind: Literal["resample"]
    sample_rate_hz: int = fld(schema={"minimum": 1})


@dataclass(frozen=True)
class MixdownOp(Node):
    kind: Literal["mixdown"]
    channels: int = fld(schema={"minimum": 1})


@dataclass(frozen=True)
class RescaleOp(Node):
    kind: Literal["rescale"]
    factor: float


@dataclass(frozen=True)
class NormalizeOp(Node):
    kind: Literal["normalize"]
    mean: tuple[float, ...] = fld(schema={"minItems": 1})
    std: tuple[float, ...] = fld(schema={"minItems": 1, "items": {"exclusiveMinimum": 0}})


@dataclass(frozen=True)
class LayoutOp(Node):
    kind: Literal["layout"]
    layout: Literal["chw", "hwc"]


@dataclass(frozen=True)
class PublishOp(Node):
    kind: Literal["publish"]
    output: str = fld(schema=NAME)


PreprocessOp = (
    DecodeOp | ConvertOp | ResizeOp | ResampleOp | MixdownOp | RescaleOp | NormalizeOp
    | LayoutOp | PublishOp
)  # fmt: skip


@dataclass(frozen=True)
class ProgramOutput(Node):
    contract: TensorContract | None = None
    optional: bool = False


@dataclass(frozen=True)
class PreprocessProgram(Node):
    """A declared preprocessing program, run by exactly one adapter component."""

    adapter: str = fld(rule="G69", schema=NAME)
    operations: tuple[PreprocessOp, ...] = fld(rule="G69", schema={"minItems": 1})
    outputs: Mapping[str, ProgramOutput] = fld(rule="G69", schema={"minProperties": 1})


@dataclass(frozen=True)
class Preprocessing(Node):
    image: PreprocessProgram | None = None
    audio: PreprocessProgram | None = None


# ------------------------------------------------------------------ package facts


@dataclass(frozen=True)
class TokenizerArtifact(Node):
    location: str = fld(schema=NAME)


@dataclass(frozen=True)
class SpecialToken(Node):
    id: int = fld(schema={"minimum": 0})
    content: str = fld(schema=NAME)


@dataclass(frozen=True)
class Tokenizer(Node):
    algorithm: Literal["bpe", "wordpiece", "wordlevel", "unigram", "sentencepiece", "byte"]
    vocab_size: int = fld(schema={"minimum": 1})
    byte_level: bool = False
    artifacts: tuple[TokenizerArtifact, ...] | None = fld(None, schema={"minItems": 1})
    special_tokens: Mapping[str, SpecialToken] = fld(factory=FrozenMap)


@dataclass(frozen=True)
class ConstraintLanguage(Node):
    dialect: Literal["gbnf", "json_schema", "regex", "lark"]
    version: str = fld(schema=NAME)
    component: str = fld(rule="G79", schema=NAME)


@dataclass(frozen=True)
class PackageFacts(Node):
    tokenizer: Tokenizer | None = None
    constraint_languages: tuple[ConstraintLanguage, ...] = ()


# ------------------------------------------------------------------ speculative decoding


@dataclass(frozen=True)
class IdenticalVocabulary(Node):
    kind: Literal["identical"]


@dataclass(frozen=True)
class SubsetVocabulary(Node):
    kind: Literal["subset"]
    proposer_vocab_size: int = fld(schema={"minimum": 1})


@dataclass(frozen=True)
class MappedVocabulary(Node):
    kind: Literal["mapped"]
    artifact: str = fld(schema=NAME)


@dataclass(frozen=True)
class RecurrentBinding(Node):
    cell: str = fld(rule="F62", schema=NAME)
    input: str = fld(rule="F62", schema=NAME)
    output: str = fld(rule="F62", schema=NAME)


@dataclass(frozen=True)
class FoldedCarrySeed(Node):
    component: str = fld(rule="F63", schema=NAME)
    output: str = fld(rule="F63", schema=NAME)


@dataclass(frozen=True)
class TokenEmbedding(Node):
    component: str = fld(rule="F63", schema=NAME)
    table: str = fld(rule="F63", schema=NAME)


@dataclass(frozen=True)
class BlockProposal(Node):
    kind: Literal["block"]


@dataclass(frozen=True)
class ChainedProposal(Node):
    kind: Literal["chained"]
    token_embedding_input: str | None = fld(None, rule="F62", schema=NAME)
    logits_output: str | None = fld(None, rule="F62", schema=NAME)
    recurrent: tuple[RecurrentBinding, ...] = ()
    folded_carry_output: str | None = fld(None, rule="F62", schema=NAME)
    folded_carry_seed: FoldedCarrySeed | None = None
    token_embedding: TokenEmbedding | None = None


@dataclass(frozen=True)
class Speculative(Node):
    proposer: str = fld(rule="F59", schema=NAME)
    target: str = fld(rule="F59", schema=NAME)
    max_proposal_width: int = fld(schema={"minimum": 1})
    vocabulary: IdenticalVocabulary | SubsetVocabulary | MappedVocabulary = fld(
        factory=lambda: IdenticalVocabulary(kind="identical")
    )
    rollback_state: tuple[str, ...] = fld((), rule="F60", schema={"items": NAME})
    shared_state: tuple[str, ...] = fld((), schema={"items": NAME})
    shared_weights: tuple[str, ...] = fld((), schema={"items": NAME})
    port_bindings: Mapping[str, str] = fld(factory=FrozenMap)
    distribution_preserving: bool = False
    proposal_execution: BlockProposal | ChainedProposal = fld(
        factory=lambda: BlockProposal(kind="block")
    )


# ------------------------------------------------------------------ profiles and facts


@dataclass(frozen=True)
class ProfileOutput(Node):
    output: str = fld(rule="G71", schema=NAME)
    decoding: Literal["none", "tokenizer", "wav"] = fld("none", rule="G71")


@dataclass(frozen=True)
class Profile(Node):
    kind: str = fld(schema=NAME)
    requirement: Literal["required", "ignorable"] = "required"
    outputs: Mapping[str, ProfileOutput] = fld(factory=FrozenMap)


@dataclass(frozen=True)
class ModelIO(Node):
    token_input: str = fld(schema=NAME)
    logits_output: str = fld(schema=NAME)
    attention_mask_input: str | None = fld(None, schema=NAME)
    position_ids_input: str | None = fld(None, schema=NAME)
    kv_inputs: tuple[str, ...] = fld((), schema={"items": NAME})
    kv_outputs: tuple[str, ...] = fld((), schema={"items": NAME})


@dataclass(frozen=True)
class ModelFacts(Node):
    name: str | None = fld(None, schema=NAME)
    architecture: str | None = fld(None, schema=NAME)
    max_sequence_length: int | None = fld(None, schema={"minimum": 1})
    vocab_size: int | None = fld(None, schema={"minimum": 1})
    num_layers: int | None = fld(None, schema={"minimum": 1})
    hidden_size: int | None = fld(None, schema={"minimum": 1})
    num_attention_heads: int | None = fld(None, schema={"minimum": 1})
    num_key_value_heads: int | None = fld(None, schema={"minimum": 1})
    head_size: int | None = fld(None, schema={"minimum": 1})
    bos_token_id: int | None = fld(None, schema={"minimum": 0})
    eos_token_ids: tuple[int, ...] | None = fld(None, schema={"items": {"minimum": 0}})
    pad_token_id: int | None = fld(None, schema={"minimum": 0})
    io: ModelIO | None = None


@dataclass(frozen=True)
class Quantization(Node):
    method: str = fld(schema=NAME)
    bits: int = fld(schema={"minimum": 1})
    group_size: int | None = fld(None, schema={"minimum": 1})
    symmetric: bool | None = None
    components: tuple[str, ...] = ()


@dataclass(frozen=True)
class HardwareRequirements(Node):
    min_memory_bytes: int | None = fld(None, schema={"minimum": 0})
    devices: tuple[Literal["cpu", "cuda"], ...] = ()
    execution_providers: tuple[str, ...] = ()


# ------------------------------------------------------------------ the document


@dataclass(frozen=True)
class Metadata(Node):
    """The root of an ``inference_metadata.{yaml,yml,json}`` document."""

    __removed_keys__: ClassVar[dict[str, str]] = {
        "strategy": "decoding strategies are declared by pipeline.workflow",
        "tokens": "token handling is declared by pipeline.workflow",
        "kv_cache": "KV caches are declared as state cells in service groups "
        "(pipeline.workflow.serving.state_service)",
    }
    schema_version: Literal["v1", "1.0", "1"] | None = None
    pipeline: Pipeline | None = None
    required_capabilities: tuple[str, ...] = fld((), schema={"items": NAME})
    generation: Generation | None = None
    adapters: Adapters | None = None
    preprocessing: Preprocessing | None = None
    package: PackageFacts | None = None
    speculative: Speculative | None = None
    profiles: Mapping[str, Profile] = fld(factory=FrozenMap)
    model: ModelFacts | None = None
    quantization: Quantization | None = None
    hardware_requirements: HardwareRequirements | None = None

    @property
    def workflow(self) -> Workflow | None:
        return self.pipeline.workflow if self.pipeline else None
