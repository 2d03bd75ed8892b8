"""Family C, components: names, artifacts, adapter ABIs, contracts, overrides, row scope,
effects. Mirrors ``reference_runtime/package/rules/components.py``."""

from __future__ import annotations

import onnx
from google.protobuf import text_format

from fixtures import package_path

from ..mutations import (
    Delete,
    EditJson,
    GrowFile,
    Insert,
    Mutation,
    Rename,
    Set,
    Variant,
    WriteFile,
    load_document,
)
from .admission import projector_graph as _projector

DECODER = ("pipeline", "workflow", "components", "decoder")
LOOP = ("pipeline", "workflow", "steps", 0)  # the lowered decode loop
SERVED_KV = ("pipeline", "workflow", "serving", "state_service", "groups", "decoder_cache", "ports",
             "decoder")  # fmt: skip

WF = ("pipeline", "workflow")
COMP = (*WF, "components")
ABIS = (*WF, "manifest", "adapter_abis")
STEPS = (*WF, "steps")

_SCALAR_INT64 = {"dtype": "int64", "rank": 0}
_NOT_ONNX = b"this is not an ONNX model\x00\xff\xfe"
# The counter graph of kv_decoder, as text, with its output left unnamed.
_UNNAMED_OUTPUT = b"""ir_version: 10
graph {
  node { input: "count" output: "" op_type: "Identity" }
  name: "counter"
  input { name: "count" type { tensor_type { elem_type: 7 shape { } } } }
  output { name: "" type { tensor_type { elem_type: 7 shape { } } } }
}
opset_import { domain: "" version: 21 }
"""
# The same graph, well named, but with an operator ONNX does not define, or an element type
# it does not define (of its input, or of a stored tensor).
_NAMED = _UNNAMED_OUTPUT.replace(b'output: ""', b'output: "next"').replace(
    b'output { name: ""', b'output { name: "next"'
)
_UNKNOWN_OP = _NAMED.replace(b"Identity", b"NoSuchOperator")
_UNKNOWN_ELEM_TYPE = _NAMED.replace(b"elem_type: 7", b"elem_type: 99", 1)
_UNKNOWN_TENSOR_TYPE = _NAMED.replace(
    b'  name: "counter"\n',
    b'  name: "counter"\n  initializer { name: "odd" data_type: 99 dims: 1 raw_data: "\\000" }\n',
)
# ... and one whose data also lies outside the package: the element type alone is reported
_UNKNOWN_TYPE_OUTSIDE = _NAMED.replace(
    b'  name: "counter"\n',
    b'  name: "counter"\n  initializer { name: "odd" data_type: 99 dims: 1 data_location: EXTERNAL '
    b'external_data { key: "location" value: "../outside.bin" } }\n',
)
# ... a stored tensor whose external data lies outside the package (a text-format graph: it is
# read without its external data, which is checked on its own)
_TEXT_DATA_OUTSIDE = _NAMED.replace(
    b'  name: "counter"\n',
    b'  name: "counter"\n  initializer { name: "w" data_type: 1 dims: 2 data_location: EXTERNAL '
    b'external_data { key: "location" value: "../outside.bin" } '
    b'external_data { key: "offset" value: "0" } external_data { key: "length" value: "8" } }\n',
)
# ... an operator set ONNX does not define (beyond its newest, or 0), a required operand left
# empty, a default (initializer) of another rank than its input, an output whose type
# inference contradicts.
_UNDEFINED_OUTPUT_TYPE = _NAMED.replace(
    b'output { name: "next" type { tensor_type { elem_type: 7',
    b'output { name: "next" type { tensor_type { elem_type: 0',
)
_OPSET_BEYOND = _NAMED.replace(b'domain: "" version: 21', b'domain: "" version: 999')
_OPSET_ZERO = _NAMED.replace(b'domain: "" version: 21', b'domain: "" version: 0')
_OPSET_FIRST = _NAMED.replace(b'domain: "" version: 21', b'domain: "" version: 1')
_EMPTY_OPERAND = _NAMED.replace(
    b'node { input: "count" output: "next" op_type: "Identity" }',
    b'node { input: "count" input: "" output: "next" op_type: "Add" }',
)
# ... an operator ONNX does not define, with an operand left empty (no schema says whether
# that operand is required: ONNX's checker refuses the operator)
_UNKNOWN_OP_EMPTY_OPERAND = _NAMED.replace(
    b'node { input: "count" output: "next" op_type: "Identity" }',
    b'node { input: "" input: "count" output: "next" op_type: "NoSuchOperator" }',
)
# ... an operand left empty past the last one its operator defines
_EMPTY_OPERAND_PAST_THE_SCHEMA = _NAMED.replace(
    b'node { input: "count" output: "next" op_type: "Identity" }',
    b'node { input: "count" input: "" output: "next" op_type: "Identity" }',
)
_DEFAULT_OF_ANOTHER_RANK = _NAMED.replace(
    b'  name: "counter"\n',
    b'  name: "counter"\n  initializer { name: "count" data_type: 7 dims: 2 int64_data: 1 '
    b"int64_data: 2 }\n",
)
# an Add of the int64 count and a float initializer: the checker passes it, type inference not
_OPERAND_TYPES_UNLIKE = _NAMED.replace(
    b'node { input: "count" output: "next" op_type: "Identity" }',
    b'node { input: "count" input: "one" output: "next" op_type: "Add" }',
).replace(
    b'  name: "counter"\n',
    b'  name: "counter"\n  initializer { name: "one" data_type: 1 float_data: 1 }\n',
)
_OUTPUT_TYPE_CONTRADICTED = _NAMED.replace(
    b'output { name: "next" type { tensor_type { elem_type: 7',
    b'output { name: "next" type { tensor_type { elem_type: 1',
)
# The same graph with a node in ONNX Runtime's contrib domain, which ONNX's checker does not
# know: an operator ONNX Runtime does not define there, or its Gelu (float) given the
# attribute of ONNX's own Gelu, which the contrib one does not define.
_MS_IMPORT = b'opset_import { domain: "com.microsoft" version: 1 }\n'
_UNKNOWN_CONTRIB_OP = (
    _NAMED.replace(b'op_type: "Identity"', b'op_type: "NoSuchOperator" domain: "com.microsoft"')
    + _MS_IMPORT
)
_CONTRIB_EXTRA_ATTRIBUTE = (
    _NAMED.replace(
        b'op_type: "Identity"',
        b'op_type: "Gelu" domain: "com.microsoft" '
        b'attribute { name: "approximate" s: "tanh" type: STRING }',
    ).replace(b"elem_type: 7", b"elem_type: 1")
    + _MS_IMPORT
)


def _contrib_counter(*nodes, initializers=(), ms_version=1, functions=()) -> bytes:
    """kv_decoder's counter graph (``next`` is ``count``) as text, with ``nodes`` (built with
    ``onnx.helper``, ``com.microsoft`` among them) placed before its Identity and the contrib
    domain imported at ``ms_version``."""
    h = onnx.helper
    graph = h.make_graph(
        [*nodes, h.make_node("Identity", ["count"], ["next"])],
        "counter",
        [h.make_tensor_value_info("count", onnx.TensorProto.INT64, [])],
        [h.make_tensor_value_info("next", onnx.TensorProto.INT64, [])],
        initializer=list(initializers),
    )
    imports = [h.make_opsetid("", 21), h.make_opsetid("com.microsoft", ms_version)]
    if functions:
        imports.append(h.make_opsetid("local", 1))
    model = h.make_model(graph, opset_imports=imports, ir_version=10, functions=list(functions))
    return text_format.MessageToString(model).encode()


def _ms(op_type: str, inputs: list, output: str = "extra", **attributes):
    return onnx.helper.make_node(op_type, inputs, [output], domain="com.microsoft", **attributes)


def _scalar(name: str, data_type: int, value) -> onnx.TensorProto:
    return onnx.helper.make_tensor(name, data_type, [], [value])


# ONNX Runtime's contrib QLinearConcat: Y_scale, Y_zero_point, then (x, scale, zero point)
# triples in its variadic operand; axis is a required INT attribute.
_QLINEAR = (
    _scalar("y_scale", onnx.TensorProto.FLOAT, 1.0),
    _scalar("y_zero", onnx.TensorProto.UINT8, 0),
    onnx.helper.make_tensor("x", onnx.TensorProto.UINT8, [1], [1]),
    _scalar("x_scale", onnx.TensorProto.FLOAT, 1.0),
    _scalar("x_zero", onnx.TensorProto.UINT8, 0),
)
_TRIPLE = ["x", "x_scale", "x_zero"]


def _steps_function(*inputs: str) -> onnx.FunctionProto:
    """A model function ``local::Steps(a) -> b``: contrib Range over ``inputs``."""
    return onnx.helper.make_function(
        "local", "Steps", ["a"], ["b"], [_ms("Range", list(inputs), "b")],
        [onnx.helper.make_opsetid("", 21), onnx.helper.make_opsetid("com.microsoft", 1)],
    )  # fmt: skip


def _in_branches(node) -> list:
    """An If on ``count`` whose branches both hold ``node`` and yield ``count`` (as ``o``)."""
    h = onnx.helper
    body = h.make_graph(
        [node, h.make_node("Identity", ["count"], ["o"])],
        "branch",
        [],
        [h.make_tensor_value_info("o", onnx.TensorProto.INT64, [])],
    )
    return [
        h.make_node("Cast", ["count"], ["flag"], to=onnx.TensorProto.BOOL),
        h.make_node("If", ["flag"], ["chosen"], then_branch=body, else_branch=body),
    ]


_DATA = "projector.onnx.data"
_SHORT_LENGTH = _projector({"location": _DATA, "offset": "0", "length": "12"})
_NO_LENGTH = _projector({"location": _DATA, "offset": "0"})
_NO_LOCATION = _projector({"offset": "0", "length": "16"})
_IDENTITY_DATA = bytes.fromhex("0000803f00000000000000000000803f")  # float32 [[1, 0], [0, 1]]


def _projector_outside_thrice() -> bytes:
    """The lora projector graph, its initializer 12 bytes long for 16 (C105), beside three
    unused initializers stored outside the package (H74): each code is reported, however many
    findings the first one has."""
    model = onnx.load_from_string(_projector({"location": _DATA, "offset": "0", "length": "12"}))
    for i in range(3):
        tensor = onnx.helper.make_tensor(f"far{i}", onnx.TensorProto.FLOAT, [1], [0.0])
        tensor.ClearField("float_data")
        tensor.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", f"../far{i}.bin"), ("offset", "0"), ("length", "4")):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        model.graph.initializer.insert(0, tensor)
    return model.SerializeToString()


def _projector_tensor(edit) -> bytes:
    """The lora projector graph, its initializer ``projection`` changed by ``edit`` (which gets
    the TensorProto, stored externally as the package stores it)."""
    model = onnx.load_from_string(_projector({"location": _DATA, "offset": "0", "length": "16"}))
    edit(model.graph.initializer[0])
    return model.SerializeToString()


def _projector_constant() -> bytes:
    """The lora projector graph with its externally stored initializer moved into a Constant
    node's ``value`` (an attribute tensor stored externally: no initializer at all)."""
    model = onnx.load_from_string(_projector({"location": _DATA, "offset": "0", "length": "16"}))
    graph = model.graph
    tensor = onnx.TensorProto()
    tensor.CopyFrom(graph.initializer[0])
    del graph.initializer[:]
    node = onnx.helper.make_node("Constant", [], [tensor.name], value=tensor)
    graph.node.insert(0, node)
    return model.SerializeToString()


def _projector_contrib() -> bytes:
    """The lora projector graph with its Identity replaced by ONNX Runtime's contrib ``Gelu``
    (exactly the one input and one output that operator takes)."""
    model = onnx.load_from_string(_projector({"location": _DATA, "offset": "0", "length": "16"}))
    node = model.graph.node[0]
    node.op_type, node.domain = "Gelu", "com.microsoft"
    model.opset_import.append(onnx.helper.make_opsetid("com.microsoft", 1))
    return model.SerializeToString()


def _projector_with_bias() -> bytes:
    """The lora projector graph with an inline initializer beside its external one: a zero
    ``bias`` the node adds (the external one still unused)."""
    model = onnx.load_from_string(_projector({"location": _DATA, "offset": "0", "length": "16"}))
    graph = model.graph
    graph.initializer.append(onnx.helper.make_tensor("bias", onnx.TensorProto.FLOAT, [2], [0, 0]))
    graph.node[0].op_type = "Add"
    graph.node[0].input.append("bias")
    return model.SerializeToString()


def _projector_default(dims: list[int], external: bool = False) -> bytes:
    """The lora projector graph with a default (an initializer) for its input ``activations``
    (declared ``[batch, 2]``) of dimensions ``dims``, its data inline or (``external``) in the
    package's data file, from its start."""
    model = onnx.load_from_string(_projector({"location": _DATA, "offset": "0", "length": "16"}))
    count = dims[0] * dims[1]
    default = onnx.helper.make_tensor("activations", onnx.TensorProto.FLOAT, dims, [0.0] * count)
    if external:
        default.ClearField("float_data")
        default.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", _DATA), ("offset", "0"), ("length", str(4 * count))):
            entry = default.external_data.add()
            entry.key, entry.value = key, value
    model.graph.initializer.append(default)
    return model.SerializeToString()


def _counter_graph(extra_nodes=(), initializers=(), ms_first: bool = False) -> tuple:
    """kv_decoder's counter component read from a binary counter graph (``count`` to ``next``)
    with ``extra_nodes`` and ``initializers`` beside it; ``ms_first``: com.microsoft imported
    before ONNX's operator set."""
    h = onnx.helper
    graph = h.make_graph(
        [h.make_node("Identity", ["count"], ["next"]), *extra_nodes],
        "counter",
        [h.make_tensor_value_info("count", onnx.TensorProto.INT64, [])],
        [h.make_tensor_value_info("next", onnx.TensorProto.INT64, [])],
        initializer=list(initializers),
    )
    imports = [h.make_opsetid("", 21)]
    if ms_first:
        imports.insert(0, h.make_opsetid("com.microsoft", 1))
    model = h.make_model(graph, opset_imports=imports, ir_version=10)
    return (
        Set((*COMP, "counter", "implementation", "artifact"), "policies/counter.onnx"),
        WriteFile("policies/counter.onnx", model.SerializeToString()),
    )


PROJECTOR = "pipeline.workflow.components.projector.implementation.artifact"
# the lowered decode loop's batch component invoked a second time, after the first
_SECOND_BATCH_INVOKE = Insert(
    (*LOOP, "steps"),
    4,
    {"kind": "invoke", "component": "batch",
     "inputs": {"active": "active", "next_active": "step.active", "accepted": "package.one_row"},
     "outputs": {"live": "step.live_again", "accepted_len": "step.accepted_again"}},
)  # fmt: skip
COUNTER = "pipeline.workflow.components.counter.implementation.artifact"


def _stored(**external: str) -> tuple:
    """The lora projector graph with its initializer's external data entries ``external``."""
    return (WriteFile("projector.onnx", _projector(external)),)


def _tensor(edit) -> tuple:
    """The lora projector graph with its initializer changed by ``edit``."""
    return (WriteFile("projector.onnx", _projector_tensor(edit)),)


# Bits per element of each fixed-width element type ONNX defines (onnx.proto's TensorProto).
_ELEMENT_BITS = {
    "FLOAT": 32, "UINT8": 8, "INT8": 8, "UINT16": 16, "INT16": 16, "INT32": 32, "INT64": 64,
    "BOOL": 8, "FLOAT16": 16, "DOUBLE": 64, "UINT32": 32, "UINT64": 64, "COMPLEX64": 64,
    "COMPLEX128": 128, "BFLOAT16": 16, "FLOAT8E4M3FN": 8, "FLOAT8E4M3FNUZ": 8, "FLOAT8E5M2": 8,
    "FLOAT8E5M2FNUZ": 8, "UINT4": 4, "INT4": 4, "FLOAT4E2M1": 4, "FLOAT8E8M0": 8, "UINT2": 2,
    "INT2": 2,
}  # fmt: skip


# A model-local function (no node calls it) holding a constant of two floats in four bytes.
_SHORT_CONSTANT_IN_A_FUNCTION = _NAMED + (
    b'functions { name: "Halve" domain: "local" input: "x" output: "y"\n'
    b'  node { output: "c" op_type: "Constant" attribute { name: "value" type: TENSOR '
    b't { dims: 2 data_type: 1 raw_data: "\\000\\000\\000\\000" } } }\n'
    b'  node { input: "x" output: "y" op_type: "Identity" }\n'
    b'  opset_import { domain: "" version: 21 } }\n'
)
# A sparse constant one float past 2 GiB when dense (ONNX Runtime refuses to densify it).
_SPARSE_PAST_2_GIB = _NAMED.replace(
    b'  name: "counter"\n',
    b'  node { output: "big" op_type: "Constant" attribute { name: "sparse_value" '
    b'type: SPARSE_TENSOR sparse_tensor { values { name: "sv" dims: 1 data_type: 1 '
    b'float_data: 1 } indices { name: "si" dims: 1 data_type: 7 int64_data: 0 } '
    b"dims: 536870913 } } }\n"
    b'  name: "counter"\n',
)
# ... and one of 32 MiB dense (2^23 + 1 floats), well inside the limit.
_SPARSE_OF_32_MIB = _SPARSE_PAST_2_GIB.replace(b"dims: 536870913", b"dims: 8388609")
# ... and one with a dimension of 0 (ONNX's checker wants a sparse tensor's dimensions positive)
_SPARSE_OF_NOTHING = _NAMED.replace(
    b'  name: "counter"\n',
    b'  node { output: "empty" op_type: "Constant" attribute { name: "sparse_value" '
    b'type: SPARSE_TENSOR sparse_tensor { values { name: "ev" dims: 0 data_type: 1 } '
    b'indices { name: "ei" dims: 0 data_type: 7 } dims: 0 } } }\n'
    b'  name: "counter"\n',
)


def _initializers_of_every_width() -> bytes:
    """The counter graph with an unused initializer of 8 elements of each element type above,
    its raw data exactly as long as the type's width says (8 elements of b bits: b bytes), so
    one bit more or less per element is a length mismatch."""
    lines = b"".join(
        b'  initializer { name: "bits_%s" data_type: %d dims: 8 raw_data: "%s" }\n'
        % (name.lower().encode(), getattr(onnx.TensorProto, name), b"\\000" * bits)
        for name, bits in _ELEMENT_BITS.items()
        if hasattr(onnx.TensorProto, name)
    )
    return _NAMED.replace(b'  name: "counter"\n', b'  name: "counter"\n' + lines)


def _projector_of_unnamed_batch() -> bytes:
    """The lora package's projector graph with its input's batch dimension neither fixed nor
    named (an ONNX dimension may be left unknown)."""
    model = onnx.load(str(package_path("lora") / "projector.onnx"), load_external_data=False)
    model.graph.input[0].type.tensor_type.shape.dim[0].Clear()
    return model.SerializeToString()


def _projector_without_output_shape() -> bytes:
    """The lora package's projector graph with no shape on its output (its rank unknown)."""
    model = onnx.load(str(package_path("lora") / "projector.onnx"), load_external_data=False)
    model.graph.output[0].type.tensor_type.ClearField("shape")
    return model.SerializeToString()


def _lowered_component(name: str) -> dict:
    """A component of the lowered_decoder package, as its document declares it."""
    return load_document("lowered_decoder")["pipeline"]["workflow"]["components"][name]


def _counter(text: bytes) -> tuple:
    """kv_decoder's counter component read from the text-format graph ``text``."""
    return (
        Set((*COMP, "counter", "implementation", "artifact"), "policies/counter.onnx.textproto"),
        WriteFile("policies/counter.onnx.textproto", text),
    )


def _inline(raw: bytes | None = None, floats: list | None = None):
    def edit(tensor):
        del tensor.external_data[:]
        tensor.data_location = onnx.TensorProto.DEFAULT
        if raw is not None:
            tensor.raw_data = raw
        else:
            tensor.float_data.extend(floats)

    return edit


def _as(data_type: int, dims: list, field: str, values: list):
    """Replace the initializer by an inline one of another type, its values in ``field``."""

    def edit(tensor):
        name = tensor.name
        tensor.Clear()
        tensor.name, tensor.data_type = name, data_type
        tensor.dims.extend(dims)
        getattr(tensor, field).extend(values)

    return edit


def _dims(*dims):
    def edit(tensor):
        del tensor.dims[:]
        tensor.dims.extend(dims)

    return edit


assert onnx.load_from_string(_NO_LOCATION).graph.initializer[0].external_data
_TIMER = (*COMP, "timer")
_OVERLAY = (*COMP, "overlay")
RUNTIME_SEQUENCE = {"kind": "runtime_sequence_state"}
_COMMIT = (*COMP, "grammar_commit")
_SECOND_ASSEMBLER = {
    "implementation": {"kind": "adapter", "abi": "onnx-genai.text-assembly", "version": "1",
                       "artifact": "assembly.json"},
    "contract": {"id": "onnx-genai.text-assembly", "version": "1"},
}  # fmt: skip

MUTATIONS = (
    # C16: component name empty or dotted
    Mutation("C16", "media", (Rename((*COMP, "assembler"), "text.assembler"),),
             'pipeline.workflow.components["text.assembler"]', "dotted component name"),
    Mutation("C16", "kv_decoder",
             (Rename((*COMP, "counter"), "policies.counter"),
              Set((*STEPS, 1, "steps", 0, "component"), "policies.counter")),
             'pipeline.workflow.components["policies.counter"]',
             "dotted name of an invoked component"),
    Mutation("C16", "media", (Rename((*COMP, "assembler"), ""),),
             'pipeline.workflow.components[""]', "empty component name"),
    # C17: empty ONNX artifact
    Mutation("C17", "kv_decoder", (Set((*COMP, "counter", "implementation", "artifact"), ""),),
             "pipeline.workflow.components.counter.implementation.artifact", "empty artifact"),
    Mutation("C17", "speculative", (Set((*COMP, "draft", "implementation", "artifact"), ""),),
             "pipeline.workflow.components.draft.implementation.artifact",
             "empty proposer artifact"),
    # C18: adapter ABI not pinned, pinned at another version, or unsupported
    Mutation("C18", "media", (Delete((*ABIS, "onnx-genai.image-preprocess")),),
             'pipeline.workflow.manifest.adapter_abis["onnx-genai.image-preprocess"]',
             "ABI not pinned"),
    Mutation("C18", "speculative", (Set((*ABIS, "onnx-genai.telemetry"), "2"),),
             'pipeline.workflow.manifest.adapter_abis["onnx-genai.telemetry"]',
             "ABI pinned at another version"),
    Mutation("C18", "speculative",
             (Set((*_TIMER, "implementation", "abi"), "vendor.stopwatch"),
              Set((*ABIS, "vendor.stopwatch"), "1")),
             "pipeline.workflow.components.timer.implementation.abi", "unsupported ABI"),
    Mutation("C18", "speculative",
             (Set((*_TIMER, "implementation", "version"), "2"),
              Set((*_TIMER, "contract", "version"), "2"),
              Set((*ABIS, "onnx-genai.telemetry"), "2")),
             "pipeline.workflow.components.timer.implementation.version",
             "unsupported ABI version"),
    Mutation("C18", "media", (Set((*ABIS, "vendor.video-preprocess"), "1"),),
             'pipeline.workflow.manifest.adapter_abis["vendor.video-preprocess"]',
             "unsupported ABI pinned by no component"),
    # C19: contract with an empty id or version, or naming an unknown port
    Mutation("C19", "kv_decoder", (Set((*COMP, "sampler", "contract", "id"), ""),),
             "pipeline.workflow.components.sampler.contract.id", "empty contract id"),
    Mutation("C19", "kv_decoder", (Set((*COMP, "sampler", "contract", "version"), ""),),
             "pipeline.workflow.components.sampler.contract.version", "empty contract version"),
    Mutation("C19", "kv_decoder",
             (Set((*COMP, "sampler", "contract", "bindings", "temperature"), "temp"),),
             "pipeline.workflow.components.sampler.contract.bindings.temperature",
             "binding to an unknown port"),
    Mutation("C19", "kv_decoder",
             (Rename((*COMP, "model", "ports", "roles", "input_ids"), "tokens"),),
             "pipeline.workflow.components.model.ports.roles.tokens",
             "port role on an unknown port"),
    # C20: adapter contract does not match its ABI, bad action, missing binding
    Mutation("C20", "speculative",
             (Set((*_TIMER, "contract", "id"), "onnx-genai.grammar-guidance"),),
             "pipeline.workflow.components.timer.contract.id", "contract id of another ABI"),
    Mutation("C20", "speculative", (Set((*_TIMER, "contract", "version"), "2"),),
             "pipeline.workflow.components.timer.contract.version",
             "contract version differs from the ABI's"),
    Mutation("C20", "speculative", (Delete((*_TIMER, "contract")),),
             "pipeline.workflow.components.timer.contract", "adapter without contract"),
    Mutation("C20", "speculative", (Delete((*_TIMER, "contract", "parameters", "action")),),
             "pipeline.workflow.components.timer.contract.parameters.action", "missing action"),
    Mutation("C20", "lora", (Delete((*_OVERLAY, "contract")),),
             "pipeline.workflow.components.overlay.contract", "overlay adapter without a contract"),
    # upstream holds overlay targets only under the overlay contract: C22 is not named here
    Mutation("C20", "lora", (Set((*_OVERLAY, "contract", "id"), "example.other-contract"),
                             Set((*_OVERLAY, "contract", "parameters"), {"action": "apply"})),
             "pipeline.workflow.components.overlay.contract.id",
             "overlay adapter under another contract naming no target"),
    Mutation("C20", "lora", (Set((*_OVERLAY, "contract", "parameters", "action"), "merge"),),
             "pipeline.workflow.components.overlay.contract.parameters.action", "unknown action"),
    Mutation("C20", "speculative",
             (Delete((*_COMMIT, "contract", "bindings", "consumed_length")),),
             "pipeline.workflow.components.grammar_commit.contract.bindings",
             "commit without its consumed_length binding"),
    # C21: application_overridable without a contract, or not ONNX
    Mutation("C21", "kv_decoder", (Set((*COMP, "model", "application_overridable"), True),),
             "pipeline.workflow.components.model.application_overridable",
             "overridable without contract"),
    Mutation("C21", "speculative", (Set((*_TIMER, "application_overridable"), True),),
             "pipeline.workflow.components.timer.application_overridable",
             "overridable adapter"),
    # C22: parameter overlay without a target, or with an unknown target
    Mutation("C22", "lora", (Delete((*_OVERLAY, "contract", "parameters", "parameter")),),
             "pipeline.workflow.components.overlay.contract.parameters", "overlay without target"),
    Mutation("C22", "lora",
             (Set((*_OVERLAY, "contract", "parameters", "parameter"), "attention"),),
             "pipeline.workflow.components.overlay.contract.parameters.parameter",
             "overlay on an unknown target"),
    Mutation("C22", "lora",
             (Set(("adapters", "target_manifest", "targets", 0, "id"), "projection.lora"),
              *(Set(("adapters", "artifacts", alias, "bindings", 0, "target"), "projection.lora")
                for alias in ("red", "peft")),
              Set((*_OVERLAY, "contract", "parameters", "parameter"), "projection.lora")),
             "pipeline.workflow.components.overlay.contract.parameters.parameter",
             "overlay naming the target id"),
    Mutation("C22", "lora",
             (Set((*_OVERLAY, "contract", "parameters", "component"), "overlay"),),
             "pipeline.workflow.components.overlay.contract.parameters.component",
             "overlay target in another component"),
    Mutation("C22", "lora",
             (Set((*COMP, "projector", "contract"),
                  {"id": "onnx-genai.parameter-overlay", "version": "1",
                   "parameters": {"action": "apply"}}),),
             "pipeline.workflow.components.projector.contract.parameters",
             "overlay contract on an ONNX component without a target"),
    # C23: row scope
    Mutation("C23", "speculative", (Delete((*_COMMIT, "row_scope")),),
             "pipeline.workflow.components.grammar_commit.row_scope",
             "stateful adapter without row_scope"),
    Mutation("C23", "lora", (Set((*_OVERLAY, "row_scope", "axis"), 1),),
             "pipeline.workflow.components.overlay.row_scope.axis", "row_scope on the wrong axis"),
    Mutation("C23", "speculative", (Set((*_COMMIT, "row_scope", "stateful"), False),),
             "pipeline.workflow.components.grammar_commit.row_scope.stateful",
             "stateful adapter declared stateless"),
    # upstream's ComponentRowScope.stateful defaults to false
    Mutation("C23", "speculative", (Delete((*_COMMIT, "row_scope", "stateful")),),
             "pipeline.workflow.components.grammar_commit.row_scope.stateful",
             "stateful adapter leaving stateful unsaid"),
    Mutation("C23", "lora", (Set((*_OVERLAY, "row_scope", "axis"), -1),),
             "pipeline.workflow.components.overlay.row_scope.axis", "negative row_scope axis"),
    # ports with no request axis of their own (runtime sequence state) still reach row_scope's
    Mutation("C23", "lora",
             (Set((*_OVERLAY, "ports", "inputs", "input", "batch_layout"), RUNTIME_SEQUENCE),
              Set((*_OVERLAY, "ports", "outputs", "output", "batch_layout"), RUNTIME_SEQUENCE),
              Set((*_OVERLAY, "row_scope", "axis"), 2)),
             "pipeline.workflow.components.overlay.row_scope.axis",
             "row_scope axis at the rank of its ports"),
    # C24: effects
    Mutation("C24", "speculative", (Set((*_COMMIT, "effects", 1), "logging"),),
             "pipeline.workflow.components.grammar_commit.effects[1]", "undeclared effect"),
    Mutation("C24", "speculative", (Set((*_COMMIT, "effects", 0), ""),),
             "pipeline.workflow.components.grammar_commit.effects[0]", "empty effect name"),
    Mutation("C24", "speculative",
             (Set((*WF, "effects", "audit"),
                  {"retry": "idempotent",
                   "speculation_safety": {"kind": "rewindable", "max_depth": 0}}),),
             "pipeline.workflow.effects.audit.speculation_safety.max_depth",
             "rewindable with depth 0"),
    # C25: lone ONNX component owning attention without a sequence role
    Mutation("C25", "static_cache", (Delete((*COMP, "model", "ports", "roles", "input_ids")),),
             "pipeline.workflow.components.model.ports.roles", "no token_ids role"),
    Mutation("C25", "static_cache",
             (Set((*COMP, "model", "ports", "roles", "input_ids"), "position_ids"),),
             "pipeline.workflow.components.model.ports.roles", "token input labelled position_ids"),
    # C78: declared ports against the graph
    Mutation("C78", "kv_decoder",
             (Set((*COMP, "counter", "ports", "inputs", "offset"),
                  {**_SCALAR_INT64, "optional": True}),),
             "pipeline.workflow.components.counter.ports.inputs.offset", "port the graph lacks"),
    Mutation("C78", "speculative",
             (Set((*COMP, "draft", "ports", "outputs", "logits", "dtype"), "float16"),),
             "pipeline.workflow.components.draft.ports.outputs.logits.dtype",
             "port dtype differs from the graph"),
    Mutation("C78", "speculative",
             (Set((*COMP, "draft", "ports", "outputs", "logits"),
                  {"dtype": "float32", "rank": 3, "shape": ["batch", 1, 8],
                   "batch_layout": {"kind": "request_aligned", "axis": 0}}),),
             "pipeline.workflow.components.draft.ports.outputs.logits.rank",
             "port rank differs from the graph"),
    Mutation("C78", "speculative",
             (Set((*COMP, "draft", "ports", "outputs", "logits", "shape", 1), 16),),
             "pipeline.workflow.components.draft.ports.outputs.logits.shape[1]",
             "fixed dimension differs from the graph"),
    Mutation("C78", "kv_decoder",
             (Delete((*COMP, "sampler", "ports", "inputs", "seed")),
              Delete((*STEPS, 0, "setup", 2, "inputs", "seed")),
              Delete((*STEPS, 0, "steps", 1, "inputs", "seed"))),
             "pipeline.workflow.components.sampler.ports.inputs", "graph input not declared"),
    Mutation("C78", "kv_decoder",
             (Set((*COMP, "counter", "implementation", "artifact"), "policies/counter.onnx.textproto"),
              WriteFile("policies/counter.onnx.textproto", _UNNAMED_OUTPUT)),
             "pipeline.workflow.components.counter.implementation.artifact",
             "graph output without a name"),
    # C80: binding component whose contract this runtime cannot execute
    Mutation("C80", "kv_decoder",
             (Set((*COMP, "copy_logits", "contract"), {"id": "vendor.copy", "version": "1"}),),
             "pipeline.workflow.components.copy_logits.contract.id", "unknown binding contract"),
    Mutation("C80", "kv_decoder",
             (Set((*COMP, "copy_logits", "contract"),
                  {"id": "onnx-genai.token-sampler", "version": "1"}),),
             "pipeline.workflow.components.copy_logits.contract.id", "native sampler binding"),
    # C81: text assembly
    Mutation("C81", "media", (Set((*COMP, "assembler2"), _SECOND_ASSEMBLER),),
             "pipeline.workflow.components.assembler2", "second text-assembly adapter"),
    Mutation("C81", "media",
             (Insert(STEPS, 0, {"kind": "invoke", "component": "assembler"}),),
             "pipeline.workflow.steps[0].component", "text assembly invoked in the workflow"),
    # C83: unreadable ONNX artifact
    Mutation("C83", "kv_decoder", (WriteFile("policies/counter.onnx", _NOT_ONNX),),
             "pipeline.workflow.components.counter.implementation.artifact",
             "binary graph replaced by garbage"),
    Mutation("C83", "static_cache", (WriteFile("model.onnx.textproto", b"graph { node {"),),
             "pipeline.workflow.components.model.implementation.artifact",
             "truncated textproto graph"),
    Mutation("C83", "lora", (WriteFile("projector.onnx.data", b"\x00\x00"),),
             "pipeline.workflow.components.projector.implementation.artifact",
             "truncated external data"),
    # C103: text-format graph over the size limit
    Mutation("C103", "kv_decoder", (GrowFile("policies/sampler.onnx.textproto", 2**20 + 1),),
             "pipeline.workflow.components.sampler.implementation.artifact",
             "text-format graph of 1 MiB"),
    Mutation("C103", "lowered_decoder",
             (Set((*COMP, "decoder", "contract", "parameters", "artifact"), "big.onnx.textproto"),
              WriteFile("big.onnx.textproto", _NAMED), GrowFile("big.onnx.textproto", 2**20 + 1)),
             "pipeline.workflow.components.decoder.contract.parameters.artifact",
             "lowered decoder graph in text format of 1 MiB"),
    Mutation("C103", "genai_decoder",
             (EditJson("genai_config.json",
                       (Set(("model", "decoder", "filename"), "big.onnx.textproto"),)),
              WriteFile("big.onnx.textproto", _NAMED), GrowFile("big.onnx.textproto", 2**20 + 1)),
             '["genai_config.json"].model.decoder.filename',
             "genai decoder graph in text format of 1 MiB"),
    # C104: a graph ONNX's checker refuses
    Mutation("C104", "kv_decoder",
             (Set((*COMP, "counter", "implementation", "artifact"), "policies/counter.onnx.textproto"),
              WriteFile("policies/counter.onnx.textproto", _UNKNOWN_OP)),
             "pipeline.workflow.components.counter.implementation.artifact",
             "operator ONNX does not define"),
    Mutation("C104", "kv_decoder",
             (Set((*COMP, "counter", "implementation", "artifact"), "policies/counter.onnx.textproto"),
              WriteFile("policies/counter.onnx.textproto", _UNKNOWN_ELEM_TYPE)),
             "pipeline.workflow.components.counter.implementation.artifact",
             "element type 99"),
    Mutation("H74", "kv_decoder", _counter(_TEXT_DATA_OUTSIDE), COUNTER,
             "text-format graph whose external data lies outside the package"),
    Mutation("C104", "kv_decoder", _counter(_UNKNOWN_TENSOR_TYPE), COUNTER,
             "initializer of an element type ONNX does not define"),
    Mutation("C104", "kv_decoder", _counter(_UNKNOWN_TYPE_OUTSIDE), COUNTER,
             "initializer of an undefined element type stored outside the package"),
    Mutation("C104", "kv_decoder", _counter(_OPSET_BEYOND), COUNTER, "ONNX operator set 999"),
    Mutation("C104", "kv_decoder", _counter(_OPSET_ZERO), COUNTER, "ONNX operator set 0"),
    Mutation("C104", "kv_decoder", _counter(_EMPTY_OPERAND), COUNTER,
             "required operand left empty"),
    Mutation("C104", "kv_decoder", _counter(_UNKNOWN_OP_EMPTY_OPERAND), COUNTER,
             "operator ONNX does not define, with an operand left empty"),
    Mutation("C104", "kv_decoder", _counter(_EMPTY_OPERAND_PAST_THE_SCHEMA), COUNTER,
             "operand left empty past the last its operator defines"),
    Mutation("C105", "kv_decoder", _counter(_SHORT_CONSTANT_IN_A_FUNCTION), COUNTER,
             "constant in a model-local function shorter than its dimensions"),
    Mutation("C104", "kv_decoder", _counter(_SPARSE_OF_NOTHING), COUNTER,
             "sparse constant with a dimension of 0"),
    Mutation("C105", "kv_decoder", _counter(_SPARSE_PAST_2_GIB), COUNTER,
             "sparse constant past 2 GiB dense"),
    Mutation("C104", "kv_decoder", _counter(_DEFAULT_OF_ANOTHER_RANK), COUNTER,
             "initializer default of another rank than its input"),
    Mutation("C104", "lora", (WriteFile("projector.onnx", _projector_default([1, 3])),), PROJECTOR,
             "initializer default of the input's rank but another fixed dimension"),
    Mutation("C104", "lora", (WriteFile("projector.onnx", _projector_without_output_shape()),),
             PROJECTOR, "graph output without a shape"),
    Mutation("C104", "lora",
             (WriteFile("projector.onnx", _projector_default([1, 3], external=True)),), PROJECTOR,
             "initializer default stored externally, of another fixed dimension than its input"),
    Mutation("C104", "kv_decoder", _counter(_OUTPUT_TYPE_CONTRADICTED), COUNTER,
             "output type inference contradicts"),
    Mutation("C104", "kv_decoder", _counter(_OPERAND_TYPES_UNLIKE), COUNTER,
             "operands of unlike types"),
    # C125: an operator ONNX Runtime's own schemas refuse (ONNX's checker does not know them)
    Mutation("C125", "kv_decoder",
             (Set((*COMP, "counter", "implementation", "artifact"), "policies/counter.onnx.textproto"),
              WriteFile("policies/counter.onnx.textproto", _UNKNOWN_CONTRIB_OP)),
             "pipeline.workflow.components.counter.implementation.artifact",
             "com.microsoft operator ONNX Runtime does not define"),
    Mutation("C125", "kv_decoder",
             (Set((*COMP, "counter", "implementation", "artifact"), "policies/counter.onnx.textproto"),
              WriteFile("policies/counter.onnx.textproto", _CONTRIB_EXTRA_ATTRIBUTE)),
             "pipeline.workflow.components.counter.implementation.artifact",
             "com.microsoft operator given an attribute it does not define"),
    # each graph below breaks one thing ONNX Runtime checks against its contrib schema when it
    # builds a session (ONNX Runtime 1.32 refuses each; tests/test_ort_operators.py)
    Mutation("C125", "kv_decoder", _counter(_contrib_counter(_ms("Gelu", ["count"]))), COUNTER,
             "com.microsoft operand of a type its constraint does not allow"),
    Mutation("C125", "kv_decoder",
             _counter(_contrib_counter(_ms("Range", ["count", "limit"]),
                                       initializers=[_scalar("limit", onnx.TensorProto.INT32, 3)])),
             COUNTER, "com.microsoft operands of one type parameter bound to two types"),
    Mutation("C125", "kv_decoder", _counter(_contrib_counter(_ms("Range", ["count", ""]))), COUNTER,
             "com.microsoft required operand left empty"),
    Mutation("C125", "kv_decoder", _counter(_contrib_counter(_ms("Range", ["count"] * 4))), COUNTER,
             "com.microsoft operator given more operands than it takes"),
    Mutation("C125", "kv_decoder",
             _counter(_contrib_counter(_ms("QLinearConcat", ["y_scale", "y_zero", *_TRIPLE, "count",
                                                             "x_scale", "x_zero"], axis=0),
                                       initializers=_QLINEAR)),
             COUNTER, "com.microsoft variadic operand of a type its constraint does not allow"),
    Mutation("C125", "kv_decoder",
             _counter(_contrib_counter(_ms("QLinearConcat", ["y_scale", "y_zero", *_TRIPLE], axis=0.0),
                                       initializers=_QLINEAR)),
             COUNTER, "com.microsoft attribute of another type than declared"),
    Mutation("C125", "kv_decoder",
             _counter(_contrib_counter(_ms("QLinearConcat", ["y_scale", "y_zero", *_TRIPLE]),
                                       initializers=_QLINEAR)),
             COUNTER, "com.microsoft required attribute missing"),
    Mutation("C125", "kv_decoder",
             _counter(_contrib_counter(
                 onnx.helper.make_node("SequenceConstruct", ["count"], ["sequence"]),
                 _ms("Gelu", ["sequence"]))),
             COUNTER, "com.microsoft operand given a sequence"),
    Mutation("C125", "kv_decoder",
             _counter(_contrib_counter(onnx.helper.make_node("Optional", ["count"], ["maybe"]),
                                       _ms("Gelu", ["maybe"]))),
             COUNTER, "com.microsoft operand given an optional"),
    Mutation("C125", "kv_decoder",
             _counter(_contrib_counter(
                 onnx.helper.make_node("Cast", ["count"], ["real"], to=onnx.TensorProto.FLOAT),
                 _ms("Gelu", ["real"])).replace(
                 b'graph {\n',
                 b'graph {\n  value_info { name: "extra" type { sparse_tensor_type { elem_type: 1 } } }\n',
                 1)),
             COUNTER, "com.microsoft output declared a sparse tensor"),
    Mutation("C125", "kv_decoder", _counter(_contrib_counter(ms_version=2)), COUNTER,
             "com.microsoft imported beyond its newest version"),
    Mutation("C125", "kv_decoder",
             _counter(_contrib_counter(_ms("Range", ["count", "count"]), ms_version=0)), COUNTER,
             "com.microsoft operator imported at version 0, before its first"),
    Mutation("C125", "kv_decoder",
             _counter(_contrib_counter(onnx.helper.make_node("Steps", ["count"], ["extra"],
                                                             domain="local"),
                                       functions=[_steps_function("a", "")])),
             COUNTER, "function with a com.microsoft node missing a required operand"),
    Mutation("C125", "kv_decoder",
             _counter(_contrib_counter(*_in_branches(_ms("Range", ["count", ""])))), COUNTER,
             "com.microsoft node in a subgraph missing a required operand"),
    Mutation("C104", "lowered_decoder",
             (Set((*COMP, "decoder", "contract", "parameters", "artifact"), "undefined.onnx.textproto"),
              WriteFile("undefined.onnx.textproto", _UNDEFINED_OUTPUT_TYPE)),
             "pipeline.workflow.components.decoder.contract.parameters.artifact",
             "lowered decoder graph with an output of element type 0"),
    # C105: tensor data that disagrees with the declared type and dimensions
    Mutation("C105", "lowered_decoder",
             (Set((*COMP, "decoder", "contract", "parameters", "artifact"), "projector.onnx"),
              WriteFile("projector.onnx", _SHORT_LENGTH), WriteFile(_DATA, bytes(16))),
             "pipeline.workflow.components.decoder.contract.parameters.artifact",
             "lowered decoder graph with short external data"),
    Mutation("C105", "lora", (WriteFile("projector.onnx", _projector_outside_thrice()),),
             PROJECTOR, "short external data after three stored outside the package",
             also=("H74",)),
    Mutation("C105", "lora", (WriteFile("projector.onnx", _SHORT_LENGTH),),
             "pipeline.workflow.components.projector.implementation.artifact",
             "external data length 12 for 16 bytes"),
    Mutation("C105", "lora", (WriteFile("projector.onnx", _NO_LENGTH),),
             "pipeline.workflow.components.projector.implementation.artifact",
             "external data without a length"),
    Mutation("C105", "lora", (WriteFile("projector.onnx", _NO_LOCATION),),
             "pipeline.workflow.components.projector.implementation.artifact",
             "external data without a location"),
    Mutation("C105", "lora", _stored(location=_DATA, offset="-1", length="16"), PROJECTOR,
             "external data offset -1"),
    Mutation("C105", "lora", _stored(location=_DATA, offset="0", length="16.0"), PROJECTOR,
             "external data length 16.0"),
    Mutation("C105", "lora", _stored(location=_DATA, offset="0" * 21, length="16"), PROJECTOR,
             "external data offset of 21 digits"),
    Mutation("C105", "lora", _tensor(_dims(-2, -2)), PROJECTOR,
             "initializer of negative dimensions"),
    Mutation("C105", "lora", _tensor(_inline(raw=_IDENTITY_DATA[:12])), PROJECTOR,
             "inline raw data of 12 bytes for 16"),
    Mutation("C105", "lora", _tensor(_inline(floats=[1.0, 0.0, 1.0])), PROJECTOR,
             "inline float data of 3 values for 4"),
    Mutation("C105", "lora", _tensor(_as(onnx.TensorProto.INT8, [2, 2], "int32_data", [1, 0, 1])),
             PROJECTOR, "inline int8 data of 3 values for 4"),
    # C83: external data past the end of its file
    Mutation("C83", "lora", _stored(location=_DATA, offset="4", length="16"), PROJECTOR,
             "external data from offset 4 past the end of its 16 bytes"),
    # ---------------------------------------------------------------- C92 runtime contracts
    Mutation("C92", "lowered_decoder", (Delete((*DECODER, "contract", "parameters", "pad_token_id")),),
             "pipeline.workflow.components.decoder.contract.parameters", "decode parameter missing"),
    Mutation("C92", "lowered_decoder", (Set((*DECODER, "contract", "parameters", "chunk"), 4),),
             "pipeline.workflow.components.decoder.contract.parameters.chunk", "unknown parameter"),
    Mutation("C92", "lowered_decoder",
             (Set((*DECODER, "contract", "parameters", "artifact"), "../model.onnx"),),
             "pipeline.workflow.components.decoder.contract.parameters.artifact",
             "decoder artifact outside the package"),
    Mutation("C92", "lowered_decoder",
             (Set((*DECODER, "contract", "parameters", "logits_output"), "scores"),),
             "pipeline.workflow.components.decoder.contract.parameters",
             "decoder graph has no such output"),
    Mutation("C92", "lowered_decoder", (Delete((*DECODER, "ports", "inputs", "lengths")),
                                        *(Delete((*LOOP, *at, "inputs", "lengths"))
                                          for at in (("setup", 0), ("steps", 2)))),
             "pipeline.workflow.components.decoder.ports.inputs", "decode port missing"),
    Mutation("C92", "lowered_decoder",
             (Set((*DECODER, "contract", "parameters", "padding"), "center"),),
             "pipeline.workflow.components.decoder.contract.parameters.padding",
             "padding neither left nor right"),
    Mutation("C92", "lowered_decoder",
             (Set((*DECODER, "contract", "parameters", "token_input"), 5),),
             "pipeline.workflow.components.decoder.contract.parameters.token_input",
             "token input not a graph name"),
    Mutation("C92", "lowered_decoder",
             (Set((*DECODER, "contract", "parameters", "token_input"), "ids"),),
             "pipeline.workflow.components.decoder.contract.parameters",
             "decoder graph has no such token input"),
    Mutation("C92", "lowered_decoder",
             (Set((*DECODER, "contract", "parameters", "attention_mask_input"), "mask"),),
             "pipeline.workflow.components.decoder.contract.parameters",
             "decoder graph has no such attention mask input"),
    Mutation("C92", "lowered_decoder",
             (Set((*DECODER, "contract", "parameters", "position_ids_input"), "positions"),),
             "pipeline.workflow.components.decoder.contract.parameters",
             "decoder graph has no such position input"),
    Mutation("C92", "lowered_decoder", (WriteFile("model.onnx", b"not a graph"),),
             "pipeline.workflow.components.decoder.contract.parameters.artifact",
             "decoder artifact unreadable"),
    Mutation("C92", "lowered_decoder",
             (Rename((*DECODER, "ports", "inputs", "past_key_values.0.key"), "past_key"),
              Rename((*LOOP, "steps", 2, "inputs", "past_key_values.0.key"), "past_key"),
              Set((*SERVED_KV, "kv_0", "input"), "past_key")),
             "pipeline.workflow.components.decoder.ports.inputs.past_key",
             "KV input port the graph lacks"),
    Mutation("C92", "lowered_decoder",
             (Rename((*DECODER, "ports", "outputs", "present.0.key"), "present_key"),
              *(Rename((*LOOP, *at, "outputs", "present.0.key"), "present_key")
                for at in (("setup", 0), ("steps", 2))),
              Set((*SERVED_KV, "kv_0", "output"), "present_key")),
             "pipeline.workflow.components.decoder.ports.outputs.present_key",
             "KV output port the graph lacks"),
    Mutation("C92", "lowered_decoder",
             (Set((*DECODER, "ports", "inputs", "past_key_values.0.key", "dtype"), "float16"),),
             'pipeline.workflow.components.decoder.ports.inputs["past_key_values.0.key"].dtype',
             "KV input port of another dtype than the graph's",
             also=("D28",)),  # the cell it is bound to is the graph's dtype
    Mutation("C92", "lowered_decoder",
             (Set((*DECODER, "ports", "outputs", "present.0.value", "rank"), 3),
              Set((*DECODER, "ports", "outputs", "present.0.value", "shape"),
                  ["batch", 4, "total_sequence"])),
             'pipeline.workflow.components.decoder.ports.outputs["present.0.value"].rank',
             "KV output port of another rank than the graph's",
             also=("D33",)),  # the cell it updates is the graph's rank
    Mutation("C92", "lowered_decoder",
             (Set((*DECODER, "ports", "inputs", "past_extra"),
                  {"dtype": "float32", "rank": 4, "optional": True}),),
             "pipeline.workflow.components.decoder.ports.outputs",
             "KV ports that do not pair up"),
    Mutation("C92", "lowered_decoder",
             (Delete((*DECODER, "ports", "inputs", "max_new_tokens")),
              Delete((*LOOP, "setup", 0, "inputs", "max_new_tokens"))),
             "pipeline.workflow.components.decoder.ports.inputs",
             "capacity output without the max_new_tokens input"),
    # ---------------------------------------------------------------- C120/C121 continuous batch
    Mutation("C120", "lowered_decoder", (Delete((*LOOP, "steps", 3)),),
             "pipeline.workflow.components.batch", "batch component never invoked"),
    Mutation("C120", "lowered_decoder", (_SECOND_BATCH_INVOKE,),
             "pipeline.workflow.steps[0].steps[4]", "batch component invoked twice"),
    # ... where nothing is batched, so the missing serving section is not a batching fault
    Mutation("C120", "lowered_decoder",
             (_SECOND_BATCH_INVOKE, Delete(("pipeline", "workflow", "serving"))),
             "pipeline.workflow.steps[0].steps[4]",
             "batch component invoked twice, no serving section", also=("E47",)),
    Mutation("C120", "lowered_decoder",
             (Set((*LOOP, "setup", 1), {"kind": "invoke", "component": "batch",
                                        "inputs": {"active": "package.active",
                                                   "next_active": "package.active",
                                                   "accepted": "package.one_row"},
                                        "outputs": {"live": "setup.live",
                                                    "accepted_len": "setup.accepted_len"}}),
              Delete((*LOOP, "steps", 3))),
             "pipeline.workflow.steps[0].setup[1]", "batch component invoked in a loop's setup"),
    Mutation("C120", "lowered_decoder", (Set((*COMP, "batch_again"), _lowered_component("batch")),),
             "pipeline.workflow.components.batch_again", "two batch components"),
    Mutation("C121", "lowered_decoder",
             (Set((*COMP, "batch", "contract", "parameters", "max_slots"), 0),),
             "pipeline.workflow.components.batch.contract.parameters.max_slots",
             "no batch slots"),
    Mutation("C121", "lowered_decoder",
             (Set((*COMP, "batch", "contract", "parameters", "max_slots"), True),),
             "pipeline.workflow.components.batch.contract.parameters.max_slots",
             "batch slots given as a boolean"),
    Mutation("C121", "lowered_decoder",
             (Set((*COMP, "batch", "contract", "parameters", "max_slots"), 2.5),),
             "pipeline.workflow.components.batch.contract.parameters.max_slots",
             "a fractional number of batch slots"),
    Mutation("C92", "lowered_decoder",
             (Delete((*COMP, "batch", "contract", "parameters", "max_slots")),),
             "pipeline.workflow.components.batch.contract.parameters",
             "batch contract without max_slots"),
    # C20: an action's input role bound to an output port
    Mutation("C20", "speculative",
             (Set((*COMP, "grammar_commit", "contract", "bindings", "state"), "next_state"),),
             "pipeline.workflow.components.grammar_commit.contract.bindings.state",
             "input role bound to an output port"),
    # C23: cache-affecting state on request-aligned ports without a row scope
    Mutation("C23", "kv_decoder", (Set((*COMP, "sampler", "cache_affects_state"), ["grammar"]),),
             "pipeline.workflow.components.sampler.row_scope",
             "cache-affecting state without a row scope"),
)  # fmt: skip


# Valid edits: tensor data stored as the format allows, at the edge of what C83 and C105 refuse.
VARIANTS = (
    # an INT4 initializer of 3 values in its typed field, packed two to an entry of int32_data
    Variant("kv_decoder",
            _counter_graph(initializers=[onnx.helper.make_tensor(
                "packed", onnx.TensorProto.INT4, [3], [1, 2, -3])]),
            "INT4 initializer packed in its typed field"),
    # an unused Gemm leaving its operand C empty (optional since ONNX operator set 11; the
    # graph imports 21), com.microsoft imported first
    Variant("kv_decoder",
            _counter_graph([onnx.helper.make_node("Gemm", ["a", "a", ""], ["p"])],
                           [onnx.helper.make_tensor("a", onnx.TensorProto.FLOAT, [2, 2],
                                                    [1, 0, 0, 1])], ms_first=True),
            "optional operand left empty, another domain imported first"),
    Variant("kv_decoder", _counter(_OPSET_FIRST), "ONNX operator set 1, the first"),
    Variant("kv_decoder", (GrowFile("policies/sampler.onnx.textproto", 2**20),),
            "text-format graph of exactly 1 MiB (the limit)"),
    Variant("kv_decoder", (Set((*COMP, "counter", "row_scope"), {"axis": 0, "stateful": False}),),
            "row_scope on a component whose ports are all shared scalars"),
    # C25 asks a sequence role only of a component with attention state: a recurrent one owes none
    Variant("static_cache",
            (Set((*WF, "serving", "state_service", "groups", "cache", "kind"), "recurrent"),
             Delete((*COMP, "model", "ports", "roles", "input_ids"))),
            "lone model with recurrent state and no sequence role"),
    Variant("lora", _stored(location=_DATA, length="16"), "external data without an offset"),
    Variant("lora", _stored(location=_DATA, offset="0" * 20, length="16"),
            "external data offset of 20 digits"),
    Variant("lora", (*_stored(location=_DATA, offset="4", length="16"),
                     WriteFile(_DATA, b"\x00" * 4 + _IDENTITY_DATA)),
            "external data ending at the end of its file"),
    Variant("lora", (WriteFile("projector.onnx", _projector_constant()),),
            "external data in a Constant node attribute"),
    Variant("lora", (WriteFile("projector.onnx", _projector_contrib()),),
            "contrib operator with exactly its operands"),
    Variant("lora", (WriteFile("projector.onnx", _projector_default([3, 2])),),
            "initializer default of the input's fixed dimension (any batch)"),
    Variant("kv_decoder", _counter(_SPARSE_OF_32_MIB), "sparse constant of 32 MiB dense"),
    Variant("lora", (WriteFile("projector.onnx", _projector_with_bias()),),
            "an inline initializer beside an externally stored one"),
    Variant("lora", _tensor(_inline(raw=_IDENTITY_DATA)), "inline raw data"),
    Variant("lora", _tensor(_inline(floats=[1.0, 0.0, 0.0, 1.0])), "inline float data"),
    Variant("lora", _tensor(_as(onnx.TensorProto.FLOAT, [0, 2], "float_data", [])),
            "initializer of no elements"),
    Variant("lora", _tensor(_as(onnx.TensorProto.STRING, [2], "string_data", [b"a", b"b"])),
            "inline string initializer"),
    Variant("lora", _tensor(_as(onnx.TensorProto.COMPLEX64, [2], "float_data", [1.0, 0, 0, 1.0])),
            "inline complex64 initializer"),
    Variant("lora",
            _tensor(_as(onnx.TensorProto.COMPLEX128, [2], "double_data", [1.0, 0, 0, 1.0])),
            "inline complex128 initializer"),
    Variant("lora", _tensor(_as(onnx.TensorProto.INT8, [2, 2], "int32_data", [1, 0, 0, 1])),
            "inline int8 initializer"),
    Variant("kv_decoder",
            _counter(_NAMED.replace(b'domain: "" version: 21', b'domain: "" version: 1')),
            "graph of ONNX operator set 1"),
    # An operator newer than opset 1 in a graph that also imports the contrib domain at 1:
    # each domain's version is its own (the contrib import never lowers ONNX's).
    Variant("kv_decoder",
            _counter(_NAMED.replace(b'op_type: "Identity"', b'op_type: "BitwiseNot"')
                     + _MS_IMPORT),
            "graph importing the contrib domain at version 1"),
    # a graph input whose batch dimension is unknown: its rank is still 2
    Variant("lora", (WriteFile("projector.onnx", _projector_of_unnamed_batch()),),
            "graph input with a dimension neither fixed nor named"),
    # an ONNX operator's optional operands left empty (Clip without min and max)
    Variant("kv_decoder",
            _counter(_NAMED.replace(b'input: "count" output: "next" op_type: "Identity"',
                                    b'input: "count" input: "" input: "" output: "next" '
                                    b'op_type: "Clip"')),
            "operator with its optional operands left empty"),
    Variant("kv_decoder", _counter(_initializers_of_every_width()),
            "raw initializers of every element type at their exact byte lengths"),
    # contrib operators at the edges of their schemas, each of which ONNX Runtime builds
    Variant("kv_decoder", _counter(_contrib_counter(_ms("Range", ["count", "count", ""]))),
            "contrib operator with its optional operand left empty"),
    Variant("kv_decoder",
            _counter(_contrib_counter(_ms("QLinearConcat", ["y_scale", "y_zero", *_TRIPLE, *_TRIPLE],
                                          axis=0),
                                      initializers=_QLINEAR)),
            "contrib operator with several values in its variadic operand"),
    # a variadic operand's values may be left empty (ONNX Runtime checks only single ones)
    Variant("kv_decoder",
            _counter(_contrib_counter(_ms("QLinearConcat", ["y_scale", "y_zero", "x", "", "x_zero"],
                                          axis=0),
                                      initializers=_QLINEAR)),
            "contrib operator with an empty value in its variadic operand"),
    Variant("kv_decoder",
            _counter(_contrib_counter(_ms("Range", ["count", "count"], __reserved=1))),
            "contrib operator with an attribute name reserved to ONNX Runtime"),
    Variant("kv_decoder",
            _counter(_contrib_counter(onnx.helper.make_node("Steps", ["count"], ["extra"],
                                                            domain="local"),
                                      functions=[_steps_function("a", "a")])),
            "function whose contrib node is valid"),
    Variant("kv_decoder", _counter(_contrib_counter(*_in_branches(_ms("Range", ["count", "count"])))),
            "contrib operator in a subgraph"),
    Variant("kv_decoder",
            _counter(_contrib_counter(
                onnx.helper.make_node("Cast", ["count"], ["real"], to=onnx.TensorProto.FLOAT),
                _ms("QuickGelu", ["real"]))),
            "contrib operator without its optional attribute"),
    # value_info may name no value (ONNX's checker and ONNX Runtime ignore it): an operand left
    # empty is not that entry's value
    Variant("kv_decoder",
            _counter(_contrib_counter(_ms("Range", ["count", "count", ""])).replace(
                b'graph {\n', b'graph {\n  value_info { name: "" type { tensor_type { elem_type: 1 } } }\n',
                1)),
            "contrib operator with an empty operand and value_info of no name"),
    # ai.onnx is ONNX's default domain spelled out
    Variant("kv_decoder", _counter(_NAMED.replace(b'domain: "" version: 21', b'domain: "ai.onnx" version: 21')),
            "graph importing ONNX operators as ai.onnx"),
    # C18 from the valid side: the manifest may pin a supported adapter ABI that no component
    # uses (only an unsupported pin is refused)
    Variant("kv_decoder",
            (Set(("pipeline", "workflow", "manifest", "adapter_abis"), {"onnx-genai.telemetry": "1"}),),
            "supported adapter ABI pinned but unused"),
    # C121 from the valid side: one slot is a batch (requests are served one at a time)
    Variant("lowered_decoder", (Set((*COMP, "batch", "contract", "parameters", "max_slots"), 1),),
            "one batch slot"),
)  # fmt: skip
