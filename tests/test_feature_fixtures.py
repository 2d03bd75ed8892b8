"""The feature fixtures (``fixtures/generators/features.py``): each package is small, valid and
declares exactly the capabilities its structure derives; every run case gives exactly its
hand-computed expectation under both executors; batched rows equal solo runs where the case
says so; plus the behaviour a run case cannot express (refusal before the component runs,
session isolation and reset, presence enforced at load)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import yaml

from conformance.cases.run_cases import SESSION_ACTIONS
from conformance.protocol import Refused
from conformance.runtimes.reference import ReferenceRuntime
from fixtures import package_path
from fixtures.generators import features
from reference_runtime import Engine, PackageError, RunError
from reference_runtime.package import load_package

# every test here runs under the compiled interpreter and the plain one
pytestmark = pytest.mark.usefixtures("interpreter_mode")

EXECUTORS = ("ort", "native")
PACKAGES = sorted(features.GENERATORS)
CASES = features.RUN_CASES

_ENGINES: dict[tuple[str, str], Engine] = {}


def engine_for(package: str, executor: str) -> Engine:
    """One engine per (package, executor), shared by the run-case tests (each case opens its
    own sessions). Tests that read counters load their own."""
    key = (package, executor)
    if key not in _ENGINES:
        _ENGINES[key] = Engine.from_dir(package_path(package), executor=executor)
    return _ENGINES[key]


# ------------------------------------------------------------------ running a case


def run_request(engine: Engine, request: dict, session: dict) -> dict:
    """One request under the run-case conventions: ``session_id: "new"`` opens a session kept
    in ``session`` for later ``"same"`` requests; a ``session_action`` resets or closes it; a
    refusal is ``{"error": code}``."""
    sid = request.get("session_id")
    if sid == "new":
        session["id"] = engine.create_session()
        sid = session["id"]
    elif sid == "same":
        sid = session["id"]
    runtime = ReferenceRuntime()  # the conformance suite's in-process adapter
    action = request.get("session_action")
    try:
        if action is not None:  # reset or close the session: not a run
            getattr(runtime, SESSION_ACTIONS[action])(engine, sid)
            return {}
        return runtime.run(engine, {**request, "session_id": sid})
    except Refused as exc:
        return {"error": exc.code, "message": exc.message}


def assert_array(got, want, where: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype}, expected {want.dtype}"
    assert got.shape == want.shape, f"{where}: shape {got.shape}, expected {want.shape}"
    np.testing.assert_array_equal(got, want, err_msg=where)


def assert_value(got, want, where: str) -> None:
    """A dense array, or a per-row list of arrays / None."""
    if isinstance(want, list):
        assert isinstance(got, list), f"{where}: expected per-row output, got {type(got)}"
        assert len(got) == len(want), f"{where}: {len(got)} rows, expected {len(want)}"
        for r, (g, w) in enumerate(zip(got, want, strict=True)):
            if w is None:
                assert g is None, f"{where} row {r}: expected nothing published"
            else:
                assert g is not None, f"{where} row {r}: published nothing"
                assert_array(g, w, f"{where} row {r}")
        return
    assert not isinstance(got, list), f"{where}: expected a dense output, got per-row"
    assert_array(got, want, where)


def assert_result(got: dict, want: dict, where: str) -> None:
    if "error" in want:
        assert got.get("error") == want["error"], (
            f"{where}: expected refusal {want['error']}, got "
            + (f"{got['error']}: {got.get('message')}" if "error" in got else "a result")
        )
        return
    assert "error" not in got, f"{where}: refused {got['error']}: {got.get('message')}"
    if "outputs" in want:  # every published output is listed, no more
        assert sorted(got["outputs"]) == sorted(want["outputs"]), f"{where}: outputs"
        for name, value in want["outputs"].items():
            assert_value(got["outputs"][name], value, f"{where} output {name!r}")
    for key in ("tokens", "finish_reasons"):
        if key in want:
            assert got[key] == want[key], f"{where}: {key}"
    if "events" in want:
        assert sorted(got["events"]) == sorted(want["events"]), f"{where}: event outputs"
        for name, emissions in want["events"].items():
            assert len(got["events"][name]) == len(emissions), f"{where}: events of {name!r}"
            for k, (g, w) in enumerate(zip(got["events"][name], emissions, strict=True)):
                assert_array(g, w, f"{where} event {name!r}[{k}]")


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_run_case(case, executor):
    engine = engine_for(case.package, executor)
    session: dict = {}
    for i, request in enumerate(case.requests):
        got = run_request(engine, request, session)
        assert_result(got, case.expected(dict(request)), f"{case.id} [{executor}] request {i}")


# ------------------------------------------------------------------ rows


def batch_rows(package: str, request: dict) -> int:
    if request.get("prompt") is not None:
        return len(request["prompt"])
    inputs = load_package(package_path(package)).metadata.workflow.inputs
    for name, value in (request.get("inputs") or {}).items():
        axis = inputs[name].contract.request_axis
        if axis is not None:
            return int(np.asarray(value).shape[axis])
    return 1


def solo(engine: Engine, request: dict, row: int) -> dict:
    """Row ``row`` alone: its prompt row and its slice of every request-aligned input."""
    inputs = engine.package.metadata.workflow.inputs
    out = dict(request)
    if request.get("prompt") is not None:
        out["prompt"] = [list(request["prompt"][row])]
    out["inputs"] = {}
    for name, value in (request.get("inputs") or {}).items():
        axis = inputs[name].contract.request_axis
        out["inputs"][name] = value if axis is None else np.take(value, [row], axis=axis)
    return out


def row_of(engine: Engine, output: str, value, row: int):
    """Row ``row`` of an output value (a shared output is the same for every row)."""
    if isinstance(value, list):
        return [value[row]]
    axis = engine.package.metadata.workflow.outputs[output].contract.request_axis
    return value if axis is None else np.take(value, [row], axis=axis)


ROW_CASES = [
    c for c in CASES if c.rows_independent and any(batch_rows(c.package, r) > 1 for r in c.requests)
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case", ROW_CASES, ids=lambda c: c.id)
def test_batched_rows_equal_solo_runs(case, executor):
    engine = engine_for(case.package, executor)
    for i, request in enumerate(case.requests):
        n = batch_rows(case.package, request)
        if n < 2:
            continue
        batched = run_request(engine, request, {})
        assert "error" not in batched
        for r in range(n):
            alone = run_request(engine, solo(engine, request, r), {})
            where = f"{case.id} [{executor}] request {i} row {r}"
            assert sorted(alone["outputs"]) == sorted(batched["outputs"]), where
            for name, value in batched["outputs"].items():
                assert_value(row_of(engine, name, value, r), alone["outputs"][name], where)
            for name, emissions in batched["events"].items():
                for g, w in zip(emissions, alone["events"][name], strict=True):
                    assert_value(row_of(engine, name, g, r), w, f"{where} event {name!r}")


# ------------------------------------------------------------------ packages


@pytest.mark.parametrize("name", PACKAGES)
def test_package_is_small_valid_and_runs_on_both_executors(name):
    root = package_path(name)
    size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    assert size < 100_000, f"{name} is {size} bytes"
    package = load_package(root)
    onnx_components = [
        n for n, c in package.metadata.workflow.components.items()
        if c.implementation.kind == "onnx"
    ]  # fmt: skip
    for executor in EXECUTORS:
        engine = Engine.from_dir(root, executor=executor)
        assert engine.counters["sessions_created"] == {executor: len(onnx_components)}
    assert any(c.package == name for c in CASES), f"{name} has no run case"


def _copy_with(tmp_path, name: str, edit) -> object:
    """A copy of package ``name`` whose document ``edit`` changed."""
    root = tmp_path / name
    shutil.copytree(package_path(name), root)
    path = root / "inference_metadata.yaml"
    document = yaml.safe_load(path.read_text())
    edit(document)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return root


@pytest.mark.parametrize("name", PACKAGES)
def test_manifest_lists_exactly_the_derived_capabilities(tmp_path, name):
    """The package loads (nothing derived is missing) and dropping any listed capability is
    refused with H72 (nothing listed is superfluous)."""
    document = yaml.safe_load((package_path(name) / "inference_metadata.yaml").read_text())
    listed = document["pipeline"]["workflow"]["manifest"]["capabilities"]
    assert len(set(listed)) == len(listed)
    for capability in listed:

        def drop(doc, capability=capability):
            doc["pipeline"]["workflow"]["manifest"]["capabilities"].remove(capability)

        with pytest.raises(PackageError) as err:
            load_package(_copy_with(tmp_path / capability, name, drop))
        assert err.value.codes == ["H72"], str(err.value)
        assert repr(capability) in str(err.value)


def test_generators_are_the_committed_packages(tmp_path):
    from fixtures.generators.common import sha256, write_package

    for name, generator in features.GENERATORS.items():
        files = write_package(generator(), tmp_path / name)
        fresh = {f.relative_to(tmp_path / name).as_posix(): sha256(f) for f in files}
        committed = {
            f.relative_to(package_path(name)).as_posix(): sha256(f)
            for f in package_path(name).rglob("*")
            if f.is_file()
        }
        assert fresh == committed, f"run python tools/generate_fixtures.py ({name})"


# ------------------------------------------------------------------ scatter_cache


@pytest.mark.parametrize("executor", EXECUTORS)
def test_scatter_refusal_comes_before_the_component_runs(executor):
    engine = Engine.from_dir(package_path("scatter_cache"), executor=executor)
    with pytest.raises(RunError) as err:
        engine.run(
            prompt=[[5]],
            inputs={"start": np.array([4], np.int64), "budget": np.array([1], np.int64)},
        )
    assert err.value.code == "E56"
    assert "'cache'" in err.value.message and "4" in err.value.message
    invocations = engine.counters["invocations"]
    assert "step" not in invocations  # the scatter writer never ran
    assert invocations["gate"] == {executor: 1}  # the loop setup did


@pytest.mark.parametrize("executor", EXECUTORS)
def test_scatter_logical_prefixes_do_not_depend_on_the_batch(executor):
    """Past its length an inactive row's buffer holds the batch's later writes (the group is
    never merged back), but its valid prefix and length equal the row run alone."""
    engine = engine_for("scatter_cache", executor)
    case = next(c for c in CASES if c.id == "scatter_cache/rows_at_their_own_cursors")
    (request,) = case.requests
    batched = run_request(engine, request, {})
    for r in range(len(request["prompt"])):
        alone = run_request(engine, solo(engine, request, r), {})
        assert_value(batched["outputs"]["valid"][r], alone["outputs"]["valid"][0], f"row {r}")
        assert batched["outputs"]["lengths"][r] == alone["outputs"]["lengths"][0]
    # ...while the raw buffers differ exactly where the expectation says they do
    assert batched["outputs"]["cache"][1].tolist() == [0, 0, 7, 8]
    assert run_request(engine, solo(engine, request, 1), {})["outputs"]["cache"][0].tolist() == [
        0,
        0,
        7,
        0,
    ]


# ------------------------------------------------------------------ branching and loops


@pytest.mark.parametrize("executor", EXECUTORS)
def test_only_the_taken_cases_run(executor):
    engine = Engine.from_dir(package_path("branching"), executor=executor)
    engine.run(prompt=[[1, 2]], inputs={"negate": np.array(True), "mode": np.array([0], np.int64)})
    assert engine.counters["invocations"] == {"negate": {executor: 1}, "add10": {executor: 1}}
    engine.run(prompt=[[1, 2]], inputs={"negate": np.array(False), "mode": np.array([3], np.int64)})
    assert engine.counters["invocations"] == {
        "negate": {executor: 1},
        "add10": {executor: 1},
        "copy": {"binding": 1},
        "square": {executor: 1},
    }


@pytest.mark.parametrize("executor", EXECUTORS)
def test_inner_setup_runs_once_per_outer_pass(executor):
    engine = Engine.from_dir(package_path("nested_loops"), executor=executor)
    engine.run(inputs={"x": np.array([[1]], np.int64)}, max_new_tokens=4)
    invocations = engine.counters["invocations"]
    assert invocations["begin"] == {executor: 4}  # one setup per outer pass
    assert invocations["double"] == {executor: 8}  # two inner bodies per pass
    assert engine.counters["loop_iterations"] == 4 + 8


# ------------------------------------------------------------------ presence


def test_optional_input_read_outside_its_presence_case_is_refused(tmp_path):
    def read_in_false_case(doc):
        branch = doc["pipeline"]["workflow"]["steps"][1]
        branch["cases"]["false"] = {
            "kind": "invoke",
            "component": "add",
            "inputs": {"a": "combined", "b": "offset"},
            "outputs": {"c": "without_offset"},
        }

    with pytest.raises(PackageError) as err:
        load_package(_copy_with(tmp_path, "broadcast_and_presence", read_in_false_case))
    assert "B13" in err.value.codes


# ------------------------------------------------------------------ sessions


@pytest.mark.parametrize("executor", EXECUTORS)
def test_sessions_are_isolated_and_reset(executor):
    engine = Engine.from_dir(package_path("session_counter"), executor=executor)

    def count(sid, **inputs):
        result = engine.run(inputs=inputs, session_id=sid)
        return int(result.outputs["count"][0])

    a, b = engine.create_session(), engine.create_session()
    assert [count(a), count(a)] == [1, 2]
    assert count(b) == 1  # a second session starts over...
    assert count(a) == 3  # ...and leaves the first alone
    engine.reset_session(a)
    assert count(a) == 1  # back to the start
    assert count(b, step=np.array([10], np.int64)) == 11
    engine.close_session(a)
    with pytest.raises(RunError) as err:
        engine.run(session_id=a)
    assert err.value.code == "E58"
