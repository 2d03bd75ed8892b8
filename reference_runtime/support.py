"""What this runtime supports, published exactly (admission compares strings, never guesses).

A package that requires a capability, adapter ABI, binding contract or profile kind outside
these sets is refused at load, naming each missing one. ``reference-runtime capabilities``
prints them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# Every capability string the format defines (the upstream capability vocabulary).
KNOWN_CAPABILITIES = frozenset(
    {
        "workflow_ssa", "linear_effects", "nested_control_flow", "loop_induction_values",
        "typed_emit", "streaming_emit", "emit_valid_length", "input_presence",
        "explicit_transfer", "serving_service_contract", "session_state_lease",
        "bounded_state_recurrence", "advisory_state", "parameter_adapters",
        "heterogeneous_adapter_batching", "grammar_guidance_adapter", "telemetry_adapter",
        "adaptive_proposal_budget", "kv_cache", "prefix_cache", "continuous_batching",
        "control_flow_loop", "loop_carried_state", "grouped_query_attention",
        "multi_head_attention", "image_preprocessing_program", "packed_image_outputs",
        "position_program", "multi_axis_positions", "dual_sequence_inputs",
    }
)  # fmt: skip

# Capabilities this runtime does not implement (yet); everything else it supports.
UNSUPPORTED_CAPABILITIES = frozenset(
    {
        "explicit_transfer",  # only a planner inserts transfers; this runtime plans none
        "prefix_cache",
        "packed_image_outputs",
        "position_program",
        "multi_axis_positions",
        "dual_sequence_inputs",
    }
)


@dataclass(frozen=True)
class RuntimeSupport:
    """The exact sets a runtime publishes for admission."""

    capabilities: frozenset[str]
    adapter_abis: Mapping[str, str]  # ABI name -> the one supported version
    binding_contracts: frozenset[str] = frozenset()  # "id@version"
    profile_kinds: frozenset[str] = field(default_factory=frozenset)

    def to_json(self) -> dict:
        return {
            "capabilities": sorted(self.capabilities),
            "adapter_abis": dict(sorted(self.adapter_abis.items())),
            "binding_contracts": sorted(self.binding_contracts),
            "profile_kinds": sorted(self.profile_kinds),
        }


REFERENCE_SUPPORT = RuntimeSupport(
    capabilities=KNOWN_CAPABILITIES - UNSUPPORTED_CAPABILITIES,
    adapter_abis={
        "onnx-genai.image-preprocess": "1",
        "onnx-genai.audio-preprocess": "1",
        "onnx-genai.grammar-guidance": "1",
        "onnx-genai.telemetry": "1",
        "onnx-genai.parameter-overlay": "1",
        "onnx-genai.text-assembly": "1",
    },
    binding_contracts=frozenset(
        {
            "onnx-genai.autoregressive-decode@1",
            "onnx-genai.token-policy@1",
            "onnx-genai.speculative-block@1",
            "onnx-genai.continuous-batch@1",
        }
    ),
    # the profile kinds the format's readers know; a profile declaring pooling or decoding is
    # refused (H93): this runtime publishes workflow outputs and applies neither
    profile_kinds=frozenset(
        {"generation", "embedding", "reranking", "classification", "reward", "transcription"}
    ),
)
