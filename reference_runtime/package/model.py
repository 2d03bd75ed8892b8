"""The typed, immutable model of an ``inference_metadata`` document.

This file is the one source of truth for the document's shape: ``schema.py`` derives the
published JSON Schema (``schema.json``) from these classes, and the loader builds instances of
them from a parsed document. Field constraints carry the rule code they report (``rule=``).

The classes follow the format's upstream schema types field for field (the snapshot named in
``docs/format.md``): the same document keys, the same required fields and defaults, the same
closed sets (``deny_unknown_fields`` upstream; ``__open__`` marks the few sections upstream
leaves open to unknown keys), the same enum variants and tagged unions, the same list-vs-single
shapes. Each class names the upstream type it models in ``__upstream__``; the published schema
carries it as ``x-upstream`` and a crosswalk test compares the two. Every deliberate difference
is listed in the departures table of ``docs/format.md``.

Reading guide: :class:`Metadata` is the root; ``pipeline.workflow`` (:class:`Workflow`) is the
program; steps are a tagged union on ``kind``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from .docmodel import FrozenMap, Node, fld

# ------------------------------------------------------------------ vocabularies

RuntimeRoleName = Literal[
    "prompt_text", "prompt_tokens", "negative_prompt_text", "negative_prompt_tokens", "media",
    "max_iterations", "max_output_tokens", "seed", "guidance_scale", "width", "height",
    "denoising_strength", "sampling_temperature", "sampling_top_k", "sampling_top_p",
    "sampling_min_p", "constraint", "session_id", "row_selection", "adapter_segments",
    "adapter_counts", "adapter_scales", "adapter_active",
]  # fmt: skip

PortRole = Literal[
    "token_ids", "inputs_embeds", "attention_mask", "position_ids", "logits", "hidden_states",
    "encoder_hidden_states", "audio_features",
]  # fmt: skip

OutputRole = Literal["tokens", "text", "image", "video", "audio", "tensor", "event"]

# A scalar literal: bool, integer, float or string (upstream ``ScalarValue``, untagged).
Scalar = bool | int | float | str

SCALAR_SCHEMA = {"type": ["boolean", "integer", "number", "string"]}

LITERAL_SCHEMA = {
    "$comment": "A scalar (broadcast to every element) or a flat, row-major list of scalars.",
    "x-upstream": "LiteralValue",
    "anyOf": [SCALAR_SCHEMA, {"type": "array", "items": SCALAR_SCHEMA}],
}

DIM_SCHEMA = {
    "x-upstream": "TensorDimension",
    "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "minLength": 1}],
}

# Keys removed from the format anywhere they appear (refused with what replaced them, A02).
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
    __upstream__: ClassVar[str] = "BatchLayout::Shared"
    kind: Literal["shared"]


@dataclass(frozen=True)
class RequestAlignedLayout(Node):
    __upstream__: ClassVar[str] = "BatchLayout::RequestAligned"
    kind: Literal["request_aligned"]
    axis: int = fld(schema={"minimum": 0})


@dataclass(frozen=True)
class RequestExpandedLayout(Node):
    __upstream__: ClassVar[str] = "BatchLayout::RequestExpanded"
    kind: Literal["request_expanded"]
    axis: int = fld(schema={"minimum": 0})
    factor: int = fld(rule="B09", schema={"minimum": 1})


@dataclass(frozen=True)
class TokenPackedLayout(Node):
    __upstream__: ClassVar[str] = "BatchLayout::TokenPacked"
    kind: Literal["token_packed"]
    offsets: str = fld(schema=NAME)
    owner: str = fld(schema=NAME)
    axis: int = fld(schema={"minimum": 0})


@dataclass(frozen=True)
class RuntimeSequenceStateLayout(Node):
    __upstream__: ClassVar[str] = "BatchLayout::RuntimeSequenceState"
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

    __upstream__: ClassVar[str] = "TensorContract"
    dtype: str = fld(rule="B08", schema=NAME)
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
    __upstream__: ClassVar[str] = "SemanticInputRole::Opaque"
    kind: Literal["opaque"]


@dataclass(frozen=True)
class RuntimeRole(Node):
    __upstream__: ClassVar[str] = "SemanticInputRole::Runtime"
    kind: Literal["runtime"]
    version: Literal["1.0"]
    role: RuntimeRoleName


@dataclass(frozen=True)
class RequestSource(Node):
    __upstream__: ClassVar[str] = "WorkflowInputSource::Request"
    kind: Literal["request"]


@dataclass(frozen=True)
class ApplicationSource(Node):
    __upstream__: ClassVar[str] = "WorkflowInputSource::Application"
    kind: Literal["application"]
    name: str = fld(schema=NAME)


@dataclass(frozen=True)
class LiteralSource(Node):
    __upstream__: ClassVar[str] = "WorkflowInputSource::Literal"
    kind: Literal["literal"]


@dataclass(frozen=True)
class ArtifactSource(Node):
    __upstream__: ClassVar[str] = "WorkflowInputSource::Artifact"
    kind: Literal["artifact"]
    location: str = fld(key="path", schema=NAME)  # `path` in the document


@dataclass(frozen=True)
class WorkflowInput(Node):
    __upstream__: ClassVar[str] = "WorkflowInput"
    contract: TensorContract
    role: OpaqueRole | RuntimeRole
    source: RequestSource | ApplicationSource | LiteralSource | ArtifactSource
    required: bool = True
    default: Any = fld(None, any_schema={"$ref": "#/$defs/LiteralValue"})
    present_as: str | None = fld(None, rule="B12", schema=NAME)
    externally_suppliable: bool = False


@dataclass(frozen=True)
class MediaBlock(Node):
    __upstream__: ClassVar[str] = "MediaOutputContract"
    container: Literal["raw", "wav"]
    encoding: Literal["pcm_s16_le", "pcm_f32_le"]
    sample_rate_hz: int | None = fld(None, rule="B14", schema={"minimum": 0})
    source_sample_rate_hz: int | None = fld(None, rule="B14", schema={"minimum": 0})
    channels: int | None = fld(None, rule="B14", schema={"minimum": 0})
    delivery: Literal["buffered", "streaming"] = "buffered"


@dataclass(frozen=True)
class WorkflowOutput(Node):
    __upstream__: ClassVar[str] = "WorkflowOutput"
    contract: TensorContract
    role: OutputRole
    stage: Literal["pre_adapter", "post_adapter"]
    value_range: Literal["zero_to_one", "negative_one_to_one", "zero_to_255"] | None = None
    media: MediaBlock | None = None


# ------------------------------------------------------------------ components


@dataclass(frozen=True)
class OnnxImplementation(Node):
    __upstream__: ClassVar[str] = "ComponentImplementation::Onnx"
    kind: Literal["onnx"]
    artifact: str = fld(rule="C17", schema=NAME)


@dataclass(frozen=True)
class AdapterImplementation(Node):
    __upstream__: ClassVar[str] = "ComponentImplementation::Adapter"
    kind: Literal["adapter"]
    abi: str = fld(rule="C18", schema=NAME)
    version: str = fld(rule="C18", schema=NAME)
    artifact: str | None = fld(None, schema=NAME)


@dataclass(frozen=True)
class BindingImplementation(Node):
    __upstream__: ClassVar[str] = "ComponentImplementation::Binding"
    kind: Literal["binding"]


Implementation = OnnxImplementation | AdapterImplementation | BindingImplementation


@dataclass(frozen=True)
class Ports(Node):
    """Declared ports. An empty ``inputs`` / ``outputs`` map means "the graph's own"."""

    __upstream__: ClassVar[str] = "ComponentPorts"
    inputs: Mapping[str, TensorContract] = fld(factory=FrozenMap)
    outputs: Mapping[str, TensorContract] = fld(factory=FrozenMap)
    roles: Mapping[str, PortRole] = fld(factory=FrozenMap)


@dataclass(frozen=True)
class ComponentContract(Node):
    __upstream__: ClassVar[str] = "ComponentContract"
    id: str = fld(rule="C19", schema=NAME)
    version: str = fld(rule="C19", schema=NAME)
    equivalence: Literal["bitwise", "distribution_preserving", "semantic"] = "semantic"
    bindings: Mapping[str, str] = fld(factory=FrozenMap)
    parameters: Mapping[str, Scalar] = fld(factory=FrozenMap)


@dataclass(frozen=True)
class RowScope(Node):
    __upstream__: ClassVar[str] = "ComponentRowScope"
    axis: int = fld(rule="C23", schema={"minimum": 0})
    stateful: bool = False


@dataclass(frozen=True)
class Component(Node):
    __upstream__: ClassVar[str] = "WorkflowComponent"
    __removed_keys__: ClassVar[dict[str, str]] = {
        "custom_ops": "custom operators live in the ONNX artifact's opset imports"
    }
    implementation: Implementation
    ports: Ports = fld(factory=lambda: Ports())
    contract: ComponentContract | None = None
    application_overridable: bool = False
    effects: tuple[str, ...] = fld((), rule="C24", schema={"items": NAME})
    row_scope: RowScope | None = None
    cache_affects_state: tuple[str, ...] = ()


# ------------------------------------------------------------------ state


@dataclass(frozen=True)
class InvariantRecurrence(Node):
    __upstream__: ClassVar[str] = "ShapeRecurrence::Invariant"
    kind: Literal["invariant"]


@dataclass(frozen=True)
class GrowingRecurrence(Node):
    __upstream__: ClassVar[str] = "ShapeRecurrence::Growing"
    kind: Literal["growing"]
    axis: int = fld(schema={"minimum": 0})
    increment: str = fld(schema=NAME)
    max: str = fld(schema=NAME)


@dataclass(frozen=True)
class BoundedRecurrence(Node):
    __upstream__: ClassVar[str] = "ShapeRecurrence::Bounded"
    kind: Literal["bounded"]
    axis: int = fld(schema={"minimum": 0})
    max: str = fld(schema=NAME)


Recurrence = InvariantRecurrence | GrowingRecurrence | BoundedRecurrence


@dataclass(frozen=True)
class SessionContinuation(Node):
    """Multi-turn continuation of a session cell (beyond the upstream snapshot; see
    docs/format.md, departures)."""

    __upstream__: ClassVar[str] = "SessionContinuation"
    kind: Literal["prompt_prefix"]
    prompt_input: str = fld(schema=NAME)
    tokens_output: str = fld(schema=NAME)


@dataclass(frozen=True)
class SessionLease(Node):
    __upstream__: ClassVar[str] = "SessionLeaseContract"
    policy: Literal["exclusive", "copy_on_write"] = fld("exclusive", rule="E46")
    ttl_seconds: int | None = fld(None, rule="E46", schema={"minimum": 0})
    optimistic_metadata_version: bool = fld(False, rule="E46")
    continuation: SessionContinuation | None = None


@dataclass(frozen=True)
class StateCell(Node):
    __upstream__: ClassVar[str] = "WorkflowStateCell"
    contract: TensorContract
    scope: Literal["invocation", "session"]
    initializer: str = fld(schema=NAME)
    recurrence: Recurrence
    class_: Literal["semantic", "advisory"] = fld("semantic", key="class")
    management: Literal["workflow", "runtime", "external"] = "workflow"
    release_boundary: Literal["invocation", "session", "row"] | None = None
    service_group: str | None = fld(None, schema=NAME)
    session: SessionLease | None = None


@dataclass(frozen=True)
class AppendUpdate(Node):
    __upstream__: ClassVar[str] = "StateUpdate::Append"
    kind: Literal["append"]


@dataclass(frozen=True)
class ReplaceUpdate(Node):
    __upstream__: ClassVar[str] = "StateUpdate::Replace"
    kind: Literal["replace"]


@dataclass(frozen=True)
class IndexedScatterUpdate(Node):
    __upstream__: ClassVar[str] = "StateUpdate::IndexedScatter"
    kind: Literal["indexed_scatter"]
    write_indices: str = fld(rule="E55", schema=NAME)
    capacity: str = fld(rule="E55", schema=NAME)
    write_indices_ports: Mapping[str, str] = fld(factory=FrozenMap)
    kv_length_ports: Mapping[str, str] = fld(factory=FrozenMap)


@dataclass(frozen=True)
class GroupReuse(Node):
    __upstream__: ClassVar[str] = "StateReuse"
    prefix_reusable: bool = False
    evictable_prefix: bool = False


@dataclass(frozen=True)
class GroupCapabilities(Node):
    __upstream__: ClassVar[str] = "StateGroupCapabilities"
    rollback_positions: int | None = fld(None, rule="E51", schema={"minimum": 1})
    snapshot: bool = False
    fork: bool = False
    cascade: tuple[str, ...] = fld((), schema={"items": NAME})


@dataclass(frozen=True)
class GroupCheckpoint(Node):
    __upstream__: ClassVar[str] = "StateCheckpointContract"
    adapter: str = fld(schema=NAME)
    version: str = fld(schema=NAME)


@dataclass(frozen=True)
class GroupPort(Node):
    __upstream__: ClassVar[str] = "StatePortAlias"
    input: str = fld(rule="E52", schema=NAME)
    output: str | None = fld(None, rule="E52", schema=NAME)
    access: Literal["read_write", "read_only"] = "read_write"
    role: Literal["key", "value", "combined"] | None = None
    layer: int | None = fld(None, rule="E53", schema={"minimum": 0})


@dataclass(frozen=True)
class StateGroup(Node):
    __upstream__: ClassVar[str] = "StateGroupContract"
    kind: Literal[
        "full_attention", "sliding_attention", "multi_latent_attention", "recurrent",
        "cross_attention", "encoder",
    ]  # fmt: skip
    layout: str = fld(rule="E51", schema=NAME)
    sequence_axis: int | None = fld(None, schema={"minimum": 0})
    logical_lengths: str | None = fld(None, rule="E51", schema=NAME)
    aliasing: Literal["permitted", "required", "forbidden"] = "forbidden"
    update: AppendUpdate | ReplaceUpdate | IndexedScatterUpdate | None = None
    total_length: str | None = fld(None, rule="E51", schema=NAME)
    reuse: GroupReuse = fld(factory=lambda: GroupReuse())
    capabilities: GroupCapabilities = fld(factory=lambda: GroupCapabilities())
    checkpoint: GroupCheckpoint | None = None
    ports: Mapping[str, Mapping[str, GroupPort]] = fld(factory=FrozenMap)


@dataclass(frozen=True)
class StateService(Node):
    __upstream__: ClassVar[str] = "StateServiceContract"
    groups: Mapping[str, StateGroup] = fld(factory=FrozenMap, rule="E50")


@dataclass(frozen=True)
class ServingContract(Node):
    __upstream__: ClassVar[str] = "ServingServiceContract"
    __removed_keys__: ClassVar[dict[str, str]] = GLOBALLY_REMOVED_KEYS
    active: str = fld(rule="E50", schema=NAME)
    done: str = fld(rule="E50", schema=NAME)
    state_service: StateService
    accepted_len: str | None = fld(None, rule="E50", schema=NAME)


# ------------------------------------------------------------------ effects


@dataclass(frozen=True)
class NoSpeculationSafety(Node):
    __upstream__: ClassVar[str] = "SpeculationSafety::None"
    kind: Literal["none"]


@dataclass(frozen=True)
class ClonableSafety(Node):
    __upstream__: ClassVar[str] = "SpeculationSafety::Clonable"
    kind: Literal["clonable"]


@dataclass(frozen=True)
class RewindableSafety(Node):
    __upstream__: ClassVar[str] = "SpeculationSafety::Rewindable"
    kind: Literal["rewindable"]
    max_depth: int = fld(rule="C24", schema={"minimum": 1})


@dataclass(frozen=True)
class EffectDomain(Node):
    __upstream__: ClassVar[str] = "EffectContract"
    retry: Literal["pure", "idempotent", "transactional", "non_retryable"]
    speculation_safety: NoSpeculationSafety | ClonableSafety | RewindableSafety = fld(
        factory=lambda: NoSpeculationSafety(kind="none")
    )


# ------------------------------------------------------------------ steps


@dataclass(frozen=True)
class InvokeStep(Node):
    __upstream__: ClassVar[str] = "WorkflowStep::Invoke"
    kind: Literal["invoke"]
    component: str = fld(schema=NAME)
    inputs: Mapping[str, str] = fld(factory=FrozenMap, schema={"additionalProperties": NAME})
    outputs: Mapping[str, str] = fld(factory=FrozenMap, schema={"additionalProperties": NAME})


@dataclass(frozen=True)
class LoopIteration(Node):
    __upstream__: ClassVar[str] = "WorkflowLoopIteration"
    value: str = fld(schema=NAME)
    contract: TensorContract


@dataclass(frozen=True)
class Carry(Node):
    __upstream__: ClassVar[str] = "WorkflowCarry"
    cell: str = fld(schema=NAME)
    next: str = fld(schema=NAME)
    initial: str | None = fld(None, schema=NAME)


@dataclass(frozen=True)
class LoopStep(Node):
    __upstream__: ClassVar[str] = "WorkflowStep::Loop"
    kind: Literal["loop"]
    steps: tuple[Step, ...] = fld(rule="D27", schema={"minItems": 1})
    continue_when: str = fld(schema=NAME)
    max_iterations: str = fld(schema=NAME)
    setup: tuple[Step, ...] = ()
    termination: Literal["predicate", "generation_eos"] = "predicate"
    iteration: LoopIteration | None = None
    carried: tuple[Carry, ...] = ()


@dataclass(frozen=True)
class Phi(Node):
    __upstream__: ClassVar[str] = "WorkflowBranchOutput"
    cases: Mapping[str, str] = fld(rule="D36", schema={"additionalProperties": NAME})
    default: str | None = fld(None, rule="D36", schema=NAME)


@dataclass(frozen=True)
class BranchStep(Node):
    """A branch: each case (and the default) is **one** step; use a ``sequence`` for several."""

    __upstream__: ClassVar[str] = "WorkflowStep::Branch"
    kind: Literal["branch"]
    predicate: str = fld(schema=NAME)
    cases: Mapping[str, Step] = fld(
        rule="D35",
        schema={
            "minProperties": 1,
            "propertyNames": {
                "pattern": "^(true|false|-?(0|[1-9][0-9]*))$",
                "description": "case keys are 'true', 'false' or decimal integers",
            },
        },
    )
    default: Step | None = None
    outputs: Mapping[str, Phi] = fld(factory=FrozenMap)


@dataclass(frozen=True)
class EmitStep(Node):
    __upstream__: ClassVar[str] = "WorkflowStep::Emit"
    kind: Literal["emit"]
    value: str = fld(schema=NAME)
    output: str = fld(schema=NAME)
    mode: Literal["replace", "append", "event"]
    when: str | None = fld(None, schema=NAME)
    valid_length: str | None = fld(None, schema=NAME)
    axis: int | None = fld(None, schema={"minimum": 0})


@dataclass(frozen=True)
class SequenceStep(Node):
    __upstream__: ClassVar[str] = "WorkflowStep::Sequence"
    kind: Literal["sequence"]
    steps: tuple[Step, ...] = fld(rule="D27", schema={"minItems": 1})


Step = SequenceStep | InvokeStep | LoopStep | BranchStep | EmitStep

# Step kinds that once existed and are now rejected with a dedicated message.
REMOVED_STEP_KINDS = {
    "transfer": "transfers are planned by the runtime, never authored; delete the step",
}


# ------------------------------------------------------------------ workflow


@dataclass(frozen=True)
class Manifest(Node):
    __upstream__: ClassVar[str] = "WorkflowManifest"
    __removed_keys__: ClassVar[dict[str, str]] = {
        "ir_version": "IR and opset versions live in each ONNX artifact, never in metadata",
        "onnx_opsets": "IR and opset versions live in each ONNX artifact, never in metadata",
        "custom_op_versions": "custom operator versions live in each ONNX artifact",
    }
    adapter_abis: Mapping[str, str] = fld(factory=FrozenMap, schema={"additionalProperties": NAME})
    capabilities: tuple[str, ...] = fld((), schema={"items": NAME})


@dataclass(frozen=True)
class Workflow(Node):
    __upstream__: ClassVar[str] = "WorkflowSpec"
    __removed_keys__: ClassVar[dict[str, str]] = {
        "graph": "a workflow is a list of steps; there is no single graph",
        "initial_effects": "effects are inferred from the steps",
        **GLOBALLY_REMOVED_KEYS,
    }
    manifest: Manifest
    components: Mapping[str, Component] = fld(schema={"propertyNames": {"x-rule": "C16"}})
    steps: tuple[Step, ...] = fld(rule="D27", schema={"minItems": 1})
    inputs: Mapping[str, WorkflowInput] = fld(factory=FrozenMap)
    outputs: Mapping[str, WorkflowOutput] = fld(factory=FrozenMap)
    state: Mapping[str, StateCell] = fld(factory=FrozenMap)
    effects: Mapping[str, EffectDomain] = fld(factory=FrozenMap)
    serving: ServingContract | None = None


@dataclass(frozen=True)
class Pipeline(Node):
    __upstream__: ClassVar[str] = "PipelineSpec"
    __removed_keys__: ClassVar[dict[str, str]] = {
        "strategy": "pipeline strategies were replaced by pipeline.workflow",
        "phases": "pipeline phases were replaced by pipeline.workflow steps",
    }
    workflow: Workflow


# ------------------------------------------------------------------ generation


@dataclass(frozen=True)
class GenerationDefaults(Node):
    """Author-declared search defaults (the ``search`` section of a ``genai_config.json``).

    Open upstream: keys it does not define are accepted and not read."""

    __upstream__: ClassVar[str] = "GenerationDefaults"
    __open__: ClassVar[bool] = True
    do_sample: bool | None = None
    temperature: float | None = None
    top_k: int | None = fld(None, schema={"minimum": 0})
    top_p: float | None = None
    repetition_penalty: float | None = None
    num_beams: int | None = fld(None, schema={"minimum": 0})
    num_return_sequences: int | None = fld(None, schema={"minimum": 0})
    min_length: int | None = fld(None, schema={"minimum": 0})
    max_length: int | None = fld(None, schema={"minimum": 0})
    length_penalty: float | None = None
    no_repeat_ngram_size: int | None = fld(None, schema={"minimum": 0})
    diversity_penalty: float | None = None
    early_stopping: bool | None = None


@dataclass(frozen=True)
class OverrideConstraint(Node):
    __upstream__: ClassVar[str] = "GenerationOverrideConstraint"
    minimum: float | None = None
    maximum: float | None = None


@dataclass(frozen=True)
class GenerationOverride(Node):
    __upstream__: ClassVar[str] = "GenerationOverride"
    input: str = fld(rule="G70", schema=NAME)
    constraint: OverrideConstraint | None = None


@dataclass(frozen=True)
class Generation(Node):
    __upstream__: ClassVar[str] = "GenerationContract"
    defaults: GenerationDefaults | None = None
    overrides: Mapping[str, GenerationOverride] = fld(factory=FrozenMap, rule="G70")


# ------------------------------------------------------------------ adapters (LoRA)


@dataclass(frozen=True)
class TargetGraphInputs(Node):
    __upstream__: ClassVar[str] = "LoraGraphInputBinding"
    a: str = fld(rule="G66", schema=NAME)
    b: str = fld(rule="G66", schema=NAME)
    scale: str | None = fld(None, rule="G66", schema=NAME)


@dataclass(frozen=True)
class TargetSlice(Node):
    __upstream__: ClassVar[str] = "LoraTargetSlice"
    role: str = fld(rule="G66", schema=NAME)
    offset: int = fld(rule="G66", schema={"minimum": 0})
    width: int = fld(rule="G66", schema={"minimum": 0})
    rank: int | None = fld(None, rule="G66", schema={"minimum": 0})
    alpha: float | None = fld(None, rule="G66")


@dataclass(frozen=True)
class AdapterTarget(Node):
    __upstream__: ClassVar[str] = "LoraTargetDescriptor"
    id: str = fld(rule="G66", schema=NAME)
    component: str = fld(rule="G66", schema=NAME)
    initializer: str = fld(rule="G66", schema=NAME)
    node_name: str = fld(rule="G66", schema=NAME)
    output_name: str = fld(rule="G66", schema=NAME)
    activation_dtype: str = fld(rule="G66", schema=NAME)
    input_features: int = fld(rule="G66", schema={"minimum": 0})
    output_features: int = fld(rule="G66", schema={"minimum": 0})
    layer_index: int | None = fld(None, rule="G66", schema={"minimum": 0})
    rank: int | None = fld(None, rule="G66", schema={"minimum": 0})
    alpha: float | None = fld(None, rule="G66")
    output_slice: TargetSlice | None = None
    graph_inputs: TargetGraphInputs | None = None


@dataclass(frozen=True)
class TargetManifest(Node):
    __upstream__: ClassVar[str] = "LoraTargetManifest"
    targets: tuple[AdapterTarget, ...] = fld(rule="G64")


@dataclass(frozen=True)
class AdapterSelection(Node):
    __upstream__: ClassVar[str] = "AdapterSelectionContract"
    segments: str = fld(rule="G65", schema=NAME)
    adapter_counts: str = fld(rule="G65", schema=NAME)
    scales: str = fld(rule="G65", schema=NAME)
    max_adapters: int = fld(rule="G64", schema={"minimum": 0})
    active: str | None = fld(None, rule="G65", schema=NAME)


@dataclass(frozen=True)
class AdapterCache(Node):
    __upstream__: ClassVar[str] = "AdapterCacheContract"
    max_entries: int = fld(16, rule="G64", schema={"minimum": 0})
    eviction: Literal["lru"] = "lru"


@dataclass(frozen=True)
class AdapterPlanning(Node):
    __upstream__: ClassVar[str] = "AdapterPlanningContract"
    bucket_by_adapter_set: bool = True
    stable_buffers: bool = True
    invalidate_capture_on_eviction: bool = True


@dataclass(frozen=True)
class AdapterProvenance(Node):
    __upstream__: ClassVar[str] = "AdapterProvenance"
    producer: str = fld(rule="G67")
    source: str | None = fld(None, rule="G67")
    revision: str | None = fld(None, rule="G67")


@dataclass(frozen=True)
class AdapterWeights(Node):
    __upstream__: ClassVar[str] = "AdapterWeightArtifact"
    location: str = fld(rule="G67")
    loader_capability: str = fld(rule="G67")
    scale_encoding: Literal["alpha_over_rank", "baked"] = fld(rule="G67")
    format: Literal["json", "ort_genai", "hf_peft", "safetensors"] = fld("json", rule="G67")
    config_location: str | None = fld(None, rule="G67")


@dataclass(frozen=True)
class AdapterBinding(Node):
    __upstream__: ClassVar[str] = "AdapterTargetBinding"
    target: str = fld(rule="G67")
    weight_key: str = fld(rule="G67")
    rank: int | None = fld(None, rule="G67", schema={"minimum": 0})
    alpha: float | None = fld(None, rule="G67")


@dataclass(frozen=True)
class AdapterArtifact(Node):
    __upstream__: ClassVar[str] = "AdapterArtifact"
    index: int = fld(rule="G67", schema={"minimum": 0})
    identity: str = fld(rule="G67")
    version: str = fld(rule="G67")
    rank: int = fld(rule="G67", schema={"minimum": 0})
    alpha: float = fld(rule="G67")
    dtype: str = fld(rule="G67")
    weights: tuple[AdapterWeights, ...] = fld((), rule="G67")
    bindings: tuple[AdapterBinding, ...] = fld((), rule="G67")
    provenance: AdapterProvenance | None = None


@dataclass(frozen=True)
class Adapters(Node):
    __upstream__: ClassVar[str] = "AdapterServiceContract"
    target_manifest: TargetManifest
    selection: AdapterSelection
    application_capability: str = fld(rule="G64")
    discovery_fallback: Literal["disabled", "tooling_only"] = "disabled"
    portable_fallback: bool = False
    artifacts: Mapping[str, AdapterArtifact] = fld(factory=FrozenMap, rule="G64")
    cache: AdapterCache = fld(factory=lambda: AdapterCache())
    planning: AdapterPlanning = fld(factory=lambda: AdapterPlanning())


# ------------------------------------------------------------------ preprocessing programs

IMAGE_SIZE_SCHEMA = {
    "x-upstream": "ImageSizeSpec",
    "anyOf": [
        {"type": "integer", "minimum": 0},
        {
            "type": "object",
            "properties": {
                "width": {"type": "integer", "minimum": 0},
                "height": {"type": "integer", "minimum": 0},
            },
            "required": ["width", "height"],
        },
    ],
}


@dataclass(frozen=True)
class ImageTransform(Node):
    """One step of an image program: ``op`` selects the operation; the other fields are the
    parameters that operation reads (only the relevant ones are set)."""

    __upstream__: ClassVar[str] = "ImageTransform"
    __open__: ClassVar[bool] = True
    op: str = fld(rule="G69", schema=NAME)
    inputs: tuple[str, ...] | None = fld(None, rule="G69", schema={"items": NAME})
    outputs: tuple[str, ...] | None = fld(None, rule="G69", schema={"items": NAME})
    size: Any = fld(None, rule="G69", any_schema=IMAGE_SIZE_SCHEMA)
    mode: str | None = None
    interpolation: str | None = None
    min_pixels: int | None = fld(None, schema={"minimum": 1})
    max_pixels: int | None = fld(None, schema={"minimum": 1})
    size_multiple: int | None = fld(None, schema={"minimum": 1})
    max_patches: int | None = fld(None, schema={"minimum": 1})
    pooling_kernel_size: int | None = fld(None, schema={"minimum": 1})
    scale: float | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    tile_size: int | None = fld(None, schema={"minimum": 1})
    max_tiles: int | None = fld(None, schema={"minimum": 1})
    include_thumbnail: bool | None = None
    thumbnail_order: str | None = None
    thumbnail_interpolation: str | None = None
    canvas_pad_value: float | None = None
    mask_patch_size: int | None = fld(None, schema={"minimum": 1})
    patch_size: int | None = fld(None, schema={"minimum": 1})
    temporal_patch_size: int | None = fld(None, schema={"minimum": 1})
    merge_size: int | None = fld(None, schema={"minimum": 1})
    channel_order: str | None = None
    temporal_order: str | None = None
    patch_order: str | None = None
    coordinate_order: str | None = None
    flatten: bool | None = None
    pad_value: float | None = None
    target_length: int | None = fld(None, schema={"minimum": 1})


@dataclass(frozen=True)
class ImageOutputBinding(Node):
    """Binds a program-local value (``source``) to a workflow value (``name``)."""

    __upstream__: ClassVar[str] = "ImageOutputBinding"
    __open__: ClassVar[bool] = True
    source: str = fld(rule="G69", schema=NAME)
    name: str = fld(rule="G69", schema=NAME)
    content: str = fld(rule="G69", schema=NAME)
    dtype: str = fld(rule="G69", schema=NAME)
    contract: TensorContract | None = None
    pad_value: float | None = None
    optional: bool | None = None


@dataclass(frozen=True)
class ImageProgram(Node):
    """``{transforms, outputs}``: run by the workflow's one ``image-preprocess@1`` adapter."""

    __upstream__: ClassVar[str] = "ImagePreprocessingProgram"
    __open__: ClassVar[bool] = True
    outputs: tuple[ImageOutputBinding, ...] = fld(rule="G69", schema={"minItems": 1})
    transforms: tuple[ImageTransform, ...] = ()


@dataclass(frozen=True)
class AudioTransform(Node):
    __upstream__: ClassVar[str] = "AudioTransform"
    __open__: ClassVar[bool] = True
    op: str = fld(rule="G69", schema=NAME)
    inputs: tuple[str, ...] | None = fld(None, rule="G69", schema={"items": NAME})
    outputs: tuple[str, ...] | None = fld(None, rule="G69", schema={"items": NAME})
    sample_rate: int | None = fld(None, schema={"minimum": 1})
    channels: int | None = fld(None, schema={"minimum": 1})
    epsilon: float | None = None
    scale: float | None = None
    mode: str | None = None
    pad_value: float | None = None
    target_length: int | None = fld(None, schema={"minimum": 1})
    num_mel_bins: int | None = fld(None, schema={"minimum": 1})
    n_fft: int | None = fld(None, schema={"minimum": 1})
    hop_length: int | None = fld(None, schema={"minimum": 1})
    win_length: int | None = fld(None, schema={"minimum": 1})
    window: str | None = None
    mel_scale: str | None = None


@dataclass(frozen=True)
class AudioOutputBinding(Node):
    __upstream__: ClassVar[str] = "AudioOutputBinding"
    __open__: ClassVar[bool] = True
    name: str = fld(rule="G69", schema=NAME)
    source: str = fld(rule="G69", schema=NAME)
    content: str = fld(rule="G69", schema=NAME)
    dtype: str = fld(rule="G69", schema=NAME)
    rank: int | None = fld(None, schema={"minimum": 0})
    contract: TensorContract | None = None
    pad_value: float | None = None
    optional: bool | None = None


@dataclass(frozen=True)
class AudioProgram(Node):
    """``{transforms, outputs}``: run by the workflow's one ``audio-preprocess@1`` adapter."""

    __upstream__: ClassVar[str] = "AudioPreprocessingProgram"
    __open__: ClassVar[bool] = True
    outputs: tuple[AudioOutputBinding, ...] = fld(rule="G69", schema={"minItems": 1})
    transforms: tuple[AudioTransform, ...] = ()


@dataclass(frozen=True)
class Preprocessing(Node):
    __upstream__: ClassVar[str] = "PreprocessingSpec"
    __open__: ClassVar[bool] = True
    image: ImageProgram | None = None
    audio: AudioProgram | None = None


# ------------------------------------------------------------------ package facts


@dataclass(frozen=True)
class TokenizerArtifact(Node):
    __upstream__: ClassVar[str] = "TokenizerArtifact"
    location: str = fld(schema=NAME)


@dataclass(frozen=True)
class SpecialToken(Node):
    __upstream__: ClassVar[str] = "SpecialTokenFact"
    id: int = fld(schema={"minimum": 0})
    content: str = fld(schema=NAME)


@dataclass(frozen=True)
class Tokenizer(Node):
    __upstream__: ClassVar[str] = "TokenizerFacts"
    algorithm: str = fld(schema=NAME)
    vocab_size: int = fld(schema={"minimum": 1})
    byte_level: bool = False
    artifacts: tuple[TokenizerArtifact, ...] = ()
    special_tokens: Mapping[str, SpecialToken] = fld(factory=FrozenMap)


@dataclass(frozen=True)
class ConstraintLanguage(Node):
    __upstream__: ClassVar[str] = "ConstraintLanguageFacts"
    dialect: str = fld(schema=NAME)
    version: str = fld(schema=NAME)
    component: str = fld(rule="G79", schema=NAME)


@dataclass(frozen=True)
class PackageFacts(Node):
    __upstream__: ClassVar[str] = "PackageFacts"
    tokenizer: Tokenizer | None = None
    constraint_languages: tuple[ConstraintLanguage, ...] = ()


# ------------------------------------------------------------------ speculative decoding


@dataclass(frozen=True)
class IdenticalVocabulary(Node):
    __upstream__: ClassVar[str] = "SpeculativeVocabulary::Identical"
    kind: Literal["identical"]


@dataclass(frozen=True)
class SubsetVocabulary(Node):
    __upstream__: ClassVar[str] = "SpeculativeVocabulary::Subset"
    kind: Literal["subset"]
    proposer_vocab_size: int = fld(schema={"minimum": 0})


@dataclass(frozen=True)
class MappedVocabulary(Node):
    __upstream__: ClassVar[str] = "SpeculativeVocabulary::Mapped"
    kind: Literal["mapped"]
    artifact: str = fld(schema=NAME)


@dataclass(frozen=True)
class RecurrentBinding(Node):
    __upstream__: ClassVar[str] = "SpeculativeRecurrenceBinding"
    state: str = fld(rule="F62", schema=NAME)
    input: str = fld(rule="F62", schema=NAME)
    output: str = fld(rule="F62", schema=NAME)


@dataclass(frozen=True)
class FoldedCarrySeed(Node):
    __upstream__: ClassVar[str] = "SpeculativeValueRef"
    component: str = fld(rule="F63", schema=NAME)
    output: str = fld(rule="F63", schema=NAME)


@dataclass(frozen=True)
class TokenEmbedding(Node):
    __upstream__: ClassVar[str] = "TokenEmbeddingSource"
    component: str = fld(rule="F63", schema=NAME)
    table: str = fld(rule="F63", schema=NAME)


@dataclass(frozen=True)
class BlockProposal(Node):
    __upstream__: ClassVar[str] = "SpeculativeProposalExecution::Block"
    kind: Literal["block"]


@dataclass(frozen=True)
class ChainedProposal(Node):
    __upstream__: ClassVar[str] = "SpeculativeProposalExecution::Chained"
    kind: Literal["chained"]
    token_embedding_input: str = fld(rule="F62", schema=NAME)
    logits_output: str = fld(rule="F62", schema=NAME)
    recurrent: tuple[RecurrentBinding, ...] = ()
    folded_carry_output: str | None = fld(None, rule="F62", schema=NAME)
    folded_carry_seed: FoldedCarrySeed | None = None
    token_embedding: TokenEmbedding | None = None


@dataclass(frozen=True)
class Speculative(Node):
    __upstream__: ClassVar[str] = "SpeculativeContract"
    proposer: str = fld(rule="F59", schema=NAME)
    target: str = fld(rule="F59", schema=NAME)
    vocabulary: IdenticalVocabulary | SubsetVocabulary | MappedVocabulary
    max_proposal_width: int = fld(schema={"minimum": 1})
    proposal_execution: BlockProposal | ChainedProposal = fld(
        factory=lambda: BlockProposal(kind="block")
    )
    port_bindings: Mapping[str, str] = fld(factory=FrozenMap)
    shared_state: tuple[str, ...] = fld((), schema={"items": NAME})
    shared_weights: tuple[str, ...] = fld((), schema={"items": NAME})
    distribution_preserving: bool = False
    rollback_state: tuple[str, ...] = fld((), rule="F60", schema={"items": NAME})


# ------------------------------------------------------------------ profiles


@dataclass(frozen=True)
class Pooling(Node):
    __upstream__: ClassVar[str] = "PoolingSpec"
    kind: Literal["mean", "max", "cls", "last_token"]
    axis: int = fld(schema={"minimum": 0})
    normalize: bool = False


@dataclass(frozen=True)
class DecodingVocabulary(Node):
    __upstream__: ClassVar[str] = "DecodingVocabulary"
    source: str = fld(rule="G71", schema=NAME)
    size: int | None = fld(None, rule="G71", schema={"minimum": 0})
    word_delimiter: str | None = None
    ignored_tokens: tuple[str, ...] = ()
    tokens: tuple[str, ...] = ()


@dataclass(frozen=True)
class SequenceDecoding(Node):
    __upstream__: ClassVar[str] = "SequenceDecodingSpec"
    kind: str = fld(rule="G71", schema=NAME)
    time_axis: int = fld(rule="G71", schema={"minimum": 0})
    class_axis: int = fld(rule="G71", schema={"minimum": 0})
    blank_id: int | None = fld(None, rule="G71", schema={"minimum": 0})
    collapse_repeats: bool = False
    lengths: str | None = fld(None, rule="G71")
    vocabulary: DecodingVocabulary | None = None


@dataclass(frozen=True)
class Profile(Node):
    __upstream__: ClassVar[str] = "TaskProfile"
    kind: str = fld(rule="G71", schema=NAME)
    version: str = fld(rule="G71", schema=NAME)
    requirement: Literal["required", "ignorable"] = "required"
    outputs: Mapping[str, str] = fld(factory=FrozenMap, rule="G71")
    pooling: Pooling | None = None
    decoding: SequenceDecoding | None = None
    batch_invariance: str | None = None
    generation_affecting: bool = False


# ------------------------------------------------------------------ model facts (and model.io)


@dataclass(frozen=True)
class KeySequenceLengths(Node):
    __upstream__: ClassVar[str] = "KeySequenceLengthsSpec"
    __open__: ClassVar[bool] = True
    scalar_broadcast: Literal["unit_batch"] | None = None


@dataclass(frozen=True)
class AttentionConfig(Node):
    __upstream__: ClassVar[str] = "AttentionConfig"
    __open__: ClassVar[bool] = True
    type: str = fld(schema=NAME)
    num_kv_heads: int | None = fld(None, schema={"minimum": 1})
    num_attention_heads: int | None = fld(None, schema={"minimum": 1})
    head_dim: int | None = fld(None, schema={"minimum": 1})
    sliding_window: int | None = fld(None, schema={"minimum": 1})
    sink_tokens: int | None = fld(None, schema={"minimum": 0})
    key_sequence_lengths: KeySequenceLengths | None = None
    fallback_behavior: str | None = None


@dataclass(frozen=True)
class ChunkedPrefill(Node):
    __upstream__: ClassVar[str] = "ChunkedPrefillConfig"
    __open__: ClassVar[bool] = True
    chunk_size: int | None = fld(None, schema={"minimum": 1})


@dataclass(frozen=True)
class RuntimeConfigurable(Node):
    __upstream__: ClassVar[str] = "RuntimeConfigurable"
    prefix_cache: bool | None = None
    continuous_batching: bool | None = None
    chunked_prefill: ChunkedPrefill | None = None


@dataclass(frozen=True)
class LoopStatePair(Node):
    __upstream__: ClassVar[str] = "LoopStatePair"
    __open__: ClassVar[bool] = True
    input: str = fld(schema=NAME)
    output: str = fld(schema=NAME)
    init: str | None = None
    update: str | None = None


@dataclass(frozen=True)
class AbsentInput(Node):
    __upstream__: ClassVar[str] = "AbsentInputSpec"
    __open__: ClassVar[bool] = True
    kind: Literal["zeros"]
    shape: tuple[Dim, ...] = fld(any_schema={"type": "array", "items": {"$ref": "#/$defs/Dim"}})


@dataclass(frozen=True)
class OptionalInput(Node):
    __upstream__: ClassVar[str] = "OptionalInputSpec"
    __open__: ClassVar[bool] = True
    presence: str = fld(schema=NAME)
    absent: AbsentInput


@dataclass(frozen=True)
class StaticCacheIO(Node):
    __upstream__: ClassVar[str] = "StaticCacheIoSpec"
    __open__: ClassVar[bool] = True
    write_indices_input: str = fld(schema=NAME)
    kv_sequence_length_input: str = fld(schema=NAME)
    key_cache_inputs: tuple[str, ...] = fld(schema={"items": NAME})
    value_cache_inputs: tuple[str, ...] = fld(schema={"items": NAME})
    key_cache_outputs: tuple[str, ...] = fld(schema={"items": NAME})
    value_cache_outputs: tuple[str, ...] = fld(schema={"items": NAME})


KV_STRIDE_DIM = {"enum": ["kv_heads", "seq_capacity", "head_dim"]}

KV_LAYOUT_SCHEMA = {
    "x-upstream": "KvCacheLayout",
    "anyOf": [
        {"enum": ["head_major_bnsh", "seq_major_bsnh"]},
        {
            "type": "object",
            "x-upstream": "KvStrideDescriptor",
            "properties": {
                "strides": {
                    "type": "object",
                    "x-upstream": "KvAxisStrides",
                    "properties": {
                        axis: {"type": "array", "items": KV_STRIDE_DIM}
                        for axis in ("batch", "head", "seq", "head_dim")
                    },
                },
                "reservation_offset_elements": {"type": "integer", "minimum": 0, "default": 0},
                "reservation_seq_slots": {"type": "integer", "minimum": 0},
            },
            "required": ["strides"],
        },
    ],
}


@dataclass(frozen=True)
class ModelIO(Node):
    """The legacy graph ABI of a bare decoder (``model.io``): import-only, never beside a
    workflow; lowered to a workflow at load."""

    __upstream__: ClassVar[str] = "ModelIoSpec"
    sequence_source: Literal["token_ids", "inputs_embeds"] | None = None
    kv_ownership: Literal["owned", "shared"] | None = None
    kv_layout: Any = fld(None, any_schema=KV_LAYOUT_SCHEMA)
    token_input: str | None = fld(None, schema=NAME)
    inputs_embeds_input: str | None = fld(None, schema=NAME)
    attention_mask_input: str | None = fld(None, schema=NAME)
    position_ids_input: str | None = fld(None, schema=NAME)
    logits_output: str | None = fld(None, schema=NAME)
    hidden_output: str | None = fld(None, schema=NAME)
    kv_inputs: tuple[str, ...] | None = fld(None, schema={"items": NAME})
    kv_outputs: tuple[str, ...] | None = fld(None, schema={"items": NAME})
    aliasing: Literal["permitted", "required", "forbidden"] | None = None
    encoder_hidden_states_input: str | None = fld(None, schema=NAME)
    audio_features_input: str | None = fld(None, schema=NAME)
    cross_kv_inputs: tuple[str, ...] | None = fld(None, schema={"items": NAME})
    cross_kv_outputs: tuple[str, ...] | None = fld(None, schema={"items": NAME})
    state_pairs: tuple[LoopStatePair, ...] | None = fld(None, schema={"minItems": 1})
    optional_inputs: Mapping[str, OptionalInput] = fld(factory=FrozenMap)
    static_cache: StaticCacheIO | None = None


@dataclass(frozen=True)
class MoERouter(Node):
    __upstream__: ClassVar[str] = "MoERouterSpec"
    __open__: ClassVar[bool] = True
    score_function: str = fld(schema=NAME)
    selection_method: str = fld(schema=NAME)
    normalize_weights: bool
    scaling_factor: float = fld(schema={"minimum": 0})
    group_count: int | None = fld(None, schema={"minimum": 1})
    groups_per_token: int | None = fld(None, schema={"minimum": 1})
    group_score: str | None = None


@dataclass(frozen=True)
class MixtureOfExperts(Node):
    __upstream__: ClassVar[str] = "MixtureOfExpertsSpec"
    __open__: ClassVar[bool] = True
    representation: str = fld(schema=NAME)
    routed_expert_count: int = fld(schema={"minimum": 1})
    shared_expert_count: int = fld(schema={"minimum": 0})
    experts_per_token: int = fld(schema={"minimum": 1})
    expert_intermediate_size: int = fld(schema={"minimum": 1})
    shared_expert_intermediate_size: int = fld(schema={"minimum": 0})
    activation: str = fld(schema=NAME)
    router: MoERouter


@dataclass(frozen=True)
class TensorShardFacts(Node):
    __upstream__: ClassVar[str] = "TensorShardFacts"
    shard_axis: int = fld(schema={"minimum": 0})
    max_shards: int = fld(schema={"minimum": 1})
    replicated: tuple[str, ...] = ()


@dataclass(frozen=True)
class PipelineStageFacts(Node):
    __upstream__: ClassVar[str] = "PipelineStageFacts"
    components: tuple[str, ...]
    outputs: tuple[str, ...] = ()
    state_groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExpertShardFacts(Node):
    __upstream__: ClassVar[str] = "ExpertShardFacts"
    expert_count: int = fld(schema={"minimum": 1})
    contiguous_groups_only: bool = False
    replicated: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sharding(Node):
    __upstream__: ClassVar[str] = "ShardingContract"
    tensor_parallel: Mapping[str, TensorShardFacts] = fld(factory=FrozenMap)
    pipeline_parallel: tuple[PipelineStageFacts, ...] = ()
    expert_parallel: ExpertShardFacts | None = None


@dataclass(frozen=True)
class ModelFacts(Node):
    """Build-time model properties. Open upstream: keys it does not define are accepted."""

    __upstream__: ClassVar[str] = "ModelCapabilities"
    __open__: ClassVar[bool] = True
    attention: AttentionConfig | None = None
    max_sequence_length: int | None = fld(None, schema={"minimum": 1})
    vocab_size: int | None = fld(None, schema={"minimum": 1})
    runtime_configurable: RuntimeConfigurable | None = None
    io: ModelIO | None = None
    mixture_of_experts: MixtureOfExperts | None = None
    sharding: Sharding | None = None


@dataclass(frozen=True)
class QuantizationOverride(Node):
    __upstream__: ClassVar[str] = "QuantizationOverride"
    __open__: ClassVar[bool] = True
    precision: str = fld(schema=NAME)
    layers: tuple[int, ...] | None = None
    component: str | None = fld(None, schema=NAME)


@dataclass(frozen=True)
class Quantization(Node):
    __upstream__: ClassVar[str] = "QuantizationIntent"
    __open__: ClassVar[bool] = True
    default: str | None = None
    overrides: tuple[QuantizationOverride, ...] | None = None


@dataclass(frozen=True)
class HardwareRequirements(Node):
    __upstream__: ClassVar[str] = "HardwareRequirements"
    __open__: ClassVar[bool] = True
    min_memory_gb: float | None = fld(None, schema={"minimum": 0})
    required_dtypes: tuple[str, ...] | None = None
    beneficial_dtypes: tuple[str, ...] | None = None
    kv_cache_memory_per_1k_tokens_mb: float | None = fld(None, schema={"minimum": 0})
    supports_tensor_parallel: bool | None = None
    min_tp_degree: int | None = fld(None, schema={"minimum": 1})


# ------------------------------------------------------------------ the document


@dataclass(frozen=True)
class Metadata(Node):
    """The root of an ``inference_metadata.{yaml,yml,json}`` document."""

    __upstream__: ClassVar[str] = "InferenceMetadata"
    __removed_keys__: ClassVar[dict[str, str]] = {
        "strategy": "decoding strategies are declared by pipeline.workflow",
        "tokens": "token handling is declared by pipeline.workflow",
        "kv_cache": "KV caches are declared as state cells in service groups "
        "(pipeline.workflow.serving.state_service)",
    }
    schema_version: str | None = None
    required_capabilities: tuple[str, ...] = fld((), schema={"items": NAME})
    model: ModelFacts | None = None
    quantization: Quantization | None = None
    pipeline: Pipeline | None = None
    adapters: Adapters | None = None
    hardware_requirements: HardwareRequirements | None = None
    preprocessing: Preprocessing | None = None
    package: PackageFacts | None = None
    generation: Generation | None = None
    profiles: Mapping[str, Profile] = fld(factory=FrozenMap)
    speculative: Speculative | None = None

    @property
    def workflow(self) -> Workflow | None:
        return self.pipeline.workflow if self.pipeline else None
