"""The native executor against the ONNX backend node cases: every case whose op types it
implements must pass (or be listed, with a reason, in native_node_exclusions.yaml)."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from reference_runtime.executors.native.graph import plan_model
from tests.native_node_cases import (
    MIN_CORPUS,
    applicable,
    corpus,
    data_sets,
    exclusions,
    refusal_reason,
    refused_patterns,
)

CASES = applicable()


def test_the_node_corpus_did_not_collapse():
    assert len(corpus()) >= MIN_CORPUS, "the onnx node-test corpus is (nearly) empty"


def test_every_exclusion_names_a_running_case_and_gives_a_reason():
    names = {c.name for c in CASES}
    for name, reason in exclusions().items():
        assert name in names, f"exclusion {name!r} matches no case that runs"
        assert isinstance(reason, str) and len(reason) > 10, f"exclusion {name!r} needs a reason"
    for pattern, reason in refused_patterns().items():
        assert any(re.fullmatch(pattern, n) for n in names), f"{pattern!r} matches no case"
        assert isinstance(reason, str) and len(reason) > 10, f"{pattern!r} needs a reason"


def run_case(case):
    plan, problems = plan_model(case.model, np)
    if problems:
        reasons = "; ".join(f"{p.node}: {p.reason}" for p in problems)
        raise AssertionError(f"refused: {reasons}")
    for inputs, expected in data_sets(case):
        feeds = dict(zip(plan.inputs, inputs, strict=False))
        got = plan.run(feeds)
        for name, want in zip(plan.outputs, expected, strict=True):
            have = got[name]
            assert have.dtype == want.dtype, f"{name}: dtype {have.dtype}, expected {want.dtype}"
            assert have.shape == want.shape, f"{name}: shape {have.shape}, expected {want.shape}"
            if want.dtype.kind in "fc" or want.dtype == ml_dtypes.bfloat16:
                np.testing.assert_allclose(
                    have.astype(np.float64), want.astype(np.float64),
                    rtol=case.rtol, atol=case.atol, equal_nan=True, err_msg=name,
                )  # fmt: skip
            else:
                np.testing.assert_array_equal(have, want, err_msg=name)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_node_case(case):
    if refusal_reason(case.name) is not None:
        _, problems = plan_model(case.model, np)
        assert problems, f"{case.name} should be refused at load ({refusal_reason(case.name)})"
        return
    reason = exclusions().get(case.name)
    if reason is None:
        run_case(case)
        return
    try:
        run_case(case)
    except AssertionError:
        pytest.xfail(reason)
    pytest.fail(f"{case.name} is excluded ({reason}) but passes: remove the exclusion")


REQUIRED = [
    "Add",
    "And",
    "ArgMax",
    "Attention",
    "BitShift",
    "BitwiseOr",
    "BitwiseXor",
    "Cast",
    "CastLike",
    "Clip",
    "Concat",
    "Constant",
    "ConstantOfShape",
    "Cos",
    "CumSum",
    "Div",
    "Equal",
    "Expand",
    "Gather",
    "GatherElements",
    "Greater",
    "GreaterOrEqual",
    "Identity",
    "IsInf",
    "IsNaN",
    "Less",
    "LessOrEqual",
    "Log",
    "MatMul",
    "Max",
    "Min",
    "Mod",
    "Mul",
    "Neg",
    "Not",
    "OneHot",
    "Or",
    "Pad",
    "RMSNormalization",
    "Range",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSum",
    "Reshape",
    "RotaryEmbedding",
    "ScatterElements",
    "ScatterND",
    "Shape",
    "Sin",
    "Slice",
    "Softmax",
    "Sqrt",
    "Squeeze",
    "Sub",
    "Swish",
    "Tanh",
    "Tile",
    "TopK",
    "Transpose",
    "Unsqueeze",
    "Where",
    "ArgMin",
    "Gemm",
    "Erf",
    "Gelu",
    "Relu",
    "Sigmoid",
    "Exp",
    "Pow",
    "Reciprocal",
    "LayerNormalization",
    "Split",
    "Trilu",
    "Flatten",
    "Sum",
    "Mean",
    "If",
    "Loop",
    "Scan",
]
REQUIRED_MS = [
    "GroupQueryAttention",
    "MatMulNBits",
    "RotaryEmbedding",
    "SkipSimplifiedLayerNormalization",
    "SkipLayerNormalization",
]


def test_every_required_op_has_a_kernel():
    from reference_runtime.executors.native.registry import implemented

    have = set(implemented())
    missing = [op for op in REQUIRED if ("", op) not in have]
    missing += [f"com.microsoft::{op}" for op in REQUIRED_MS if ("com.microsoft", op) not in have]
    assert ("", "SimplifiedLayerNormalization") in have
    assert not missing, missing


def test_enough_node_cases_run():
    # A tripwire: the applicable set only grows as kernels are added (1332 with onnx 1.23).
    assert len(CASES) >= 1300, f"only {len(CASES)} node cases apply to the native executor"
