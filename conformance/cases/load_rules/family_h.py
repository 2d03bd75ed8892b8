"""H: admission (derived capabilities in the manifest, capabilities the runtime supports) and
the files a package names."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from ..mutations import Delete, DeleteFile, Mutation, Set, Symlink, WriteFile

WF = ("pipeline", "workflow")
CAPS = (*WF, "manifest", "capabilities")
MODEL_ARTIFACT = (*WF, "components", "model", "implementation", "artifact")

KV_CAPS = [
    "workflow_ssa", "linear_effects", "nested_control_flow", "loop_induction_values",
    "typed_emit", "emit_valid_length", "input_presence", "serving_service_contract",
    "bounded_state_recurrence", "session_state_lease",
]  # fmt: skip
SPEC_CAPS = [
    "workflow_ssa", "linear_effects", "nested_control_flow", "typed_emit", "emit_valid_length",
    "serving_service_contract", "grammar_guidance_adapter", "telemetry_adapter",
]  # fmt: skip


def _without(caps: list[str], cap: str) -> list[str]:
    return [c for c in caps if c != cap]


def _projector_with_escaping_data() -> bytes:
    """The lora package's projector graph, its initializer stored outside the package."""
    features = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 2])
                for n in ("activations", "projected")]  # fmt: skip
    projection = helper.make_tensor("projection", TensorProto.FLOAT, [2, 2], [1.0, 0.0, 0.0, 1.0])
    projection.ClearField("float_data")
    projection.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "../projector.onnx.data"), ("offset", "0"), ("length", "16")):
        entry = projection.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph(
        [helper.make_node("Identity", ["activations"], ["projected"], name="copy_projected")],
        "projector",
        [features[0]],
        [features[1]],
        initializer=[projection],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model.SerializeToString()


ESCAPING_PROJECTOR = _projector_with_escaping_data()
assert onnx.load_from_string(ESCAPING_PROJECTOR).graph.initializer[0].external_data

MUTATIONS = (
    # ---------------------------------------------------------------- H72 derived capabilities
    Mutation("H72", "kv_decoder", (Set(CAPS, _without(KV_CAPS, "serving_service_contract")),),
             "pipeline.workflow.manifest.capabilities", "serving section not in the manifest"),
    Mutation("H72", "kv_decoder", (Set(CAPS, _without(KV_CAPS, "session_state_lease")),),
             "pipeline.workflow.manifest.capabilities", "session cell not in the manifest"),
    Mutation("H72", "kv_decoder", (Set(CAPS, _without(KV_CAPS, "loop_induction_values")),),
             "pipeline.workflow.manifest.capabilities", "loop iteration not in the manifest"),
    Mutation("H72", "speculative", (Set(CAPS, _without(SPEC_CAPS, "grammar_guidance_adapter")),),
             "pipeline.workflow.manifest.capabilities", "grammar adapter not in the manifest"),
    # ---------------------------------------------------------------- H73 unsupported
    Mutation("H73", "kv_decoder", (Set(("required_capabilities",), ["teleportation"]),),
             "required_capabilities[0]", "unknown required capability"),
    Mutation("H73", "kv_decoder", (Set(("required_capabilities",), ["prefix_cache"]),),
             "required_capabilities[0]", "unsupported explicit capability"),
    Mutation("H73", "kv_decoder", (Set(CAPS, [*KV_CAPS, "continuous_batching"]),),
             "pipeline.workflow.manifest.capabilities[10]", "unsupported manifest capability"),
    Mutation("H73", "static_cache", (Set((*CAPS, 5), "vendor.fast_path"),),
             "pipeline.workflow.manifest.capabilities[5]", "unknown manifest capability"),
    # ---------------------------------------------------------------- H74 package files
    Mutation("H74", "kv_decoder", (Set(MODEL_ARTIFACT, "/opt/models/model.onnx"),),
             "pipeline.workflow.components.model.implementation.artifact", "absolute artifact"),
    Mutation("H74", "kv_decoder", (Set(MODEL_ARTIFACT, "policies/../../model.onnx"),),
             "pipeline.workflow.components.model.implementation.artifact", "artifact with .."),
    Mutation("H74", "kv_decoder", (DeleteFile("policies/counter.onnx"),),
             "pipeline.workflow.components.counter.implementation.artifact", "missing artifact"),
    Mutation("H74", "kv_decoder", (Set(MODEL_ARTIFACT, "policies"),),
             "pipeline.workflow.components.model.implementation.artifact", "artifact directory"),
    Mutation("H74", "kv_decoder", (Symlink("model.onnx", "{outside}"),),
             "pipeline.workflow.components.model.implementation.artifact", "escaping symlink"),
    Mutation("H74", "kv_decoder", (DeleteFile("tokenizer.json"),),
             "package.tokenizer.artifacts[0].location", "missing tokenizer file"),
    Mutation("H74", "lora", (WriteFile("projector.onnx", ESCAPING_PROJECTOR),),
             "pipeline.workflow.components.projector.implementation.artifact",
             "external data outside the package"),
    Mutation("H74", "lora", (DeleteFile("adapters/peft/adapter_config.json"),),
             "adapters.artifacts.peft.weights[0].config_location", "missing adapter config"),
    Mutation("H74", "media", (Symlink("assembly.json", "{outside}"),),
             "pipeline.workflow.components.assembler.implementation.artifact",
             "escaping adapter artifact"),
    Mutation("H74", "kv_decoder", (DeleteFile("inference_metadata.yaml"),),
             "<document>", "no metadata file"),
    Mutation("H74", "kv_decoder", (Delete(("pipeline",)),),
             "pipeline", "no pipeline"),
    # ---------------------------------------------------------------- H91 bare decoders
    Mutation("H91", "model_io_decoder", (Set(("model", "layers"), 2),),
             "model.layers", "unknown model key"),
    Mutation("H91", "model_io_decoder", (Set(("model", "io", "logits_output"), "scores"),),
             "model.io.logits_output", "logits output the graph lacks"),
    Mutation("H91", "model_io_decoder", (Delete(("model", "io", "kv_outputs", 1)),),
             "model.io.kv_outputs", "unpaired KV names"),
    Mutation("H91", "model_io_decoder", (Set(("model", "io", "position_ids_input"), "pos"),),
             "model.io.position_ids_input", "position input the graph lacks"),
)  # fmt: skip
