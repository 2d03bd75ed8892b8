"""C125: operators held to ONNX Runtime's own schemas, so that what validates also builds.

ONNX's checker does not know ONNX Runtime's contrib operators (``com.microsoft``): a misspelled
contrib operator, or one given an attribute it does not define, passed validation and then
failed when ONNX Runtime built the session. Each graph here is also handed to ONNX Runtime
itself: validation refuses exactly the graphs it cannot build.
"""

from __future__ import annotations

import shutil

import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

from fixtures import package_path
from reference_runtime.engine import Engine
from reference_runtime.errors import PackageError
from reference_runtime.package import validate_package
from reference_runtime.package.ort_operators import ort_operator_problem
from tests import hostile

MS = "com.microsoft"
ARTIFACT = "pipeline.workflow.components.model.implementation.artifact"


def _skip_norm(model: onnx.ModelProto, **changes) -> None:
    """kv_decoder's logits through ONNX Runtime's contrib SkipLayerNormalization (``changes``
    edit that node: ``op_type``, extra ``attributes``)."""
    graph = model.graph
    node = next(n for n in graph.node if n.output[0] == "logits")
    gamma = helper.make_tensor("gamma", TensorProto.FLOAT, [4], [1.0] * 4)
    graph.initializer.append(gamma)
    skip = helper.make_node(
        changes.get("op_type", "SkipLayerNormalization"),
        [node.input[0], node.input[0], "gamma"],
        ["logits"],
        name="skip_norm",
        domain=MS,
        epsilon=1e-5,
        **changes.get("attributes", {}),
    )
    graph.node.remove(node)
    graph.node.insert(0, skip)
    model.opset_import.append(helper.make_opsetid(MS, 1))


def _package(tmp_path, **changes):
    root = tmp_path / "pkg"
    shutil.copytree(package_path("kv_decoder"), root)
    path = root / "model.onnx"
    model = hostile.load_graph(path)
    _skip_norm(model, **changes)
    hostile.save_graph(path, model)
    return root


def test_a_contrib_operator_onnx_runtime_defines_validates_and_builds(tmp_path):
    root = _package(tmp_path)
    assert validate_package(root) == []
    Engine.from_dir(root)
    Engine.from_dir(root, executor="native")


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        (
            {"op_type": "SkipLayerNorm"},
            ["'skip_norm'", "com.microsoft::SkipLayerNorm", "defines no operator"],
        ),
        (
            {"attributes": {"axis": -1}},
            [
                "'skip_norm'",
                "com.microsoft::SkipLayerNormalization",
                "attribute 'axis'",
                "it defines: epsilon",
            ],
        ),
    ],  # fmt: skip
    ids=["renamed-operator", "extra-attribute"],
)
def test_what_onnx_runtime_cannot_build_is_refused_at_validation(tmp_path, changes, said):
    """The two shapes the fuzz tool found: validated, then refused by ONNX Runtime."""
    root = _package(tmp_path, **changes)
    violations = validate_package(root)
    assert [(v.code, v.location) for v in violations] == [("C125", ARTIFACT)], violations
    for words in said:
        assert words in violations[0].message, violations[0].message
    assert "ONNX Runtime" in violations[0].hint
    for executor in ("ort", "native"):  # the engine refuses it with the same code
        with pytest.raises(PackageError) as refused:
            Engine.from_dir(root, executor=executor)
        assert [v.code for v in refused.value.violations] == ["C125"]


def _model(nodes, inputs, outputs, imports, functions=(), initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    opsets = [helper.make_opsetid(d, v) for d, v in imports]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10, functions=functions)


def _float(name, dims=(2, 3, 4)):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(dims))


def _int64(name, dims=(2, 3, 4)):
    return helper.make_tensor_value_info(name, TensorProto.INT64, list(dims))


_ONNX = ("", 21)
_MS1 = (MS, 1)
_GAMMA = helper.make_tensor("gamma", TensorProto.FLOAT, [4], [1.0] * 4)


def _skip(inputs=("x", "x", "gamma"), outputs=("y",), op="SkipLayerNormalization", **attrs):
    return helper.make_node(op, list(inputs), list(outputs), domain=MS, **attrs)


def _gqa(**attrs):
    names = ["q", "k", "v", "", "", "seqlens", "total"]
    return helper.make_node("GroupQueryAttention", names, ["y"], domain=MS, **attrs)


_GQA_INPUTS = [
    _float("q", (1, 2, 8)),
    _float("k", (1, 2, 8)),
    _float("v", (1, 2, 8)),
    helper.make_tensor_value_info("seqlens", TensorProto.INT32, [1]),
    helper.make_tensor_value_info("total", TensorProto.INT32, []),
]


def _with_attribute(node, name, type_):
    attr = node.attribute.add()
    attr.name, attr.type = name, type_
    return node


def _function_model():
    body = helper.make_node("Relu", ["a"], ["b"])
    function = helper.make_function(
        "vendor.ops", "MyRelu", ["a"], ["b"], [body], [helper.make_opsetid("", 21)]
    )
    node = helper.make_node("MyRelu", ["x"], ["y"], domain="vendor.ops")
    return _model([node], [_float("x")], [_float("y")], [_ONNX, ("vendor.ops", 1)], [function])


CASES = {
    # name: (model, what the refusal says, or None when the graph builds)
    "skip_norm": (
        _model([_skip()], [_float("x")], [_float("y")], [_ONNX, _MS1], initializers=[_GAMMA]),
        None,
    ),
    "unknown_contrib_op": (
        _model([_skip(op="NoSuchOp")], [_float("x")], [_float("y")], [_ONNX, _MS1],
               initializers=[_GAMMA]),
        "defines no operator 'NoSuchOp' in domain 'com.microsoft'",
    ),
    "onnx_op_in_contrib_domain": (
        _model([helper.make_node("Relu", ["x"], ["y"], domain=MS)], [_float("x")],
               [_float("y")], [_ONNX, _MS1]),
        "defines no operator 'Relu' in domain 'com.microsoft'",
    ),
    "unknown_attribute": (
        _model([_skip(axis=1)], [_float("x")], [_float("y")], [_ONNX, _MS1],
               initializers=[_GAMMA]),
        "attribute 'axis' is not one the operator defines",
    ),
    "attribute_of_another_type": (
        _model([_skip(epsilon=1)], [_float("x")], [_float("y")], [_ONNX, _MS1],
               initializers=[_GAMMA]),
        "attribute 'epsilon' is INT; the operator declares it FLOAT",
    ),
    "attribute_without_its_value": (  # ONNX Runtime builds it (the value is the default)
        _model([_with_attribute(_skip(), "epsilon", onnx.AttributeProto.FLOAT)], [_float("x")],
               [_float("y")], [_ONNX, _MS1], initializers=[_GAMMA]),
        None,
    ),
    "required_attribute_missing": (
        _model([_gqa(num_heads=2)], _GQA_INPUTS, [_float("y", (1, 2, 8))], [_ONNX, _MS1]),
        "required attribute 'kv_num_heads' is missing",
    ),
    "gqa": (
        _model([_gqa(num_heads=2, kv_num_heads=2)], _GQA_INPUTS, [_float("y", (1, 2, 8))],
               [_ONNX, _MS1]),
        None,
    ),
    "too_few_inputs": (
        _model([_skip(inputs=("x", "x"))], [_float("x")], [_float("y")], [_ONNX, _MS1]),
        "it has 2 input(s); the operator takes 3 to 5",
    ),
    "required_input_empty": (
        _model([_skip(inputs=("x", "", "gamma"))], [_float("x")], [_float("y")], [_ONNX, _MS1],
               initializers=[_GAMMA]),
        "its required input 'skip' is empty",
    ),
    "input_type_not_allowed": (
        _model([_skip(inputs=("x", "x", "x"))], [_int64("x")], [_int64("y")], [_ONNX, _MS1]),
        "input 'input' ('x') is tensor(int64); the operator allows",
    ),
    "inputs_bound_to_one_type_differ": (
        _model([_skip(inputs=("x", "h", "gamma"))], [_float("x"),
               helper.make_tensor_value_info("h", TensorProto.FLOAT16, [2, 3, 4])],
               [_float("y")], [_ONNX, _MS1], initializers=[_GAMMA]),
        "is tensor(float16) but 'x' is tensor(float)",
    ),
    "contrib_opset_2": (
        _model([_skip()], [_float("x")], [_float("y")], [_ONNX, (MS, 2)],
               initializers=[_GAMMA]),
        "imports operator set com.microsoft at version 2",
    ),
    "ml_opset_6": (
        _model([helper.make_node("Relu", ["x"], ["y"])], [_float("x")], [_float("y")],
               [_ONNX, ("ai.onnx.ml", 6)]),
        "imports operator set ai.onnx.ml at version 6",
    ),
    "vendor_domain": (
        _model([helper.make_node("Fancy", ["x"], ["y"], domain="vendor.ops")], [_float("x")],
               [_float("y")], [_ONNX, ("vendor.ops", 1)]),
        "defines no operator 'Fancy' in domain 'vendor.ops'",
    ),
    "local_function": (_function_model(), None),
}  # fmt: skip


def _builds(model: onnx.ModelProto) -> bool:
    try:
        onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # whatever ONNX Runtime refuses the graph with
        return False
    return True


@pytest.mark.parametrize("name", sorted(CASES))
def test_refused_exactly_when_onnx_runtime_cannot_build_the_graph(name):
    model, said = CASES[name]
    onnx.checker.check_model(model)  # ONNX's checker passes every one of them
    problem = ort_operator_problem(model)
    if said is None:
        assert problem is None
    else:
        assert problem is not None and said in problem, problem
    assert _builds(model) == (problem is None)


def test_a_decode_contracts_graph_is_refused_with_the_graphs_own_code(tmp_path):
    """A bare decoder's graph (the decode contract's artifact) is held to the same rules and
    refused with C125 itself, not as a contract parameter problem (C92)."""
    root = tmp_path / "pkg"
    shutil.copytree(package_path("genai_decoder"), root)
    path = root / "model.onnx"
    model = hostile.load_graph(path)
    unused = helper.make_node(
        "Gelu", ["past_key_values.0.key"], ["unused"], name="gelu", domain=MS, approximate="tanh"
    )
    model.graph.node.append(unused)
    model.opset_import.append(helper.make_opsetid(MS, 1))
    hostile.save_graph(path, model)
    (violation,) = validate_package(root)
    assert violation.code == "C125", violation
    assert violation.location.endswith("decoder.contract.parameters.artifact")
    assert "'gelu' (com.microsoft::Gelu): attribute 'approximate'" in violation.message
    assert "ONNX Runtime" in violation.hint


def test_only_a_variadic_last_parameter_takes_more_operands_than_listed():
    """``_schema_problem`` reads an operand past the schema's parameters as its last one, which
    holds only when that one is variadic; the operand counts, checked first, keep it so."""
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    for schema in state.get_all_operator_schema():
        variadic = type(schema).FormalParameterOption.Variadic
        for params, most in (
            (schema.inputs, schema.max_input),
            (schema.outputs, schema.max_output),
        ):
            if most > len(params):
                assert params and params[-1].option == variadic, (schema.domain, schema.name)
