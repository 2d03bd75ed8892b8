"""Family H, admission: derived capabilities in the manifest, capabilities the runtime
supports, and the files a package names. Mirrors ``reference_runtime/package/rules/admission.py``
and ``files.py``."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from ..mutations import (
    Delete,
    DeleteFile,
    EditJson,
    Insert,
    MoveFile,
    Mutation,
    Set,
    Symlink,
    Variant,
    WriteFile,
)

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


def projector_graph(external: dict[str, str]) -> bytes:
    """The lora package's projector graph, its initializer's data (16 bytes) stored externally
    as the ``external`` entries (location, offset, length) describe."""
    features = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 2])
                for n in ("activations", "projected")]  # fmt: skip
    projection = helper.make_tensor("projection", TensorProto.FLOAT, [2, 2], [1.0, 0.0, 0.0, 1.0])
    projection.ClearField("float_data")
    projection.data_location = TensorProto.EXTERNAL
    for key, value in external.items():
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


def _genai(edit, location: str, note: str) -> Mutation:
    """H91 for the genai_decoder folder with one edit of its genai_config.json, refused at
    ``location`` in that file."""
    return Mutation(
        "H91",
        "genai_decoder",
        (EditJson("genai_config.json", (edit,)),),
        f'["genai_config.json"].{location}',
        note,
    )


def kv_decoder_graph(
    past: dict,
    value_type: int = TensorProto.FLOAT,
    past_names: dict | None = None,
    vocab: int | str = 96,
    key_type: int = TensorProto.FLOAT,
    mask: bool = True,
) -> bytes:
    """A decoder graph for the genai_decoder folder (its names, one layer) whose past KV has
    the shapes ``past`` (``{"key": dims, "value": dims}``, the present KV the same with
    ``total_sequence`` for ``past_sequence``; ``{}``: no KV at all), its value and key of the
    element types ``value_type`` and ``key_type``; without ``mask``, no attention_mask input;
    ``past_names`` renames past KV inputs (``{"key": name}``); ``vocab`` is the logits' last
    dimension as declared (96 wide whatever it says)."""
    info = helper.make_tensor_value_info
    names = {k: f"past_key_values.0.{k}" for k in past} | (past_names or {})
    present = {k: [("total_sequence" if d == "past_sequence" else d) for d in dims]
               for k, dims in past.items()}  # fmt: skip
    types = {"key": key_type, "value": value_type}
    inputs = [info(n, TensorProto.INT64, ["batch", s])
              for n, s in (("input_ids", "sequence"), ("attention_mask", "total_sequence"),
                           ("position_ids", "sequence"))
              if mask or n != "attention_mask"]  # fmt: skip
    inputs += [info(names[k], types[k], d) for k, d in past.items()]
    outputs = [info("logits", TensorProto.FLOAT, ["batch", "sequence", vocab])]
    outputs += [info(f"present.0.{k}", types[k], d) for k, d in present.items()]
    nodes = [
        helper.make_node("Cast", ["input_ids"], ["ids"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["ids", "last"], ["column"]),
        helper.make_node("Expand", ["column", "vocab"], ["logits"]),
        *(helper.make_node("Identity", [names[k]], [f"present.0.{k}"]) for k in past),
    ]
    constants = [helper.make_tensor("last", TensorProto.INT64, [1], [2]),
                 helper.make_tensor("vocab", TensorProto.INT64, [3], [1, 1, 96])]  # fmt: skip
    graph = helper.make_graph(nodes, "kv_decoder", inputs, outputs, initializer=constants)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model.SerializeToString()


def split_axis_decoder() -> bytes:
    """The past value puts the sequence on axis 3, the past key on axis 2: one KV cache cannot
    hold both."""
    return kv_decoder_graph(
        {"key": ["batch", 4, "past_sequence", 8], "value": ["batch", 4, 8, "past_sequence"]}
    )


HEAD_MAJOR = ["batch", 4, "past_sequence", 8]
BATCH_SECOND = [4, "batch", "past_sequence", 8]
SEQUENCE_MAJOR = ["batch", "past_sequence", 4, 8]


def decoder_without_positions() -> bytes:
    """The genai_decoder folder's names, one layer, and no position_ids input: onnxruntime-genai
    feeds the positions input its config names only where the graph has one."""
    model = onnx.load_from_string(kv_decoder_graph({"key": HEAD_MAJOR, "value": HEAD_MAJOR}))
    (positions,) = [i for i, v in enumerate(model.graph.input) if v.name == "position_ids"]
    del model.graph.input[positions]
    return model.SerializeToString()


# The projector with its initializer stored outside the package.
ESCAPING_PROJECTOR = projector_graph(
    {"location": "../projector.onnx.data", "offset": "0", "length": "16"}
)
assert onnx.load_from_string(ESCAPING_PROJECTOR).graph.initializer[0].external_data

IMAGE_TRANSFORMS = ("preprocessing", "image", "transforms")
AUDIO_TRANSFORMS = ("preprocessing", "audio", "transforms")
ORT_WEIGHTS = {
    "location": "adapters/red/adapter.onnx_adapter",
    "loader_capability": "onnxruntime.lora-adapter@1",
    "scale_encoding": "baked",
    "format": "ort_genai",
}
# An input no step reads (so only its own contract is checked), of a dtype the format names
# but this runtime cannot materialise.
FLOAT8_INPUT = {
    "contract": {"dtype": "float8_e4m3", "rank": 1, "shape": ["batch"],
                 "batch_layout": {"kind": "request_aligned", "axis": 0}},
    "role": {"kind": "opaque"},
    "source": {"kind": "application", "name": "extra"},
}  # fmt: skip

MUTATIONS = (
    # ---------------------------------------------------------------- H72 derived capabilities
    # a parameter-overlay component alone (no adapters section) uses parameter_adapters; its
    # overlay then targets nothing the (absent) target manifest lists (C22)
    Mutation("H72", "lora",
             (Delete(("adapters",)),
              Set(CAPS, ["workflow_ssa", "typed_emit", "heterogeneous_adapter_batching"])),
             "pipeline.workflow.manifest.capabilities",
             "parameter overlay without adapters, parameter_adapters not in the manifest",
             also=("C22",)),
    # ... and its adapter_* input roles use heterogeneous_adapter_batching
    Mutation("H72", "lora",
             (Delete(("adapters",)), Set(CAPS, ["workflow_ssa", "typed_emit", "parameter_adapters"])),
             "pipeline.workflow.manifest.capabilities",
             "adapter input roles without adapters, heterogeneous batching not in the manifest",
             also=("C22",)),
    Mutation("H72", "kv_decoder", (Set(CAPS, _without(KV_CAPS, "serving_service_contract")),),
             "pipeline.workflow.manifest.capabilities", "serving section not in the manifest"),
    Mutation("H72", "kv_decoder", (Set(CAPS, _without(KV_CAPS, "session_state_lease")),),
             "pipeline.workflow.manifest.capabilities", "session cell not in the manifest"),
    Mutation("H72", "kv_decoder", (Set(CAPS, _without(KV_CAPS, "loop_induction_values")),),
             "pipeline.workflow.manifest.capabilities", "loop iteration not in the manifest"),
    Mutation("H72", "speculative", (Set(CAPS, _without(SPEC_CAPS, "grammar_guidance_adapter")),),
             "pipeline.workflow.manifest.capabilities", "grammar adapter not in the manifest"),
    # ... and so is an adapter's ABI when no component declares a contract of that id (which
    # an adapter with actions needs: C20)
    Mutation("H72", "speculative",
             (Set(CAPS, _without(SPEC_CAPS, "grammar_guidance_adapter")),
              *(Delete((*WF, "components", c, "contract"))
                for c in ("grammar_lookahead", "grammar_commit"))),
             "pipeline.workflow.manifest.capabilities",
             "grammar adapters of no contract not in the manifest", also=("C20",)),
    Mutation("H72", "kv_decoder", (Set(CAPS, _without(KV_CAPS, "typed_emit")),),
             "pipeline.workflow.manifest.capabilities", "emit step not in the manifest"),
    # one mutation per capability the structure derives, each left out of a manifest that
    # lists it (the other derivations above)
    *(Mutation("H72", "kv_decoder", (Set(CAPS, _without(KV_CAPS, cap)),),
               "pipeline.workflow.manifest.capabilities", f"{what} not in the manifest")
      for cap, what in (("workflow_ssa", "a workflow"), ("linear_effects", "loop-carried cells"),
                        ("nested_control_flow", "a loop"), ("emit_valid_length", "valid_length"),
                        ("input_presence", "present_as"),
                        ("bounded_state_recurrence", "a bounded recurrence"))),
    Mutation("H72", "kv_decoder", (Set((*WF, "state", "turn_count", "class"), "advisory"),),
             "pipeline.workflow.manifest.capabilities", "an advisory cell not in the manifest"),
    # an adaptive proposal budget contract uses its capability (this runtime has no executor for
    # it, C80)
    Mutation("H72", "speculative",
             (Set((*WF, "components", "budget"),
                  {"implementation": {"kind": "binding"},
                   "contract": {"id": "onnx-genai.adaptive-proposal-budget", "version": "1"}}),),
             "pipeline.workflow.manifest.capabilities",
             "adaptive proposal budget not in the manifest", also=("C80",)),
    Mutation("H72", "speculative", (Set(CAPS, _without(SPEC_CAPS, "telemetry_adapter")),),
             "pipeline.workflow.manifest.capabilities", "telemetry adapter not in the manifest"),
    Mutation("H72", "branching", (Delete((*CAPS, 2)),),
             "pipeline.workflow.manifest.capabilities", "a branch not in the manifest"),
    Mutation("H72", "branching", (Delete((*CAPS, 1)),),
             "pipeline.workflow.manifest.capabilities", "a branch case that emits not in the manifest"),
    Mutation("H72", "events_and_appends", (Delete((*CAPS, 5)),),
             "pipeline.workflow.manifest.capabilities", "an event emit not in the manifest"),
    Mutation("H72", "lowered_decoder", (Delete((*CAPS, 9)),),
             "pipeline.workflow.manifest.capabilities", "the batch contract not in the manifest"),
    # ---------------------------------------------------------------- H73 unsupported
    Mutation("H73", "kv_decoder", (Set(("required_capabilities",), ["teleportation"]),),
             "required_capabilities[0]", "unknown required capability"),
    Mutation("H73", "kv_decoder", (Set(("required_capabilities",), ["prefix_cache"]),),
             "required_capabilities[0]", "unsupported explicit capability"),
    Mutation("H73", "kv_decoder", (Set(CAPS, [*KV_CAPS, "prefix_cache"]),),
             "pipeline.workflow.manifest.capabilities[10]", "unsupported manifest capability"),
    Mutation("H73", "static_cache", (Set((*CAPS, 5), "vendor.fast_path"),),
             "pipeline.workflow.manifest.capabilities[5]", "unknown manifest capability"),
    # ---------------------------------------------------------------- H74 package files
    Mutation("H74", "kv_decoder", (Set(MODEL_ARTIFACT, "/opt/models/model.onnx"),),
             "pipeline.workflow.components.model.implementation.artifact", "absolute artifact"),
    Mutation("H74", "kv_decoder", (Set(MODEL_ARTIFACT, "/model.onnx"),),
             "pipeline.workflow.components.model.implementation.artifact",
             "absolute artifact naming the package's own file"),
    Mutation("H74", "kv_decoder", (Set(MODEL_ARTIFACT, "policies/../../model.onnx"),),
             "pipeline.workflow.components.model.implementation.artifact", "artifact with .."),
    Mutation("H74", "kv_decoder", (Set(MODEL_ARTIFACT, "policies/../model.onnx"),),
             "pipeline.workflow.components.model.implementation.artifact",
             "artifact with .. resolving inside"),
    Mutation("H74", "kv_decoder", (Set(MODEL_ARTIFACT, "model\x00.onnx"),),
             "pipeline.workflow.components.model.implementation.artifact",
             "artifact path with a NUL character"),
    Mutation("H74", "kv_decoder", (DeleteFile("policies/counter.onnx"),),
             "pipeline.workflow.components.counter.implementation.artifact", "missing artifact"),
    Mutation("H74", "kv_decoder", (Set(MODEL_ARTIFACT, "policies"),),
             "pipeline.workflow.components.model.implementation.artifact", "artifact directory"),
    Mutation("H74", "kv_decoder",
             (Symlink("loop.onnx", "loop.onnx"), Set(MODEL_ARTIFACT, "loop.onnx")),
             "pipeline.workflow.components.model.implementation.artifact",
             "artifact a symlink to itself"),
    Mutation("H74", "kv_decoder", (Symlink("model.onnx", "{outside}"),),
             "pipeline.workflow.components.model.implementation.artifact", "escaping symlink"),
    Mutation("H74", "kv_decoder",
             (Set((*WF, "inputs", "package.vocab"),
                  {"contract": {"dtype": "uint8", "rank": 1, "shape": ["bytes"]},
                   "role": {"kind": "opaque"},
                   "source": {"kind": "artifact", "path": "tables/vocab.bin"}, "required": True}),),
             'pipeline.workflow.inputs["package.vocab"].source.path',
             "missing file of an artifact-sourced input"),
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
    Mutation("H74", "kv_decoder", (Symlink("inference_metadata.yaml", "{outside}"),),
             "<document>", "metadata file a symlink out of the package"),
    Mutation("H74", "model_io_decoder", (Symlink("inference_metadata.yaml", "{outside}"),),
             "<document>", "model.io metadata file a symlink out of the package"),
    Mutation("H74", "kv_decoder",
             (Delete(("pipeline",)), Delete(("generation",)), Delete(("profiles",))),
             "pipeline", "no pipeline"),
    Mutation("H74", "lora", (Delete(("pipeline",)),), "pipeline", "adapters without a pipeline"),
    # ---------------------------------------------------------------- H93 unsupported features
    Mutation("H93", "media", (Insert(IMAGE_TRANSFORMS, 3, {"op": "patchify", "patch_size": 2,
                                                           "outputs": ["patches"]}),),
             "preprocessing.image.transforms[3].op", "image operation not implemented"),
    Mutation("H93", "media", (Set((*IMAGE_TRANSFORMS, 1, "mode"), "pad"),),
             "preprocessing.image.transforms[1].op", "resize mode other than stretch"),
    Mutation("H93", "media", (Set((*IMAGE_TRANSFORMS, 2, "mean"), [0.5, 0.5, 0.5]),),
             "preprocessing.image.transforms[2].op", "parameter the operation does not take"),
    Mutation("H93", "media", (Delete((*IMAGE_TRANSFORMS, 2, "scale")),),
             "preprocessing.image.transforms[2].op", "rescale without scale"),
    Mutation("H93", "media", (Set((*IMAGE_TRANSFORMS, 1, "interpolation"), "lanczos"),),
             "preprocessing.image.transforms[1].op", "resize interpolation lanczos"),
    Mutation("H93", "media", (Delete((*IMAGE_TRANSFORMS, 1, "size")),),
             "preprocessing.image.transforms[1].op", "resize without size"),
    Mutation("H93", "media",
             (Insert(IMAGE_TRANSFORMS, 3, {"op": "normalize", "mean": [0.5, 0.5, 0.5]}),),
             "preprocessing.image.transforms[3].op", "normalize without std"),
    Mutation("H93", "media",
             (Insert(IMAGE_TRANSFORMS, 3, {"op": "normalize", "std": [0.5, 0.5, 0.5]}),),
             "preprocessing.image.transforms[3].op", "normalize without mean"),
    Mutation("H93", "media", (Set((*IMAGE_TRANSFORMS, 0, "scale"), 1.0),),
             "preprocessing.image.transforms[0].op", "decode_rgb given a parameter"),
    Mutation("H93", "audio_program", (Delete((*AUDIO_TRANSFORMS, 2, "sample_rate")),),
             "preprocessing.audio.transforms[2].op", "resample without sample_rate"),
    Mutation("H93", "audio_program", (Delete((*AUDIO_TRANSFORMS, 4, "target_length")),),
             "preprocessing.audio.transforms[4].op", "pad without target_length"),
    Mutation("H93", "audio_program", (Delete((*AUDIO_TRANSFORMS, 5, "target_length")),),
             "preprocessing.audio.transforms[5].op", "trim without target_length"),
    Mutation("H93", "audio_program", (Set((*AUDIO_TRANSFORMS, 4, "mode"), "reflect"),),
             "preprocessing.audio.transforms[4].op", "pad mode reflect"),
    Mutation("H93", "audio_program", (Set((*AUDIO_TRANSFORMS, 1, "sample_rate"), 8000),),
             "preprocessing.audio.transforms[1].op", "downmix given a sample rate"),
    Mutation("H93", "audio_program",
             (Insert(AUDIO_TRANSFORMS, 7, {"op": "normalize", "mean": [0.0], "std": [1.0]}),),
             "preprocessing.audio.transforms[7].op", "audio operation of the image vocabulary"),
    Mutation("H93", "audio_program",
             (Insert(AUDIO_TRANSFORMS, 8, {"op": "log_mel_spectrogram", "n_fft": 4}),),
             "preprocessing.audio.transforms[8].op", "audio operation not implemented"),
    Mutation("H93", "kv_decoder", (Set(("generation", "defaults", "num_beams"), 4),),
             "generation.defaults.num_beams", "beam search default"),
    Mutation("H93", "kv_decoder", (Set(("generation", "defaults", "repetition_penalty"), 1.2),),
             "generation.defaults.repetition_penalty", "repetition penalty default"),
    Mutation("H93", "kv_decoder",
             (Set(("profiles", "embed"), {"kind": "embedding", "version": "1",
                                          "outputs": {"embeddings": "tokens"},
                                          "pooling": {"kind": "mean", "axis": 1}}),),
             "profiles.embed.pooling", "profile pooling"),
    Mutation("H93", "kv_decoder",
             (Set(("profiles", "chat", "kind"), "transcription"),
              Set(("profiles", "chat", "decoding"),
                  {"kind": "greedy", "time_axis": 1, "class_axis": 2})),
             "profiles.chat.decoding", "profile decoding"),
    Mutation("H93", "lora", (Set(("adapters", "portable_fallback"), False),),
             "adapters.portable_fallback", "adapters without the portable fallback"),
    # upstream's portable_fallback defaults to false
    Mutation("H93", "lora", (Delete(("adapters", "portable_fallback")),),
             "adapters.portable_fallback", "adapters leaving the portable fallback unsaid"),
    Mutation("H93", "lora",
             (Set(("adapters", "artifacts", "red", "weights"), [ORT_WEIGHTS]),
              WriteFile("adapters/red/adapter.onnx_adapter", b"ort lora adapter bytes")),
             "adapters.artifacts.red.weights", "adapter weights only in ort_genai"),
    Mutation("H93", "kv_decoder",
             (Set((*WF, "serving", "state_service", "groups", "kv_cache", "aliasing"),
                  "required"),),
             "pipeline.workflow.serving.state_service.groups.kv_cache.aliasing",
             "state that only works aliased"),
    Mutation("H93", "kv_decoder", (Set(("hardware_requirements", "required_dtypes", 1), "int4"),),
             "hardware_requirements.required_dtypes[1]", "required dtype it cannot compute"),
    Mutation("H93", "kv_decoder",
             (Set(("hardware_requirements", "required_dtypes", 1), "string"),),
             "hardware_requirements.required_dtypes[1]", "required string dtype"),
    Mutation("H93", "kv_decoder", (Set((*WF, "inputs", "request.extra"), FLOAT8_INPUT),),
             'pipeline.workflow.inputs["request.extra"].contract.dtype',
             "dtype without an array type"),
    # ---------------------------------------------------------------- H91 bare decoders
    Mutation("H91", "model_io_decoder", (DeleteFile("model.onnx"),), "model.io",
             "no ONNX graph in the folder"),
    Mutation("H91", "model_io_decoder", (WriteFile("spare.onnx", b""),),
             "model.io", "a second ONNX graph in the folder"),
    Mutation("H91", "model_io_decoder", (Set(("model", "io", "logits_output"), "scores"),),
             "model.io.logits_output", "logits output the graph lacks"),
    Mutation("H91", "model_io_decoder", (Delete(("model", "io", "kv_outputs", 1)),),
             "model.io.kv_outputs", "unpaired KV names"),
    Mutation("H91", "model_io_decoder", (Set(("model", "io", "position_ids_input"), "pos"),),
             "model.io.position_ids_input", "position input the graph lacks"),
    Mutation("H91", "model_io_decoder", (Set(("model", "vocab_size"), 128),),
             "model.vocab_size", "vocab_size unlike the logits"),
    Mutation("H91", "genai_decoder",
             (EditJson("genai_config.json", (Set(("model", "vocab_size"), 128),)),),
             '["genai_config.json"].model.vocab_size', "genai vocab_size unlike the logits"),
    Mutation("H91", "genai_decoder",
             (EditJson("genai_config.json", (Delete(("model", "vocab_size")),)),
              WriteFile("model.onnx", kv_decoder_graph({"key": HEAD_MAJOR, "value": HEAD_MAJOR},
                                                       vocab="vocab"))),
             '["genai_config.json"].model.vocab_size',
             "genai vocab_size missing and the logits' width symbolic"),
    Mutation("H91", "genai_decoder",
             (EditJson("genai_config.json", (Set(("engine",), {"dynamic_batching": True}),)),),
             '["genai_config.json"].engine', "unknown genai_config section"),
    Mutation("H91", "genai_decoder",
             (EditJson("genai_config.json", (Set(("model", "encoder"), {"filename": "e.onnx"}),)),),
             '["genai_config.json"].model.encoder', "genai model with an encoder"),
    Mutation("H91", "genai_decoder", (WriteFile("model.onnx", split_axis_decoder()),),
             '["genai_config.json"].model.decoder.inputs.past_key_names',
             "KV inputs on two sequence axes"),
    # genai_config fields lowering reads: each of a kind it can read, each name in the graph
    _genai(Set(("model", "type"), "t5"),
           "model.type", "genai model type not decoder-only"),
    _genai(Set(("model", "context_length"), 0),
           "model.context_length", "genai context_length 0"),
    _genai(Set(("model", "vocab_size"), True),
           "model.vocab_size", "genai vocab_size a boolean"),
    _genai(Set(("model", "pad_token_id"), -1),
           "model.pad_token_id", "genai negative pad id"),
    _genai(Set(("model", "pad_token_id"), 96),
           "model.pad_token_id", "genai pad id past the vocabulary"),
    _genai(Set(("model", "eos_token_id"), 96),
           "model.eos_token_id", "genai end id past the vocabulary"),
    _genai(Set(("model", "eos_token_id"), -1),
           "model.eos_token_id", "genai negative end id"),
    _genai(Set(("model", "eos_token_id"), 9223372036854775808),
           "model.eos_token_id", "genai end id beyond int64"),
    _genai(Set(("model", "eos_token_id"), [2, "x"]),
           "model.eos_token_id", "genai end id list holding a string"),
    _genai(Set(("model", "eos_token_id"), [2, 96]),
           "model.eos_token_id", "genai end id list past the vocabulary"),
    _genai(Set(("model", "decoder"), "model.onnx"),
           "model.decoder", "genai decoder not an object"),
    _genai(Set(("model", "decoder", "num_hidden_layers"), 4097),
           "model.decoder.num_hidden_layers", "genai layer count above 4096"),
    _genai(Set(("model", "decoder", "num_hidden_layers"), 2),
           "model.decoder.inputs.past_key_names", "genai layer count above the graph's"),
    _genai(Set(("model", "decoder", "num_hidden_layers"), "two"),
           "model.decoder.num_hidden_layers", "genai layer count a word"),
    _genai(Set(("model", "decoder", "inputs", "past_key_names"), 7),
           "model.decoder.inputs.past_key_names", "genai past key name template a number"),
    _genai(Set(("model", "decoder", "head_size"), 8.5),
           "model.decoder.head_size", "genai fractional head_size"),
    _genai(Delete(("model", "decoder", "inputs")),
           "model.decoder.inputs", "genai decoder without its inputs section"),
    _genai(Set(("model", "decoder", "head_size"), -1),
           "model.decoder.head_size", "genai negative head_size"),
    _genai(Set(("model", "context_length"), "forty-eight tokens, give or take a few dozen"),
           "model.context_length", "genai context_length a long string"),
    _genai(Set(("model", "decoder", "inputs", "attention_mask"), ""),
           "model.decoder.inputs.attention_mask", "genai empty attention mask name"),
    _genai(Set(("model", "decoder", "filename"), ""),
           "model.decoder.filename", "genai empty decoder filename"),
    _genai(Set(("model", "decoder", "session_options", "gpu_mem_limit"), 1),
           "model.decoder.session_options.gpu_mem_limit", "genai unknown session option"),
    _genai(Set(("model", "decoder", "sliding_window"), {"window_size": 16}),
           "model.decoder.sliding_window", "genai unknown decoder key"),
    _genai(Set(("model", "decoder", "inputs", "token_type_ids"), "token_type_ids"),
           "model.decoder.inputs.token_type_ids", "genai unknown decoder input"),
    _genai(Set(("model", "decoder", "outputs", "hidden_states"), "hidden"),
           "model.decoder.outputs.hidden_states", "genai unknown decoder output"),
    _genai(Set(("model", "decoder", "inputs", "input_ids"), ""),
           "model.decoder.inputs.input_ids", "genai empty input name"),
    _genai(Set(("model", "decoder", "inputs", "input_ids"), "ids"),
           "model.decoder.inputs.input_ids", "genai token input the graph lacks"),
    _genai(Set(("model", "decoder", "outputs", "logits"), "scores"),
           "model.decoder.outputs.logits", "genai logits output the graph lacks"),
    _genai(Set(("model", "decoder", "inputs", "past_key_names"), "past.%d.key"),
           "model.decoder.inputs.past_key_names", "genai KV inputs the graph lacks"),
    _genai(Set(("model", "decoder", "outputs", "present_value_names"), "present.%d.v"),
           "model.decoder.outputs.present_key_names", "genai KV outputs the graph lacks"),
    _genai(Set(("model", "decoder", "inputs", "attention_mask"), "mask"),
           "model.decoder.inputs", "genai required attention mask fed under another name"),
    _genai(Set(("search", "num_beams"), 2),
           "search.num_beams", "genai beam search"),
    _genai(Set(("search", "repetition_penalty"), 1.2),
           "search.repetition_penalty", "genai repetition penalty"),
    _genai(Set(("search", "min_length"), 1),
           "search.min_length", "genai min_length"),
    _genai(Set(("search", "no_repeat_ngram_size"), 3),
           "search.no_repeat_ngram_size", "genai no_repeat_ngram_size"),
    _genai(Set(("search", "diversity_penalty"), 0.5),
           "search.diversity_penalty", "genai diversity_penalty"),
    _genai(Set(("search", "guidance_scale"), 1.0),
           "search.guidance_scale", "genai unknown search option"),
    _genai(Set(("search", "do_sample"), "yes"),
           "search.do_sample", "genai do_sample a string"),
    _genai(Set(("search", "temperature"), "hot"),
           "search.temperature", "genai temperature a string"),
    _genai(Set(("search", "max_length"), -1),
           "search.max_length", "genai negative max_length"),
    _genai(Set(("search", "max_length"), 2.5),
           "search.max_length", "genai fractional max_length"),
    _genai(Set(("model", "pad_token_id"), 1.5),
           "model.pad_token_id", "genai fractional pad id"),
    _genai(Set(("search",), []),
           "search", "genai search not an object"),
    _genai(Set(("model", "decoder", "session_options"), "fast"),
           "model.decoder.session_options", "genai session_options not an object"),
    _genai(Set(("model", "decoder", "inputs"), ["input_ids"]),
           "model.decoder.inputs", "genai decoder inputs not an object"),
    _genai(Set(("model", "bos_token_id"), '<s>'),
           "model.bos_token_id", "genai bos id a string"),
    _genai(Set(("model", "eos_token_id"), [2, True]),
           "model.eos_token_id", "genai end id list holding a boolean"),
    _genai(Set(("model", "decoder", "num_hidden_layers"), True),
           "model.decoder.num_hidden_layers", "genai layer count a boolean"),
    _genai(Set(("model", "decoder", "num_key_value_heads"), -1),
           "model.decoder.num_key_value_heads", "genai negative KV head count"),
    _genai(Set(("search", "top_k"), -1),
           "search.top_k", "genai negative top_k"),
    _genai(Set(("search", "random_seed"), 1.5),
           "search.random_seed", "genai fractional random_seed"),
    _genai(Set(("search", "random_seed"), 2**63),
           "search.random_seed", "genai random_seed past int64"),
    _genai(Set(("search", "early_stopping"), "no"),
           "search.early_stopping", "genai early_stopping a string"),
    _genai(Set(("search", "top_p"), "high"),
           "search.top_p", "genai top_p a string"),
    _genai(Delete(("model", "decoder", "num_hidden_layers")),
           "model.decoder.num_hidden_layers", "genai layer count absent"),
    # model.io names checked against the graph, the end and pad ids against the vocabulary
    Mutation("H91", "model_io_decoder", (Set(("model", "io", "token_input"), "ids"),),
             "model.io.token_input", "token input the graph lacks"),
    Mutation("H91", "model_io_decoder", (Set(("model", "io", "attention_mask_input"), "mask"),),
             "model.io.attention_mask_input", "attention mask input the graph lacks"),
    Mutation("H91", "model_io_decoder", (Delete(("model", "io", "attention_mask_input")),),
             "model.io", "graph's attention mask not declared"),
    Mutation("H91", "model_io_decoder", (Delete(("model", "io", "position_ids_input")),),
             "model.io", "graph's position input not declared"),
    Mutation("H91", "model_io_decoder", (Set(("model", "io", "hidden_output"), "hidden"),),
             "model.io.hidden_output", "hidden output the graph lacks"),
    Mutation("H91", "model_io_decoder", (Set(("model", "io", "kv_inputs", 0), "past.0.key"),),
             "model.io.kv_inputs", "KV input the graph lacks"),
    Mutation("H91", "model_io_decoder", (Set(("model", "io", "kv_outputs", 1), "present.0.v"),),
             "model.io.kv_outputs", "KV output the graph lacks"),
    Mutation("H91", "model_io_decoder",
             (Set(("package", "tokenizer", "special_tokens", "eos", "id"), 96),),
             "package.tokenizer.special_tokens.eos.id", "end id past the vocabulary"),
    Mutation("H91", "model_io_decoder",
             (Set(("package", "tokenizer", "special_tokens", "pad", "id"), 96),),
             "package.tokenizer.special_tokens.pad.id", "pad id past the vocabulary"),
    Mutation("H91", "genai_decoder",
             (WriteFile("model.onnx",
                        kv_decoder_graph({"key": BATCH_SECOND, "value": BATCH_SECOND})),),
             '["genai_config.json"].model.decoder.inputs.past_key_names',
             "KV inputs with the batch off axis 0"),
    Mutation("H91", "genai_decoder",
             (WriteFile("model.onnx", kv_decoder_graph(
                 {"key": ["batch", "heads", "past_sequence", 8], "value": HEAD_MAJOR})),),
             '["genai_config.json"].model.decoder.inputs.past_key_names',
             "KV input with a symbolic head count"),
    # a decoder graph outside the package, through a symlink: read, it would load
    Mutation("H91", "genai_decoder",
             (MoveFile("model.onnx", "../model.onnx"), Symlink("model.onnx", "../model.onnx")),
             '["genai_config.json"].model.decoder.filename', "decoder graph a symlink out"),
    Mutation("H91", "model_io_decoder",
             (MoveFile("model.onnx", "../model.onnx"), Symlink("model.onnx", "../model.onnx")),
             "model.io", "model.io decoder graph a symlink out"),
    Mutation("H91", "genai_decoder", (WriteFile("model.onnx", b"not an ONNX graph"),),
             '["genai_config.json"].model.decoder.filename', "unreadable decoder graph"),
    Mutation("H91", "genai_decoder",
             (WriteFile("model.onnx", kv_decoder_graph(
                 {"key": ["batch", 4, 16, 8], "value": HEAD_MAJOR})),),
             '["genai_config.json"].model.decoder.inputs.past_key_names',
             "KV input with no symbolic sequence axis"),
    Mutation("H91", "genai_decoder",
             (WriteFile("model.onnx", kv_decoder_graph({"key": HEAD_MAJOR, "value": HEAD_MAJOR},
                                                       TensorProto.FLOAT16)),),
             '["genai_config.json"].model.decoder.inputs.past_key_names',
             "KV inputs of two dtypes"),
    Mutation("H91", "model_io_decoder",
             (WriteFile("model.onnx",
                        kv_decoder_graph({"key": SEQUENCE_MAJOR, "value": SEQUENCE_MAJOR})),),
             "model.io.kv_inputs", "KV sequence-major where model.io means head-major"),
    Mutation("H91", "model_io_decoder",
             (WriteFile("model.onnx", kv_decoder_graph({"key": HEAD_MAJOR, "value": HEAD_MAJOR},
                                                       past_names={"key": "lengths"})),
              Set(("model", "io", "kv_inputs"), ["lengths", "past_key_values.0.value"]),
              Set(("model", "io", "kv_outputs"), ["present.0.key", "present.0.value"])),
             "model.io.kv_inputs", "KV input named like a port of the decode contract"),
    # the text codec is the tokenizer.json the document names, not one at the package's root
    Mutation("C83", "kv_decoder",
             (Set(("package", "tokenizer", "artifacts"), [{"location": "text/tokenizer.json"}]),
              WriteFile("text/tokenizer.json", b"not a tokenizer")),
             "package.tokenizer.artifacts[0].location",
             "broken tokenizer.json named in a folder, a sound one at the root"),
    # search is optional: a folder without it is read on, to its broken tokenizer
    Mutation("C83", "genai_decoder",
             (EditJson("genai_config.json", (Delete(("search",)),)),
              WriteFile("tokenizer.json", b"not a tokenizer")),
             "<document>", "genai folder without search and a broken tokenizer"),
    # ---------------------------------------------------------------- H93 unimplemented model.io
    Mutation("H93", "model_io_decoder",
             (Set(("model", "io", "inputs_embeds_input"), "inputs_embeds"),),
             "model.io.inputs_embeds_input", "embeddings as a sequence input"),
    Mutation("H93", "model_io_decoder", (Delete(("model", "io", "logits_output")),),
             "model.io.logits_output", "logits output not declared"),
    Mutation("H93", "model_io_decoder", (Set(("model", "io", "kv_ownership"), "shared"),),
             "model.io.kv_ownership", "KV owned by another graph"),
    Mutation("H93", "model_io_decoder",
             (Set(("model", "io", "kv_layout"), "seq_major_bsnh"),),
             "model.io.kv_layout", "sequence-major KV layout"),
    Mutation("H93", "model_io_decoder",
             (Set(("model", "io", "state_pairs"), [{"input": "state", "output": "next"}]),),
             "model.io.state_pairs", "recurrent state pairs"),
    Mutation("H93", "model_io_decoder", (Delete(("model", "io", "token_input")),),
             "model.io.token_input", "token input not declared"),
    Mutation("H93", "model_io_decoder",
             (Set(("model", "io", "sequence_source"), "inputs_embeds"),),
             "model.io.sequence_source", "a decoder driven by embeddings"),
    Mutation("H93", "model_io_decoder",
             (Set(("model", "io", "sequence_source"), "inputs_embeds"),
              Delete(("model", "io", "token_input")), Delete(("model", "io", "logits_output"))),
             "model.io.logits_output",
             "a decoder driven by embeddings (no token input needed) that names no logits"),
    Mutation("H93", "model_io_decoder",
             (Set(("model", "io", "encoder_hidden_states_input"), "encoder_states"),),
             "model.io.encoder_hidden_states_input", "encoder hidden states"),
    Mutation("H93", "model_io_decoder", (Set(("model", "io", "audio_features_input"), "features"),),
             "model.io.audio_features_input", "audio features"),
    Mutation("H93", "model_io_decoder", (Set(("model", "io", "cross_kv_inputs"), ["cross.0.key"]),),
             "model.io.cross_kv_inputs", "cross-attention KV inputs"),
    Mutation("H93", "model_io_decoder",
             (Set(("model", "io", "cross_kv_outputs"), ["cross.0.key"]),),
             "model.io.cross_kv_outputs", "cross-attention KV outputs"),
    Mutation("H93", "model_io_decoder", (Set(("model", "io", "kv_ownership"), "shared"),
                                         Set(("model", "io", "sequence_source"), "token_ids")),
             "model.io.kv_ownership", "KV owned by another graph beside token ids"),
    # the KV group of the lowered workflow carries model.io.aliasing (refused where it names it)
    Mutation("H93", "model_io_decoder", (Set(("model", "io", "aliasing"), "required"),),
             "pipeline.workflow.serving.state_service.groups.decoder_cache.aliasing",
             "KV that only works aliased"),
    Mutation("H93", "model_io_decoder",
             (Set(("profiles",), {"chat": {"kind": "generation", "version": "1",
                                           "outputs": {"tokens": "tokens"}}}),),
             "profiles", "profiles on a bare model.io decoder"),
)  # fmt: skip


# Valid edits: what lowering and the preprocessing programs accept at the edge of what they
# refuse.
VARIANTS = (
    Variant("model_io_decoder", (Delete(("package", "tokenizer", "special_tokens", "eos")),),
            "model.io decoder without an end id (only the token bound ends a row)"),
    Variant("genai_decoder",
            (WriteFile("model.onnx", kv_decoder_graph({})),
             EditJson("genai_config.json", (Set(("model", "decoder", "num_hidden_layers"), 0),))),
            "genai decoder of no layers (a graph without KV)"),
    Variant("genai_decoder",
            (WriteFile("model.onnx", kv_decoder_graph({"key": HEAD_MAJOR, "value": HEAD_MAJOR},
                                                      TensorProto.FLOAT16,
                                                      key_type=TensorProto.FLOAT16)),),
            "genai decoder whose KV is float16"),
    # the search options this runtime cannot honour are accepted at their neutral values
    Variant("genai_decoder",
            (EditJson("genai_config.json",
                      (Set(("search", "no_repeat_ngram_size"), 0),
                       Set(("search", "diversity_penalty"), 0.0),
                       Set(("search", "length_penalty"), 1.0))),),
            "genai search options this runtime cannot honour at their neutral values"),
    # the text codec is the first artifact named tokenizer.json: the others are files as any
    Variant("kv_decoder",
            (Set(("package", "tokenizer", "artifacts"),
                 [{"location": "tokenizer_notes.txt"}, {"location": "tokenizer.json"},
                  {"location": "legacy/tokenizer.json"}]),
             WriteFile("tokenizer_notes.txt", b"how the vocabulary was built\n"),
             WriteFile("legacy/tokenizer.json", b"not read\n")),
            "two files named tokenizer.json after another tokenizer file"),
    Variant("media", (Set((*IMAGE_TRANSFORMS, 1, "interpolation"), "nearest"),),
            "resize interpolation nearest"),
    Variant("media", (Set((*IMAGE_TRANSFORMS, 1, "interpolation"), "bicubic"),),
            "resize interpolation bicubic"),
    Variant("media", (Delete((*IMAGE_TRANSFORMS, 1, "interpolation")),),
            "resize without interpolation"),
    Variant("media", (Set((*IMAGE_TRANSFORMS, 1, "mode"), "stretch"),), "resize mode stretch"),
    Variant("media", (Insert(IMAGE_TRANSFORMS, 3, {"op": "normalize", "mean": [0.5, 0.5, 0.5],
                                                    "std": [0.5, 0.5, 0.5]}),),
            "normalize with mean and std"),
    Variant("model_io_decoder", (Set(("model", "io", "kv_layout"), "head_major_bnsh"),),
            "kv_layout head_major_bnsh declared"),
    Variant("model_io_decoder", (Set(("model", "io", "sequence_source"), "token_ids"),),
            "sequence_source token_ids declared"),
    Variant("model_io_decoder", (Set(("model", "io", "kv_ownership"), "owned"),),
            "kv_ownership owned declared"),
    Variant("model_io_decoder", (Set(("model", "io", "aliasing"), "permitted"),),
            "aliasing permitted"),
    Variant("model_io_decoder", (Delete(("model", "vocab_size")),),
            "vocabulary size read from the graph's logits"),
    Variant("model_io_decoder",
            (Set(("package", "tokenizer", "special_tokens", "eos", "id"), 95),),
            "end id the last of the vocabulary"),
    Variant("genai_decoder",
            (EditJson("genai_config.json", (Set(("model", "eos_token_id"), [2, 95]),)),),
            "end ids a list ending at the last of the vocabulary"),
    Variant("genai_decoder",
            (EditJson("genai_config.json", (Set(("model", "pad_token_id"), 95),)),),
            "pad id the last of the vocabulary"),
    Variant("genai_decoder", (EditJson("genai_config.json", (Delete(("model", "pad_token_id")),)),),
            "no pad id"),
    Variant("genai_decoder", (EditJson("genai_config.json", (Set(("model", "eos_token_id"), 0),)),),
            "end id 0"),
    # without a context length the lowered max_new_tokens input has a default of its own
    # (on model.io: onnxruntime-genai refuses a genai folder without one, the reference lowers it)
    Variant("model_io_decoder", (Delete(("model", "max_sequence_length")),),
            "no max_sequence_length"),
    Variant("genai_decoder",
            (EditJson("genai_config.json", (Delete(("model", "pad_token_id")),
                                            Set(("model", "eos_token_id"), [95, 2]))),),
            "no pad id and end ids a list"),
    Variant("genai_decoder",
            (EditJson("genai_config.json", (Set(("model", "decoder", "num_key_value_heads"), 0),
                                            Set(("search", "top_k"), 0))),),
            "zero KV heads and top_k declared"),
    Variant("genai_decoder",
            (EditJson("genai_config.json",
                      (Delete(("model", "decoder", "inputs", "attention_mask")),)),),
            "attention mask under its default name"),
    Variant("genai_decoder",
            (EditJson("genai_config.json", (Set(("model", "context_length"), 1),)),),
            "context_length 1"),
    Variant("genai_decoder", (EditJson("genai_config.json", (Delete(("search",)),)),),
            "no search section"),
    Variant("genai_decoder", (WriteFile("model.onnx", decoder_without_positions()),),
            "graph without the position_ids input its config names"),
    # onnxruntime-genai reads random_seed as an int32
    Variant("genai_decoder",
            (EditJson("genai_config.json", (Set(("search", "random_seed"), 2**31 - 1),)),),
            "random seed the largest int32"),
    Variant("genai_decoder",
            (EditJson("genai_config.json", (Set(("search", "random_seed"), -1),
                                            Set(("search", "max_length"), 0))),),
            "random seed -1 and max_length 0"),
    Variant("genai_decoder",
            (EditJson("genai_config.json", (Set(("search", "temperature"), 1),
                                            Set(("search", "length_penalty"), 2.0),
                                            Set(("search", "early_stopping"), False))),),
            "integer temperature and beam-only options"),
)  # fmt: skip
