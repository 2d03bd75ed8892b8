"""Family B, inputs and outputs: contracts, dtypes, layouts, roles, defaults, presence, media.
Mirrors ``reference_runtime/package/rules/inputs.py``."""

from __future__ import annotations

from ..mutations import Delete, Insert, Mutation, Set, Variant

WF = ("pipeline", "workflow")
INP = (*WF, "inputs")
OUT = (*WF, "outputs")
PORTS = (*WF, "components")

_RUNTIME = {"kind": "runtime", "version": "1.0"}
_OPAQUE = {"kind": "opaque"}
_ALIGNED = {"kind": "request_aligned", "axis": 0}
_BIAS = {"dtype": "float32", "rank": 2, "shape": ["batch", 8], "batch_layout": _ALIGNED}
_PROMPT = {
    "contract": {"dtype": "string", "rank": 1, "shape": [1]},
    "role": {**_RUNTIME, "role": "prompt_text"},
    "source": {"kind": "request"},
}
_READ_BIAS = {"kind": "invoke", "component": "bias_logits",
              "inputs": {"logits": "setup.logits", "bias": "request.bias"},
              "outputs": {"biased": "setup.unguarded"}}  # fmt: skip
_SETUP = (*WF, "steps", 0, "setup")
_EXTRA = {
    "contract": {"dtype": "float32", "rank": 1, "shape": [8]},
    "role": _OPAQUE,
    "source": {"kind": "application", "name": "extra"},
    "required": False,
    "present_as": "request.has_bias",
}

# An input no step reads (so only its own contract is checked), of a dtype outside the format.
_UNREAD_FLOAT64 = {
    "contract": {"dtype": "float64", "rank": 1, "shape": ["batch"], "batch_layout": _ALIGNED},
    "role": _OPAQUE,
    "source": {"kind": "application", "name": "extra"},
}
# Ports of the text-assembly adapter (never invoked, so only the contracts are checked).
_COMPLEX_PORTS = {
    "inputs": {"prompt": {"dtype": "complex64", "rank": 1, "shape": ["tokens"]}},
    "outputs": {"tokens": {"dtype": "int64", "rank": 1, "shape": ["tokens"]}},
}

MUTATIONS = (
    # B07: shape length differs from rank
    Mutation("B07", "kv_decoder", (Set((*INP, "request.seed", "contract", "shape"), ["batch", 1]),),
             'pipeline.workflow.inputs["request.seed"].contract.shape', "input shape longer than rank"),
    Mutation("B07", "kv_decoder",
             (Set((*PORTS, "counter", "ports", "outputs", "next", "shape"), [1]),),
             "pipeline.workflow.components.counter.ports.outputs.next.shape",
             "port shape on a rank-0 contract"),
    Mutation("B07", "static_cache", (Set((*OUT, "logits", "contract", "shape"), ["batch", 8]),),
             "pipeline.workflow.outputs.logits.contract.shape", "output shape shorter than rank"),
    Mutation("B07", "kv_decoder",
             (Set((*INP, "request.seed", "contract", "batch_layout"),
                  {"kind": "request_aligned", "axis": 1}),),
             'pipeline.workflow.inputs["request.seed"].contract.batch_layout.axis',
             "request axis beyond rank"),
    # B08: dtype outside the vocabulary, or string
    Mutation("B08", "kv_decoder", (Set((*INP, "request.extra"), _UNREAD_FLOAT64),),
             'pipeline.workflow.inputs["request.extra"].contract.dtype', "dtype outside vocabulary"),
    Mutation("B08", "kv_decoder", (Set((*INP, "request.prompt"), _PROMPT),),
             'pipeline.workflow.inputs["request.prompt"].contract.dtype', "string input"),
    Mutation("B08", "media", (Set((*PORTS, "assembler", "ports"), _COMPLEX_PORTS),),
             "pipeline.workflow.components.assembler.ports.inputs.prompt.dtype",
             "port dtype outside vocabulary"),
    # B09: request_expanded factor below 1
    Mutation("B09", "kv_decoder",
             (Set((*INP, "request.seed", "contract", "batch_layout"),
                  {"kind": "request_expanded", "axis": 0, "factor": 0}),),
             'pipeline.workflow.inputs["request.seed"].contract.batch_layout.factor',
             "expanded input with factor 0"),
    Mutation("B09", "static_cache",
             (Set((*OUT, "logits", "contract", "batch_layout"),
                  {"kind": "request_expanded", "axis": 0, "factor": -2}),),
             "pipeline.workflow.outputs.logits.contract.batch_layout.factor",
             "expanded output with negative factor"),
    # B10: request-sourced input with an opaque role
    Mutation("B10", "kv_decoder", (Set((*INP, "request.seed", "role"), _OPAQUE),),
             'pipeline.workflow.inputs["request.seed"].role', "opaque seed from the request"),
    Mutation("B10", "static_cache",
             (Set((*INP, "request.write_indices", "source"), {"kind": "request"}),),
             'pipeline.workflow.inputs["request.write_indices"].role',
             "opaque application input switched to request"),
    # B11: optional input with neither default nor present_as
    Mutation("B11", "kv_decoder", (Delete((*INP, "request.seed", "default")),),
             'pipeline.workflow.inputs["request.seed"].required', "optional seed without default"),
    Mutation("B11", "static_cache", (Set((*INP, "request.write_indices", "required"), False),),
             'pipeline.workflow.inputs["request.write_indices"].required',
             "optional application input without fallback"),
    # B12: present_as misused
    Mutation("B12", "kv_decoder",
             (Set((*INP, "package.vocab"),
                  {"contract": {"dtype": "uint8", "rank": 1, "shape": ["bytes"]}, "role": _OPAQUE,
                   "source": {"kind": "artifact", "path": "tokenizer.json"}, "required": False,
                   "present_as": "package.has_vocab"}),),
             'pipeline.workflow.inputs["package.vocab"].present_as', "present_as on an artifact source"),
    Mutation("B12", "kv_decoder", (Delete((*INP, "request.bias", "required")),),
             'pipeline.workflow.inputs["request.bias"].present_as', "present_as on a required input"),
    Mutation("B12", "kv_decoder", (Set((*INP, "request.bias", "default"), 0.0),),
             'pipeline.workflow.inputs["request.bias"].present_as', "present_as with a default"),
    Mutation("B12", "kv_decoder", (Set((*INP, "request.bias", "source"), {"kind": "literal"}),),
             'pipeline.workflow.inputs["request.bias"].present_as', "present_as on a literal"),
    Mutation("B12", "kv_decoder",
             (Set((*INP, "request.bias", "source"), {"kind": "request"}),
              Set((*INP, "request.bias", "role"), {**_RUNTIME, "role": "guidance_scale"})),
             'pipeline.workflow.inputs["request.bias"].present_as',
             "present_as on a guidance_scale request input"),
    Mutation("B12", "kv_decoder",
             (Set((*INP, "request.bias", "source"), {"kind": "request"}),
              Set((*INP, "request.bias", "role"), {"kind": "opaque"})),
             'pipeline.workflow.inputs["request.bias"].present_as',
             "present_as on an opaque request input", also=("B10",)),
    Mutation("B12", "kv_decoder",
             (Set((*INP, "request.bias", "present_as"), "package.once"),
              Set((*_SETUP, 1, "predicate"), "package.once")),
             'pipeline.workflow.inputs["request.bias"].present_as',
             "present_as clashing with an input"),
    Mutation("B12", "kv_decoder", (Set((*INP, "request.extra"), _EXTRA),),
             'pipeline.workflow.inputs["request.extra"].present_as',
             "present_as clashing with another present_as"),
    Mutation("B12", "kv_decoder", (Set((*INP, "request.bias", "present_as"), ""),),
             'pipeline.workflow.inputs["request.bias"].present_as', "empty present_as"),
    # B13: optional input read outside its presence branch
    Mutation("B13", "kv_decoder", (Insert(_SETUP, 1, _READ_BIAS),),
             "pipeline.workflow.steps[0].setup[1].inputs.bias", "read before the branch"),
    Mutation("B13", "kv_decoder", (Set((*_SETUP, 1, "predicate"), "package.once"),),
             "pipeline.workflow.steps[0].setup[1].cases.true.inputs.bias",
             "branch on another flag"),
    Mutation("B13", "kv_decoder",
             (Set((*_SETUP, 1, "cases", "false"),
                  {**_READ_BIAS, "outputs": {"biased": "setup.plain"}}),),
             "pipeline.workflow.steps[0].setup[1].cases.false.inputs.bias",
             "read in the false case"),
    # B14: bad media block
    Mutation("B14", "media",
             (Set((*OUT, "image", "media"),
                  {"container": "wav", "encoding": "pcm_s16_le", "sample_rate_hz": 16000,
                   "channels": 1}),),
             "pipeline.workflow.outputs.image.media", "media on an image output"),
    Mutation("B14", "media", (Set((*OUT, "audio", "media", "sample_rate_hz"), 0),),
             "pipeline.workflow.outputs.audio.media.sample_rate_hz", "zero sample rate"),
    Mutation("B14", "media", (Delete((*OUT, "audio", "media", "channels")),),
             "pipeline.workflow.outputs.audio.media", "missing channel count"),
    Mutation("B14", "media", (Delete((*OUT, "audio", "media", "sample_rate_hz")),),
             "pipeline.workflow.outputs.audio.media", "missing sample rate"),
    Mutation("B14", "media", (Set((*OUT, "audio", "media", "channels"), 0),),
             "pipeline.workflow.outputs.audio.media.channels", "zero channels"),
    Mutation("B14", "media", (Set((*OUT, "audio", "media", "source_sample_rate_hz"), 0),),
             "pipeline.workflow.outputs.audio.media.source_sample_rate_hz",
             "zero source sample rate"),
    Mutation("B14", "media", (Set((*OUT, "audio", "stage"), "post_adapter"),),
             "pipeline.workflow.outputs.audio.contract.dtype",
             "post-adapter wav holding float samples"),
    # an output no step emits: its own contract alone is checked
    Mutation("B14", "media",
             (Set((*OUT, "spoken"),
                  {"contract": {"dtype": "int16", "rank": 3, "shape": [1, 2, "samples"]},
                   "role": "audio", "stage": "pre_adapter",
                   "media": {"container": "wav", "encoding": "pcm_s16_le",
                             "sample_rate_hz": 16000, "channels": 2}}),),
             "pipeline.workflow.outputs.spoken.contract.dtype",
             "pre-adapter wav holding integer samples"),
    # B15: value_range exactly on image outputs
    Mutation("B15", "media", (Delete((*OUT, "image", "value_range")),),
             "pipeline.workflow.outputs.image.value_range", "image output without value_range"),
    Mutation("B15", "kv_decoder", (Set((*OUT, "turns", "value_range"), "zero_to_one"),),
             "pipeline.workflow.outputs.turns.value_range", "value_range on a tensor output"),
    Mutation("B15", "static_cache", (Set((*OUT, "keys", "role"), "image"),),
             "pipeline.workflow.outputs.keys.value_range", "tensor output turned image"),
    # B82: default literal that does not fit its contract
    Mutation("B82", "kv_decoder", (Set((*INP, "request.seed", "default"), 0.5),),
             'pipeline.workflow.inputs["request.seed"].default', "float default on int64"),
    Mutation("B82", "kv_decoder", (Set((*INP, "request.temperature", "default"), 1),),
             'pipeline.workflow.inputs["request.temperature"].default',
             "integer default on float32"),
    Mutation("B82", "kv_decoder", (Set((*INP, "package.one_turn", "default"), 2**63),),
             'pipeline.workflow.inputs["package.one_turn"].default', "integer out of int64 range"),
    Mutation("B82", "kv_decoder", (Set((*INP, "package.one_turn", "default"), "one"),),
             'pipeline.workflow.inputs["package.one_turn"].default', "string default"),
    # a literal is a number or a boolean, whatever the contract's dtype
    Mutation("B82", "kv_decoder",
             (Set((*INP, "package.greeting"),
                  {"contract": {"dtype": "string", "rank": 1, "shape": [1]}, "role": _OPAQUE,
                   "source": {"kind": "literal"}, "required": False, "default": "hello"}),),
             'pipeline.workflow.inputs["package.greeting"].default', "string default on string",
             also=("B08",)),  # string tensors are not workflow values either
    Mutation("B82", "kv_decoder", (Set((*INP, "package.active", "default"), 1),),
             'pipeline.workflow.inputs["package.active"].default', "integer default on bool"),
    Mutation("B82", "kv_decoder", (Set((*INP, "package.max_context", "default"), [64, 64]),),
             'pipeline.workflow.inputs["package.max_context"].default',
             "list longer than the shape"),
    Mutation("B82", "kv_decoder", (Set((*INP, "package.max_context", "default"), []),),
             'pipeline.workflow.inputs["package.max_context"].default', "empty list"),
    Mutation("B82", "kv_decoder",
             (Set((*INP, "package.ids"),
                  {"contract": {"dtype": "int64", "rank": 1, "shape": ["ids"]}, "role": _OPAQUE,
                   "source": {"kind": "literal"}, "required": False, "default": []}),),
             'pipeline.workflow.inputs["package.ids"].default', "empty list of a symbolic length"),
    Mutation("B82", "kv_decoder",
             (Delete((*INP, "package.once", "default")), Delete((*INP, "package.once", "required"))),
             'pipeline.workflow.inputs["package.once"].default', "literal without default"),
    Mutation("B82", "kv_decoder", (Delete((*INP, "package.active", "contract", "shape")),),
             'pipeline.workflow.inputs["package.active"].default',
             "rank-1 literal without shape"),
    Mutation("B82", "kv_decoder", (Set((*INP, "package.one_turn", "default"), -(2**63) - 1),),
             'pipeline.workflow.inputs["package.one_turn"].default', "integer below int64 range"),
    Mutation("B82", "kv_decoder", (Set((*INP, "package.no_turns", "default"), [0]),),
             'pipeline.workflow.inputs["package.no_turns"].default', "list default on rank 0"),
    Mutation("B82", "kv_decoder", (Set((*INP, "package.one_turn", "default"), True),),
             'pipeline.workflow.inputs["package.one_turn"].default', "boolean default on int64"),
    Mutation("B82", "kv_decoder", (Set((*INP, "request.temperature", "default"), True),),
             'pipeline.workflow.inputs["request.temperature"].default',
             "boolean default on float32"),
    # B13: a branch output (phi) that reads the optional input outside its presence case
    Mutation("B13", "broadcast_and_presence",
             (Set((*WF, "steps", 1, "outputs", "result", "cases", "false"), "offset"),),
             "pipeline.workflow.steps[1].outputs.result.cases.false",
             "phi reads the optional input outside its case"),
)  # fmt: skip

VARIANTS = (
    Variant("kv_decoder",
            (Set((*INP, "request.bias", "source"), {"kind": "request"}),
             Set((*INP, "request.bias", "role"), {**_RUNTIME, "role": "constraint"})),
            "present_as on a constraint request input"),
    Variant("kv_decoder", (Set((*INP, "package.one_turn", "default"), 2**63 - 1),),
            "int64 default at the top of its range"),
    Variant("kv_decoder", (Set((*INP, "package.one_turn", "default"), -(2**63)),),
            "int64 default at the bottom of its range"),
    Variant("kv_decoder", (Set((*INP, "package.max_context", "default"), [64]),),
            "list default as long as its shape"),
    Variant("media",
            (Set((*OUT, "spoken"),
                 {"contract": {"dtype": "bf16", "rank": 3, "shape": [1, 2, "samples"]},
                  "role": "audio", "stage": "pre_adapter",
                  "media": {"container": "wav", "encoding": "pcm_s16_le",
                            "sample_rate_hz": 16000, "channels": 2}}),),
            "pre-adapter wav of bf16 samples"),
    Variant("media",
            (Set((*OUT, "encoded"),
                 {"contract": {"dtype": "uint8", "rank": 1, "shape": ["bytes"]},
                  "role": "audio", "stage": "post_adapter",
                  "media": {"container": "wav", "encoding": "pcm_s16_le",
                            "sample_rate_hz": 16000, "channels": 2}}),),
            "post-adapter wav of encoded bytes"),
    # a valid_length emit's last axis is a prefix of the output's: fixed extents may differ
    Variant("kv_decoder", (Set((*OUT, "tokens", "contract", "shape"), ["batch", 4]),),
            "valid_length emit of width 1 into a fixed width 4"),
)  # fmt: skip
