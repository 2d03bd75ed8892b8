"""The suite's newer cases have teeth: each runtime bug below, injected into the reference
runtime from outside (``unittest.mock.patch`` of the function its compiled or plain path really
calls), fails the named conformance case, and the same case passes without it.

Every bug here survived a full certification before its case existed: an emit ``when`` ignored
for rows the loop counts active, a loop bound allowed to name the loop's own carried cell,
session state stored by a run that then fails, a component output of the wrong dtype let through
by the compiled invoke, negative scatter destinations unchecked, artifact paths with ``..``
accepted when they resolve inside the package, a native executor running the components it
cannot run on ONNX Runtime, wrong native Cast / TopK / GatherElements kernels, and an ONNX
Runtime session created per invocation. Two more, found by mutation testing: executor counters
that count no invocation (the native executor's cases read them for ONNX Runtime invocations,
which such counters never show, so each component a run always invokes must be counted), a
served batch that runs the loop body once per request instead of once over the requests decoding
together (only the ``batch_counters`` cases see it; every request's results are unchanged), and
a validator that reports a broken rule only where the break makes the same rule fail again
elsewhere (only the ``rule_locations`` judge sees it), and one that also names a rule the
package does not break (only the ``exact_rule_codes`` judge sees it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import posixpath
import re
from unittest import mock

import numpy as np
import onnxruntime as ort
import pytest

from conformance.cases.catalogue import catalogue
from conformance.certify import certify
from conformance.runtimes.reference import ReferenceRuntime
from reference_runtime.counters import Counters
from reference_runtime.errors import ReferenceRuntimeError
from reference_runtime.executors.native import NativeExecutor, registry
from reference_runtime.executors.ort import OrtExecutor
from reference_runtime.package import artifacts, structure
from reference_runtime.package.rules import loops
from reference_runtime.package.rules.context import Ctx
from reference_runtime.sessions import SessionStore
from reference_runtime.workflow import compiled, interpreter, outputs
from reference_runtime.workflow.batching import BatchServer
from reference_runtime.workflow.interpreter import Interpreter

# ------------------------------------------------------------------ the bugs


def _when_ignored():
    """Per-row emits publish every row the loop counts active, whatever ``when`` says."""
    original = outputs._row_control

    def row_control(value, rows, what, where):
        return None if what == "when" else original(value, rows, what, where)

    return [mock.patch.object(outputs, "_row_control", row_control)]


def _bound_names_own_cell():
    """The validator resolves ``max_iterations`` where the loop's cells are visible (as it
    does ``continue_when``)."""
    original = loops._check_max_iterations

    def check(walk, step, scope, path, guards):
        if step.max_iterations in {carry.cell for carry in step.carried}:
            return None
        return original(walk, step, scope, path, guards)

    return [mock.patch.object(loops, "_check_max_iterations", check)]


def _partial_state_stored():
    """A run works on the session's stored values in place, and each loop writes its session
    cells back as it ends: a run that fails later leaves them advanced."""
    original_stored = SessionStore.stored
    original_loop = Interpreter.loop

    def stored(self, session_id):
        original_stored(self, session_id)  # its checks
        if session_id is None:
            return {}
        with self._lock:
            return self._get(session_id)

    def loop(self, step, frame):
        original_loop(self, step, frame)
        for carry in step.carried:
            if self.wf.state[carry.cell].scope == "session":
                frame.stored_session[carry.cell] = frame.values[carry.cell]

    return [
        mock.patch.object(SessionStore, "stored", stored),
        mock.patch.object(Interpreter, "loop", loop),
    ]


def _compiled_output_dtype_unchecked():
    """The compiled invoke compares the outputs' shapes but not their dtypes."""
    original = compiled._contract_lines
    dtype_test = re.compile(r"\(o\d+\.dtype is not DT\d+ and o\d+\.dtype != DT\d+\)")

    def contract_lines(var, contract, symbols, namespace, refuse):
        lines = original(var, contract, symbols, namespace, refuse)
        return [dtype_test.sub("False", line) for line in lines] if var[0] == "o" else lines

    return [mock.patch.object(compiled, "_contract_lines", contract_lines)]


def _negative_destinations_unchecked():
    """The scatter bounds check only the upper end of each write destination."""
    original = interpreter.check_scatter_bounds

    def check(groups, component, inputs, values, counters, where):
        seen = dict(inputs)
        for _, group in groups:
            port = group.update.write_indices_ports.get(component)
            if port in seen:
                seen[port] = np.maximum(np.asarray(seen[port]), 0)
        return original(groups, component, seen, values, counters, where)

    return [mock.patch.object(interpreter, "check_scatter_bounds", check)]


def _dotdot_inside_accepted():
    """Artifact paths are normalised first, so ``..`` is refused only when it escapes."""
    original = artifacts.confine

    def confine(root, relative):
        if ".." in relative.replace("\\", "/").split("/"):
            normal = posixpath.normpath(relative)
            if not normal.startswith(".."):
                relative = normal
        return original(root, relative)

    return [mock.patch.object(artifacts, "confine", confine)]


def _missing_ops_on_ort():
    """A component the native executor cannot run is loaded on ONNX Runtime instead."""
    original = NativeExecutor.load

    def load(self, component, artifact):
        try:
            return original(self, component, artifact)
        except ReferenceRuntimeError as exc:
            if exc.code != "H90":
                raise
            return OrtExecutor(self.device, self.counters).load(component, artifact)

    return [mock.patch.object(NativeExecutor, "load", load)]


def _kernel(op_type: str, wrong):
    """Replace the native executor's registered kernel of ``op_type`` (every version)."""
    registry.implemented()  # the kernels are registered
    table = registry._REGISTRY[("", op_type)]
    replaced = {v: dataclasses.replace(k, fn=wrong(k.fn), prepare=None) for v, k in table.items()}
    return [mock.patch.dict(table, replaced)]


def _cast_floors():
    def wrong(fn):
        def cast(node, x):
            if x.dtype.kind == "f":
                x = node.xp.floor(x)
            return fn(node, x)

        return cast

    return _kernel("Cast", wrong)


def _topk_ties_last_index_first():
    def wrong(fn):
        def top_k(node, x, k=None):
            xp = node.xp
            k = int(k.reshape(-1)[0])
            order = xp.argsort(x, axis=-1, kind="stable")[..., ::-1][..., :k].astype(xp.int64)
            return xp.take_along_axis(x, order, axis=-1), order

        return top_k

    return _kernel("TopK", wrong)


def _gather_negative_axis_as_zero():
    def wrong(fn):
        def gather_elements(node, data, indices):
            if node.attr("axis", 0) < 0:
                node = mock.Mock(wraps=node, xp=node.xp)
                node.attr = lambda name, default=None: 0
            return fn(node, data, indices)

        return gather_elements

    return _kernel("GatherElements", wrong)


def _session_per_invocation():
    """Every invocation of an ONNX Runtime component opens a fresh InferenceSession."""
    original = OrtExecutor.load

    def load(self, component, artifact):
        session = original(self, component, artifact)
        counters, provider = self.counters, self.provider

        def fresh(names, feeds, options):
            counters.sessions_created["ort"] += 1
            return ort.InferenceSession(str(artifact), providers=[provider]).run(names, feeds)

        session.binding = fresh
        return session

    return [mock.patch.object(OrtExecutor, "load", load)]


def _body_per_request():
    """A served batch runs the loop body once per request at every step, never over the
    requests decoding together (each request's results are still its solo run's)."""
    return [
        mock.patch.object(BatchServer, "_groups", lambda self, occupied: [[o] for o in occupied])
    ]


def _invocations_uncounted():
    """Components run, but the executor counters never count an invocation (counters that
    count nothing show no ONNX Runtime invocation either)."""
    return [mock.patch.object(Counters, "invoked", lambda self, component, executor: None)]


def _repeated_layer_unreported():
    """The validator never reports a layer repeated on a role; the key and value layers that
    then differ are still reported with the same code (E53), elsewhere."""
    original = Ctx.add

    def add(self, code, path, message, hint=None):
        if code != "E53" or "appears twice" not in message:
            original(self, code, path, message, hint)

    return [mock.patch.object(Ctx, "add", add)]


def _branch_arm_list_as_any_value():
    """The validator reads a branch case written as a list like any value of the wrong type:
    still A05 (the case's step is no list), and D35 as well (the branch's cases hold no
    step), a rule the package keeps."""
    return [mock.patch.object(structure, "_one_step", lambda path: None)]


# bug: (runtime spec, the case that must fail with it, the patches)
SEMANTICS = "golden/native_semantics/ties_truncation_negative_axis"
BUGS = {
    "emit_when_ignored_for_active_rows": (
        "reference:plain", "golden/emit_when/false_for_active_rows", _when_ignored),
    "max_iterations_names_its_own_cell": (
        "reference", "fail_closed/D29-session_counter-max_iterations_names_its_own_cell",
        _bound_names_own_cell),
    "failed_run_stores_partial_state": (
        "reference", "golden/session_rollback/failed_turn_keeps_state", _partial_state_stored),
    "compiled_output_dtype_unchecked": (
        "reference", "fail_closed/run/output_dtype/int64_at_an_int32_port_refused",
        _compiled_output_dtype_unchecked),
    "negative_scatter_destination_unchecked": (
        "reference", "fail_closed/run/scatter_cursor/negative_destination_refused",
        _negative_destinations_unchecked),
    "dotdot_artifact_inside_accepted": (
        "reference", "fail_closed/H74-kv_decoder-artifact_with_.._resolving_inside",
        _dotdot_inside_accepted),
    "native_runs_missing_ops_on_ort": (
        "reference:native", "executor/native_gap/shrink", _missing_ops_on_ort),
    "native_cast_floors": ("reference:native", SEMANTICS, _cast_floors),
    "native_topk_ties_last_index_first": (
        "reference:native", SEMANTICS, _topk_ties_last_index_first),
    "native_gather_negative_axis_as_zero": (
        "reference:native", SEMANTICS, _gather_negative_axis_as_zero),
    "served_body_per_request": (
        "reference", "batch_counters/genai_decoder/staggered_ragged", _body_per_request),
    "native_invocations_uncounted": (
        "reference:native", "executor/native_semantics/ties_truncation_negative_axis",
        _invocations_uncounted),
    "repeated_layer_unreported": (
        "reference", "fail_closed/E53-static_cache-duplicate_key_layer",
        _repeated_layer_unreported),
    "branch_arm_list_as_any_value": (
        "reference", "fail_closed/A05-branching-branch_case_written_as_a_list_of_steps",
        _branch_arm_list_as_any_value),
    "ort_session_per_invocation": (
        "reference", "component_sessions/emit_when/false_for_active_rows",
        _session_per_invocation),
}  # fmt: skip


@contextlib.contextmanager
def injected(bug: str | None):
    with contextlib.ExitStack() as stack:
        for patch in BUGS[bug][2]() if bug else ():
            stack.enter_context(patch)
        yield


def certified(spec: str, case_ids, bug: str | None = None) -> dict:
    """Case id -> (status, got) of ``spec`` certified on ``case_ids`` with ``bug`` injected."""
    by_id = {c.id: c for c in catalogue()}
    with injected(bug):
        _, results = certify(spec, {}, 2, None, progress=False,
                             cases=[by_id[i] for i in case_ids])  # fmt: skip
    return {r.case.id: (r.status, r.got) for r in results}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_each_bug_fails_its_case(bug):
    spec, case_id, _ = BUGS[bug]
    status, got = certified(spec, [case_id], bug)[case_id]
    assert status == "failed", f"{bug} passed {case_id} under {spec}: {got}"


@pytest.mark.parametrize("spec", sorted({spec for spec, _, _ in BUGS.values()}))
def test_without_the_bugs_the_same_cases_pass(spec):
    """The control: the reference runtime as it is passes every case above."""
    case_ids = sorted({case for s, case, _ in BUGS.values() if s == spec})
    results = certified(spec, case_ids)
    assert {status for status, _ in results.values()} == {"passed"}, results


def test_the_negative_length_case_alone_misses_the_destination_bug():
    """Why ``scatter_cursor`` exists: with negative destinations unchecked, the older case
    (whose negative cursor is also a negative length) is still refused with E56."""
    case = "fail_closed/run/scatter_cache/negative_cursor_refused"
    status, got = certified("reference", [case], "negative_scatter_destination_unchecked")[case]
    assert status == "passed", got


def test_only_the_counters_see_a_body_per_request():
    """Why ``batch_counters`` exists: a body run per request serves every request its solo
    run's results, so the continuous batching case itself still passes."""
    case = "continuous_batching/genai_decoder/staggered_ragged"
    status, got = certified("reference", [case], "served_body_per_request")[case]
    assert status == "passed", got


def certified_without(feature: str, case: str, bug: str) -> tuple[str, str]:
    """(status, got) of the reference runtime, not declaring ``feature``, certified on
    ``case`` with ``bug`` injected."""
    runtime = ReferenceRuntime()
    described = runtime.describe()
    described["features"].remove(feature)
    with mock.patch.object(runtime, "describe", lambda: described), injected(bug):
        _, results = certify("reference", {}, 1, None, progress=False, runtime=runtime,
                             cases=[c for c in catalogue() if c.id == case])  # fmt: skip
    (result,) = results
    return result.status, result.got


def test_only_the_locations_see_a_rule_reported_elsewhere():
    """Why ``rule_locations`` exists: with the repeated layer unreported, the package is still
    refused with E53 (its key and value layers differ), so a runtime that names only codes
    passes the case."""
    case = "fail_closed/E53-static_cache-duplicate_key_layer"
    status, got = certified_without("rule_locations", case, "repeated_layer_unreported")
    assert status == "passed", got


def test_only_exact_codes_see_a_rule_the_package_keeps():
    """Why ``exact_rule_codes`` exists: naming D35 beside A05 still names the case's rule, so a
    runtime that does not promise exact codes passes the case."""
    case = "fail_closed/A05-branching-branch_case_written_as_a_list_of_steps"
    status, got = certified_without("exact_rule_codes", case, "branch_arm_list_as_any_value")
    assert status == "passed", got
