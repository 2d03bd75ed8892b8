"""The step visitor (``reference_runtime/package/visit.py``) reaches every nested step: a loop's
``setup`` as well as its body, a branch's ``default`` as well as its cases. The validator's
walks go through it, so a value defined, or a component invoked, only in a setup or a default
is seen by them."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import yaml

from fixtures import package_path
from reference_runtime.package import load_package, validate_package
from reference_runtime.package.docmodel import build
from reference_runtime.package.model import Step
from reference_runtime.package.rules import run_rules
from reference_runtime.package.rules.context import Ctx
from reference_runtime.package.rules.scope import Names
from reference_runtime.package.visit import (
    all_steps,
    all_steps_with_paths,
    child_steps,
    child_steps_with_paths,
    steps_with_paths,
)
from reference_runtime.support import REFERENCE_SUPPORT

STEPS = ("pipeline", "workflow", "steps")


def _invoke(component: str, value: str) -> dict:
    return {"kind": "invoke", "component": component, "outputs": {"out": value}}


LOOP = {
    "kind": "loop",
    "setup": [_invoke("prefill", "setup.value")],
    "steps": [_invoke("decode", "body.value")],
    "continue_when": "active",
    "max_iterations": "limit",
    "iteration": {"value": "loop.step", "contract": {"dtype": "int64", "rank": 0}},
}
BRANCH = {
    "kind": "branch",
    "predicate": "flag",
    "cases": {"true": _invoke("yes", "case.value")},
    "default": {"kind": "sequence", "steps": [_invoke("no", "default.value")]},
    "outputs": {"merged": {"cases": {"true": "case.value"}, "default": "default.value"}},
}


def _steps() -> tuple:
    return tuple(build(Step, raw) for raw in (LOOP, BRANCH))


def test_all_steps_yields_a_loops_setup_before_its_body_and_a_branchs_default_last():
    visited = [(step.kind, path) for step, path in all_steps_with_paths(_steps(), STEPS)]
    assert visited == [
        ("loop", (*STEPS, 0)),
        ("invoke", (*STEPS, 0, "setup", 0)),
        ("invoke", (*STEPS, 0, "steps", 0)),
        ("branch", (*STEPS, 1)),
        ("invoke", (*STEPS, 1, "cases", "true")),
        ("sequence", (*STEPS, 1, "default")),
        ("invoke", (*STEPS, 1, "default", "steps", 0)),
    ]
    components = [s.component for s in all_steps(_steps()) if s.kind == "invoke"]
    assert components == ["prefill", "decode", "yes", "no"]


def test_child_steps_and_their_paths_agree():
    for step in all_steps(_steps()):
        with_paths = list(child_steps_with_paths(step, ("x",)))
        assert child_steps(step) == tuple(child for child, _ in with_paths)
    loop, branch = _steps()
    assert [p for _, p in child_steps_with_paths(loop, ())] == [("setup", 0), ("steps", 0)]
    assert [p for _, p in child_steps_with_paths(branch, ())] == [("cases", "true"), ("default",)]


def test_collect_knows_values_defined_only_in_a_setup_or_a_default():
    names = Names(ctx=None)  # collecting reports nothing
    names.collect(steps_with_paths(_steps(), STEPS))
    assert names.later == {
        "setup.value": (*STEPS, 0, "setup", 0, "outputs", "out"),
        "loop.step": (*STEPS, 0, "iteration", "value"),
        "body.value": (*STEPS, 0, "steps", 0, "outputs", "out"),
        "case.value": (*STEPS, 1, "cases", "true", "outputs", "out"),
        "default.value": (*STEPS, 1, "default", "steps", 0, "outputs", "out"),
        "merged": (*STEPS, 1, "outputs", "merged"),
    }
    assert list(names.later) == [  # in the order the values come to be
        "setup.value",
        "loop.step",
        "body.value",
        "case.value",
        "default.value",
        "merged",
    ]


def _kv_decoder_with_a_default(tmp_path, edit=None):
    """kv_decoder, whose loop setup holds a branch; its ``false`` case becomes the default."""
    root = tmp_path / "kv_decoder"
    shutil.copytree(package_path("kv_decoder"), root)
    metadata = root / "inference_metadata.yaml"
    doc = json.loads(json.dumps(yaml.safe_load(metadata.read_text())))
    steps = doc["pipeline"]["workflow"]["steps"]
    branch = steps[0]["setup"][1]
    assert branch["kind"] == "branch"
    branch["default"] = branch["cases"].pop("false")
    for phi in branch["outputs"].values():
        phi["default"] = phi["cases"].pop("false")
    if edit is not None:
        edit(steps)
    metadata.write_text(yaml.safe_dump(doc, sort_keys=False))
    return root


def test_the_walk_counts_invokes_in_a_setup_and_in_a_default(tmp_path):
    package = load_package(_kv_decoder_with_a_default(tmp_path))
    ctx = Ctx(package.metadata, package.document, package.root, REFERENCE_SUPPORT)
    run_rules(ctx)
    assert ctx.violations == []
    flow = ctx.flow
    invoked = Counter(step.component for step in flow.invokes)
    assert invoked["bias_logits"] == 1  # in a case of the setup's branch
    assert invoked["copy_logits"] == 1  # in the default of the setup's branch
    assert invoked["model"] == 2  # once in the setup, once in the body
    decode_loop = flow.loops[0]
    assert {"model", "bias_logits", "copy_logits", "sampler"} <= decode_loop.components


def test_a_value_defined_only_in_a_setup_default_is_read_too_early_not_missing(tmp_path):
    def read_it_first(steps):
        steps.insert(
            0, {"kind": "emit", "value": "setup.plain", "output": "tokens", "mode": "append"}
        )

    violations = validate_package(_kv_decoder_with_a_default(tmp_path, read_it_first))
    messages = {v.message for v in violations if v.code == "D29"}
    assert messages == {
        "'setup.plain' is read before it is defined "
        "(at pipeline.workflow.steps[1].setup[1].default.outputs.logits)"
    }
