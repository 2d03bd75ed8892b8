"""The adapter ABIs of the format: their actions and the contract bindings each action needs.

Read by the validator (C20, G69) and by the adapter executors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

GRAMMAR_INPUTS = ("state", "tokens", "valid_length", "transition_table")
GRAMMAR_OUTPUTS = ("next_state", "consumed_length", "logits_mask", "forced_tokens", "forced_length")


@dataclass(frozen=True)
class AdapterAbi:
    name: str
    version: str
    # action -> contract binding roles it requires; empty mapping = the ABI takes no action
    actions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # action -> the roles among them that are output ports (the others are input ports)
    action_outputs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # the preprocess ABIs run a declared program and read their input from port `encoded`
    program: str | None = None
    capability: str | None = None

    @property
    def needs_contract(self) -> bool:
        return bool(self.actions)


ADAPTER_ABIS: dict[str, AdapterAbi] = {
    abi.name: abi
    for abi in (
        AdapterAbi(
            "onnx-genai.grammar-guidance",
            "1",
            actions={
                "clone": ("state", "next_state"),
                "lookahead": GRAMMAR_INPUTS + GRAMMAR_OUTPUTS,
                "commit": GRAMMAR_INPUTS + ("next_state", "consumed_length"),
            },
            action_outputs={
                "clone": ("next_state",),
                "lookahead": GRAMMAR_OUTPUTS,
                "commit": ("next_state", "consumed_length"),
            },
            capability="grammar_guidance_adapter",
        ),
        AdapterAbi(
            "onnx-genai.telemetry",
            "1",
            actions={"start": ("timestamp",), "elapsed": ("timestamp", "duration_ms")},
            action_outputs={"start": ("timestamp",), "elapsed": ("duration_ms",)},
            capability="telemetry_adapter",
        ),
        AdapterAbi(
            "onnx-genai.parameter-overlay",
            "1",
            actions={"apply": ("input", "output")},
            action_outputs={"apply": ("output",)},
            capability="parameter_adapters",
        ),
        AdapterAbi("onnx-genai.image-preprocess", "1", program="image"),
        AdapterAbi("onnx-genai.audio-preprocess", "1", program="audio"),
        AdapterAbi("onnx-genai.text-assembly", "1"),
    )
}

TEXT_ASSEMBLY = "onnx-genai.text-assembly"
ADAPTIVE_PROPOSAL_BUDGET = "onnx-genai.adaptive-proposal-budget"
ADAPTERS_APPLICATION_CAPABILITY = "onnx-genai.adapters@1"
