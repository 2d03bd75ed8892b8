"""The case catalogue: every case a runtime is certified against.

A :class:`Case` knows how to build its package in a folder, the features it needs, and how to
judge a runtime on it. Suites:

- ``acceptance``: every valid generated package loads, as does every valid edit of one
  (``load_rules`` ``VARIANTS``: a value at its limit, an optional spelling the format allows);
- ``fail_closed``: every mutation in ``load_rules`` (one or more per load-time rule code) is
  refused with its rule's code at load, or at run time before any output is published; never
  run silently. Its ``fail_closed/run/<run case>`` cases are the run cases expecting a refusal
  (a run-time rule broken through the request fields): each such request is refused with the
  expected code and publishes nothing. Every fail-closed case needs the ``rule_codes`` feature
  (a runtime that names the broken rule in its refusals);
- ``golden``: every run case's results equal its golden (goldens/); a run case whose requests
  carry component ``overrides`` needs the ``component_overrides`` feature, one giving an
  input as a plain value (not an array) the ``plain_inputs`` feature, and one leaving
  ``greedy`` unset or giving a sampling keyword the ``sampling_keywords`` feature, in every
  suite;
- ``determinism``: running a case twice gives identical results;
- ``rows``: each row of a batched request equals the same row run alone;
- ``executor``: under a native executor, no ONNX Runtime session ever exists (runtimes that
  report executor diagnostics and declare ``native_executor`` only);
- ``executor`` also holds packages using an op the reference runtime's native executor lacks
  (``executor/native_gap/...``): under a native executor such a package is refused at load
  (H90) or runs natively with the formula's results, never on another executor;
- ``parity``: a run case under every executor the runtime declares, every pair within the
  goldens' tolerance; with fewer than two executors, against the golden;
- ``component_sessions``: one run case per package, its requests run twice on one loaded
  package: the second pass creates no session (one per component, reused by every invocation
  and request); runtimes that report session counters and declare ``session_counters`` only;
- ``contract_counters``: one run case per package, its requests run on one loaded package:
  every run counts the executions of the runtime contracts the package declares (a
  ``binding`` component with a ``contract``), one of each that the workflow invokes on every
  run, and none of a contract it does not declare (a package of ONNX graphs counts none);
  runtimes that report them and declare ``contract_counters`` only;
- ``kv_admission``: requests run on a package loaded with a KV byte budget (a ``load`` option,
  for runtimes declaring ``kv_admission``; :mod:`.kv_admission`): a request over the budget
  is refused (H113) publishing nothing, every other one gives its unbudgeted results (and the
  formula's, where the package has one), and a refused session turn leaves the session as it
  was; ``fail_closed/kv_admission/...`` holds the budgets refused at load (H114);
- ``continuous_batching``: one-row requests with arrival steps served in one continuous batch
  (the protocol's ``serve``, for runtimes declaring ``continuous_batching``;
  :mod:`.batching`): each request's results equal its solo run (the run cases' goldens), the
  schedule respects arrivals and slots, and freed slots are reused; with
  ``determinism/continuous_batching/...``, ``rows/continuous_batching/...`` (each served request
  equals the runtime's own solo run of it) and ``parity/continuous_batching/...``;
- ``drafted``: a bare decoder's greedy run cases loaded with a bare draft decoder attached (a
  ``load`` option, for runtimes declaring ``attached_draft``; :mod:`.drafts`): results equal the
  target's goldens (speculative decoding never changes greedy tokens);
  ``fail_closed/drafted/...`` holds the pairs refused at load (H91);
- ``sampling``: a run case whose tokens the runtime draws itself (a bare decoder's sampled
  requests), judged by properties (:mod:`.sampling`): reproducible, within the filters, and
  distributed as the decoder's logits say. Its golden and parity cases compare exact draws, so
  they need the optional ``reference_draws`` feature.

Every case judges the runtime under test; that the fixture packages regenerate byte for byte is
a test of this project (tests/test_generated_files.py), not a case.

A failed case has a *kind* (``FAILURE_KINDS``), which an expectation may pin.
"""

from __future__ import annotations

import functools
import itertools
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fixtures import package_path
from fixtures.generators import RUN_CASES
from fixtures.generators.cases import RunCase
from fixtures.generators.edges import NATIVE_GAP_CASES

from .. import goldens
from ..package_reader import GENAI_CONFIG, is_bare_decoder, read_document
from ..protocol import SAMPLING_KEYWORDS, Refused, Runtime, Unsupported, is_plain
from . import batching, drafts, kv_admission, sampling
from .load_rules import BASES, MUTATIONS, VARIANTS
from .mutations import load_document
from .run_cases import (
    aligned_outputs,
    execute,
    expected_refusals,
    expected_results,
    request_rows,
    result_differences,
    row_differences,
    run_requests,
    same,
    solo_request,
)

# The catalogue must not shrink silently (a tripwire in certification checks this).
MIN_CASES = 600

# What a failed case's failure was.
FAILURE_KINDS = {
    "refused": "refused a valid package or request",
    "wrong_code": "refused, but with another rule's code (or none)",
    "wrong_location": "refused with the rule's code, but with no violation of it where it is broken",
    "extra_codes": "refused with the rule's code, and with rules the package does not break",
    "not_refused": "loaded or ran what must be refused",
    "mismatch": "results differ from what the case expects",
    "unsupported": "answered unsupported for a feature it declares (or for an unknown one)",
    "error": "the runtime raised an error outside the protocol, or broke it",
}

# Suites whose cases run requests (the fault meta-test certifies a faulty runtime on these).
RUN_SUITES = (
    "golden", "determinism", "rows", "executor", "parity", "component_sessions",
    "contract_counters", "sampling", "kv_admission", "continuous_batching", "drafted",
)  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    passed: bool
    got: str
    kind: str | None = None  # the failure's kind (FAILURE_KINDS) when not passed


@dataclass(frozen=True)
class Case:
    id: str
    suite: str
    features: tuple[str, ...]
    expected: str
    build: Callable[[Path], Path]
    judge: Callable[[Runtime, Path], Outcome]
    rule: str | None = None  # the rule code a fail-closed case breaks
    run: RunCase | None = None  # the run case a run-suite or run-time fail-closed case runs
    options: dict | None = None  # the load options it passes (kv_admission: kv_budget_bytes)
    # optional features that make its judge stricter where declared (not needed to apply)
    stricter: tuple[str, ...] = ()


def package_features(document: dict) -> tuple[str, ...]:
    """The features a package exercises, read from its document."""
    found = {"load"}
    workflow = (document.get("pipeline") or {}).get("workflow") or {}
    if "genai_config" in document:
        found.add("genai_config")  # an onnxruntime-genai folder: the runtime derives the workflow
    elif is_bare_decoder(document):
        found.add("model_io")  # a legacy model.io decoder: the runtime derives the workflow
    contracts = {
        (c.get("contract") or {}).get("id")
        for c in (workflow.get("components") or {}).values()
        if isinstance(c, dict) and (c.get("implementation") or {}).get("kind") == "binding"
    }
    if contracts & {"onnx-genai.autoregressive-decode", "onnx-genai.token-policy"}:
        found.add("runtime_contracts")  # the runtime contracts a lowered decoder uses
    if "onnx-genai.speculative-block" in contracts:
        found.add("speculative_decoding")  # the runtime's speculative decoding contract
    if "onnx-genai.continuous-batch" in contracts:
        found.add("continuous_batching")

    def visit(steps):
        for step in steps or ():
            if not isinstance(step, dict):
                continue
            kind = step.get("kind")
            if kind in ("invoke", "loop", "branch", "emit", "sequence"):
                found.add(kind)
            if kind == "emit":
                if step.get("when") or step.get("valid_length"):
                    found.add("per_row_emit")
                if step.get("mode") == "event":
                    found.add("event_emit")
            visit(step.get("setup"))
            visit(step.get("steps"))
            for case in (step.get("cases") or {}).values():
                visit([case])
            visit([step.get("default")])

    visit(workflow.get("steps"))
    state = workflow.get("state") or {}
    if any(isinstance(c, dict) and c.get("scope") == "session" for c in state.values()):
        found.add("session_state")
    groups = ((workflow.get("serving") or {}).get("state_service") or {}).get("groups") or {}
    if groups:
        found.add("service_groups")
    if any(
        isinstance(g, dict) and (g.get("update") or {}).get("kind") == "indexed_scatter"
        for g in groups.values()
    ):
        found.add("indexed_scatter")
    abis = {
        (c.get("implementation") or {}).get("abi")
        for c in (workflow.get("components") or {}).values()
        if isinstance(c, dict)
    }
    if document.get("adapters") or "onnx-genai.parameter-overlay" in abis:
        found.add("adapters")
    if "onnx-genai.grammar-guidance" in abis:
        found.add("grammar_guidance")
    if "onnx-genai.telemetry" in abis:
        found.add("telemetry")
    if document.get("preprocessing"):
        found.add("preprocessing")
    if document.get("speculative"):
        found.add("speculative")
    return tuple(sorted(found))


def _copy_base(base: str) -> Callable[[Path], Path]:
    def build(dest: Path) -> Path:
        root = dest / base
        shutil.copytree(package_path(base), root, symlinks=True)
        return root

    return build


def _judge_accept(runtime: Runtime, root: Path) -> Outcome:
    try:
        handle = runtime.load(str(root))
    except Refused as exc:
        message = exc.message.splitlines()[0] if exc.message else ""
        return Outcome(False, f"refused at load [{exc.code}]: {message}", "refused")
    runtime.close(handle)
    return Outcome(True, "loaded")


def refusal_codes(code: str | None) -> set[str]:
    """The rule codes a refusal names (``code`` may list several, comma-separated)."""
    return {c.strip() for c in (code or "").split(",") if c.strip()}


def _judge_refusal(code: str, location: str, also: tuple[str, ...] = ()):
    """Refused at load naming ``code``; for a runtime declaring ``exact_rule_codes``, naming
    no rule but ``code`` and ``also`` (the rules the same edit breaks too); for a runtime
    declaring ``rule_locations``, with a violation of ``code`` at ``location`` (a runtime
    reporting the rule broken elsewhere only refused for another reason)."""

    def judge(runtime: Runtime, root: Path) -> Outcome:
        try:
            handle = runtime.load(str(root))
        except Refused as exc:
            named = refusal_codes(exc.code)
            if code not in named:
                message = exc.message.splitlines()[0] if exc.message else ""
                return Outcome(False, f"refused at load [{exc.code}], not {code}: {message}",
                               "wrong_code")  # fmt: skip
            declared = runtime.describe().get("features") or ()
            extra = sorted(named - {code, *also})
            if extra and "exact_rule_codes" in declared:
                return Outcome(False, f"refused at load [{exc.code}], naming "
                               f"{', '.join(extra)}, which the package does not break",
                               "extra_codes")  # fmt: skip
            if "rule_locations" not in declared:
                return Outcome(True, f"refused at load [{exc.code}]")
            found = [where for c, where in exc.violations or () if c == code]
            if location in found:
                return Outcome(True, f"refused at load [{exc.code}] at {location}")
            return Outcome(False, f"refused at load [{exc.code}], but no {code} violation at "
                           f"{location} (it named {', '.join(found) or 'none'})",
                           "wrong_location")  # fmt: skip
        runtime.close(handle)
        return Outcome(False, "loaded without refusal (the package is invalid)", "not_refused")

    return judge


def _against_golden(
    run: RunCase,
    runtime: Runtime,
    root: Path,
    executor=None,
    options: dict | None = None,
    decoded_only: bool = False,
) -> Outcome:
    """``decoded_only``: judge the decoded tokens, finish reasons and refusals, not the outputs
    (a package run by another workflow, as a decoder with a draft attached, names its outputs'
    internals its own way)."""
    golden = goldens.load(run.id)
    if golden is None:
        return Outcome(False, "no golden for this case (run tools/regen_goldens.py)")
    if golden["provenance"]["fixture_sha256"] != goldens.fixture_hash(run.package):
        return Outcome(False, "the golden is stale: the package changed since it was recorded")
    if decoded_only:
        kept = ("error", "tokens", "finish_reasons")
        golden = {**golden, "results": [
            {k: v for k, v in want.items() if k in kept} for want in golden["results"]
        ]}  # fmt: skip
    results = execute(runtime, run, root, executor, options)
    if "rule_codes" not in (runtime.describe().get("features") or ()):
        # A runtime that names no rule codes is judged on refusing where the golden refuses,
        # not on the code its refusal names (the fail-closed cases judge codes).
        wanted = golden["results"]
        if len(wanted) == len(results):
            golden = {
                **golden,
                "results": [
                    {"error": got["error"]} if "error" in want and "error" in got else want
                    for want, got in zip(wanted, results, strict=True)
                ],
            }
    problems = goldens.differences(golden, results)
    return _verdict(problems, "matches the golden")


def _verdict(problems: list[str], passed: str, kind: str = "mismatch") -> Outcome:
    """Passed when there is no problem; else failed of ``kind``, naming the first three."""
    return Outcome(not problems, "; ".join(problems[:3]) or passed, kind if problems else None)


def _judge_golden(run: RunCase):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        return _against_golden(run, runtime, root)

    return judge


def _judge_parity(run: RunCase):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        executors = list(runtime.describe().get("executors") or [])
        if len(executors) < 2:
            outcome = _against_golden(run, runtime, root, executors[0] if executors else None)
            got = f"one executor, against the golden: {outcome.got}"
            return Outcome(outcome.passed, got, outcome.kind)
        results = {executor: execute(runtime, run, root, executor) for executor in executors}
        problems = [
            f"{a} vs {b}: {problem}"
            for a, b in itertools.combinations(executors, 2)
            for problem in result_differences(results[a], results[b])
        ]
        return _verdict(problems, f"{', '.join(executors)} agree")

    return judge


def _judge_run_refusal(run: RunCase, refusals: dict[int, str]):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        results = execute(runtime, run, root)
        ran, wrong = [], []
        for i, code in refusals.items():
            got = results[i]
            if not got.get("error"):
                published = ", ".join(sorted(got.get("outputs") or {})) or "nothing"
                ran.append(f"request {i} ran (published: {published}) instead of {code}")
            elif code not in refusal_codes(got["error"]):
                wrong.append(f"request {i} refused with {got['error']}, expected {code}")
        return _verdict(ran + wrong, "refused, nothing published",
                        "not_refused" if ran else "wrong_code")  # fmt: skip

    return judge


def _judge_determinism(run: RunCase):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        first, second = execute(runtime, run, root), execute(runtime, run, root)
        return _verdict([] if same(first, second) else ["runs differ"], "identical")

    return judge


def _judge_rows(run: RunCase):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        problems = []
        for request in run.requests:
            rows = request_rows(run, request)
            if rows < 2:
                continue
            single = RunCase(run.id, run.package, (request,))
            (batched,) = execute(runtime, single, root)
            for row in range(rows):
                alone = RunCase(run.id, run.package, (solo_request(run, request, row),))
                (solo,) = execute(runtime, alone, root)
                problems += row_differences(batched, solo, row, aligned_outputs(run))
        return _verdict(problems, "rows equal their solo runs")

    return judge


def always_invoked(document: dict) -> set[str]:
    """The components a workflow document invokes on every run: its root steps run once per
    request, and a loop's ``setup`` on every entry, so the invoke steps among them, within
    ``sequence`` steps and the setup of loops entered so, run whatever the request (not those
    in a loop body or a branch case). A run that succeeds invokes each at least once."""
    workflow = (document.get("pipeline") or {}).get("workflow") or {}
    names: set[str] = set()
    steps = list(workflow.get("steps") or [])
    while steps:
        step = steps.pop()
        if not isinstance(step, dict):
            continue
        if step.get("kind") == "invoke" and isinstance(step.get("component"), str):
            names.add(step["component"])
        elif step.get("kind") == "sequence":
            steps.extend(step.get("steps") or [])
        elif step.get("kind") == "loop":
            steps.extend(step.get("setup") or [])
    return names


def _run_results(run: RunCase, results: list[dict]) -> list[dict]:
    """The results of the case's runs (not of its session actions, which run nothing)."""
    return [r for q, r in zip(run.requests, results, strict=True) if "session_action" not in q]


def _foreign_executors(results: list[dict], invoked: set[str]) -> list[str]:
    """What the results' counters show ran outside the native executor, and the components of
    ``invoked`` a run that succeeded does not count an invocation of (counters that count
    nothing prove nothing)."""
    problems = []
    for result in results:
        counters = (result.get("diagnostics") or {}).get("counters")
        if counters is None:
            if not result.get("error"):
                problems.append("the run reported no executor counters")
            continue
        foreign = sorted(set(counters.get("sessions_created", {})) - {"native"})
        if foreign:
            problems.append(f"sessions created by {', '.join(foreign)} under the native executor")
        invocations = counters.get("invocations", {})
        for component, by_executor in invocations.items():
            if "ort" in by_executor:
                problems.append(f"{component!r} ran on ONNX Runtime")
        if not result.get("error"):
            uncounted = sorted(c for c in invoked if not sum((invocations.get(c) or {}).values()))
            if uncounted:
                problems.append(
                    f"the run counts no invocation of {', '.join(map(repr, uncounted))}, which "
                    "the workflow's top level invokes on every run"
                )
    return problems


def _invocations(result: dict, component: str) -> int:
    counters = (result.get("diagnostics") or {}).get("counters") or {}
    return sum(((counters.get("invocations") or {}).get(component) or {}).values())


def _override_counts(runtime: Runtime, run: RunCase, root: Path) -> list[str]:
    """An override replaces one for one: each request of the case that overrides components
    (run alone, on a fresh load) counts no invocation of a component it overrides and as many
    of its replacement as the same request without overrides counts of the component."""
    problems = []
    for i, request in enumerate(run.requests):
        overrides = request.get("overrides") or {}
        if not overrides or request.get("session_id") is not None:
            continue
        plain = {**request, "overrides": None}
        (replaced,) = execute(runtime, RunCase(run.id, run.package, (request,)), root)
        (alone,) = execute(runtime, RunCase(run.id, run.package, (plain,)), root)
        if replaced.get("error") or alone.get("error"):
            continue
        for target, replacement in overrides.items():
            want, got = _invocations(alone, target), _invocations(replaced, replacement)
            left = _invocations(replaced, target)
            if left or got != want:
                problems.append(
                    f"request {i}: overriding {target!r} with {replacement!r} counts {left} "
                    f"invocation(s) of {target!r} and {got} of {replacement!r}; without the "
                    f"override {target!r} runs {want} time(s)"
                )
    return problems


def _judge_native_executor(run: RunCase):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        invoked = always_invoked(read_document(root))
        problems = _foreign_executors(_run_results(run, execute(runtime, run, root)), invoked)
        if overriding(run):
            problems += _override_counts(runtime, run, root)
        return _verdict(problems, "native sessions only, every invocation counted")

    return judge


def _judge_native_gap(run: RunCase):
    """A package using an op the reference runtime's native executor lacks: refused at load
    (naming H90, for a runtime declaring ``rule_codes``) or answered unsupported, or run
    natively with the formula's results; never run on another executor."""

    def judge(runtime: Runtime, root: Path) -> Outcome:
        codes = "rule_codes" in (runtime.describe().get("features") or ())
        try:
            handle = runtime.load(str(root))
        except Refused as exc:
            if codes and "H90" not in refusal_codes(exc.code):
                message = exc.message.splitlines()[0] if exc.message else ""
                return Outcome(False, f"refused at load [{exc.code}], not H90: {message}",
                               "wrong_code")  # fmt: skip
            return Outcome(True, f"refused at load [{exc.code}]")
        except Unsupported as exc:  # what it cannot run natively, it says it does not support
            return Outcome(True, f"unsupported at load: {exc.feature}")
        try:
            results = run_requests(runtime, handle, run)
        finally:
            runtime.close(handle)
        golden = {"results": [goldens.encode_result(r) for r in expected_results(run)]}
        invoked = always_invoked(read_document(root))
        problems = _foreign_executors(_run_results(run, results), invoked)
        problems += goldens.differences(golden, results)
        return _verdict(problems, "ran on the native executor, with the formula's results")

    return judge


def _sessions_created(result: dict) -> int | None:
    counters = (result.get("diagnostics") or {}).get("counters") or {}
    created = counters.get("sessions_created")
    return None if created is None else sum(created.values())


def _judge_component_sessions(run: RunCase):
    """The case's requests, run twice on one loaded package: the second pass creates no
    session, and no more sessions exist than the package has components."""

    def judge(runtime: Runtime, root: Path) -> Outcome:
        document = read_document(root)
        components = ((document.get("pipeline") or {}).get("workflow") or {}).get("components")
        handle = runtime.load(str(root))
        try:
            passes = [run_requests(runtime, handle, run) for _ in range(2)]
        finally:
            runtime.close(handle)
        problems, totals = [], []
        for n, results in enumerate(passes, 1):
            counts = [_sessions_created(r) for r in results if not r.get("error")]
            if any(c is None for c in counts):
                problems.append(f"pass {n}: a run reported no sessions_created counter")
            totals.append(max((c for c in counts if c is not None), default=None))
        first, second = totals
        if first is None or second is None:
            problems.append("no request ran, so no counter could be read")
        elif second != first:
            problems.append(
                f"sessions created grew from {first} to {second} when the same requests ran "
                "again (a session per invocation or per request, not per component)"
            )
        limit = len(components) if isinstance(components, dict) else None
        if limit is not None and second is not None and second > limit:
            problems.append(f"{second} sessions created for {limit} components")
        return _verdict(problems, f"{first} sessions, reused by every invocation and request")

    return judge


def runtime_contracts(document: dict) -> dict[str, str] | None:
    """Component -> the runtime contract id it declares (a ``binding`` component with a
    ``contract``: the runtime's own executor runs it), for a package with a workflow; None for a
    bare decoder folder, whose workflow the runtime lowers for itself."""
    workflow = (document.get("pipeline") or {}).get("workflow")
    if not isinstance(workflow, dict):
        return None
    out = {}
    for name, comp in (workflow.get("components") or {}).items():
        if not isinstance(comp, dict):
            continue
        kind = (comp.get("implementation") or {}).get("kind")
        contract = comp.get("contract")
        if kind == "binding" and isinstance(contract, dict) and contract.get("id"):
            out[name] = contract["id"]
    return out


def _judge_contract_counters(run: RunCase):
    """The case's requests on one loaded package: every run that succeeds reports
    ``contract_executions`` (runtime contract id -> executions so far); a package that declares
    no runtime contract counts none (its graphs run on the executor), one that does counts only
    those it declares, and each run counts one of every contract the workflow invokes on
    every run (its top-level steps and loop setups)."""

    def judge(runtime: Runtime, root: Path) -> Outcome:
        document = read_document(root)
        declared = runtime_contracts(document)
        invoked = always_invoked(document)
        handle = runtime.load(str(root))
        try:
            results = run_requests(runtime, handle, run)
        finally:
            runtime.close(handle)
        problems, before = [], {}
        for i, result in enumerate(_run_results(run, results)):
            if result.get("error"):
                continue
            counts = ((result.get("diagnostics") or {}).get("counters") or {}).get(
                "contract_executions"
            )
            if not isinstance(counts, dict) or not all(
                isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in counts.items()
            ):
                problems.append(f"request {i}: no contract_executions counter (id -> count)")
                continue
            if declared is not None:
                foreign = sorted(k for k, v in counts.items() if v and k not in declared.values())
                if foreign:
                    problems.append(
                        f"request {i}: executions counted of {', '.join(foreign)}, which no "
                        "component of the package declares (its graphs run on the executor)"
                    )
                for component in sorted(invoked & set(declared)):
                    cid = declared[component]
                    if counts.get(cid, 0) <= before.get(cid, 0):
                        problems.append(
                            f"request {i}: no execution of {cid} counted, though the workflow "
                            f"invokes {component!r} (which declares it) on every run"
                        )
            before = counts
        return _verdict(problems, "runtime contract executions counted as declared")

    return judge


PARITY = (
    "every pair of the runtime's executors agrees within the goldens' tolerance (integers "
    "exact); with fewer than two executors, the results equal the golden"
)


def _run_case(run, features, build, suite, expected, judge, extra=(), rule=None, prefix=None):
    ident = f"{prefix or suite}/{run.id}"
    return Case(ident, suite, (*features, *extra), expected, build, judge, rule, run)


def runtime_draws(run: RunCase) -> bool:
    """Whether the runtime itself draws some of the case's tokens: a sampled request with no
    formula for its results (a bare decoder's token policy; in-graph samplers have formulas)."""
    return run.expected is None and any(r.get("greedy") is False for r in run.requests)


def overriding(run: RunCase) -> bool:
    """Whether a request of the case carries component overrides (the ``component_overrides``
    feature; a request without them runs every component as the package declares)."""
    return any(r.get("overrides") is not None for r in run.requests)


def plain(run: RunCase) -> bool:
    """Whether a request of the case gives an input as a plain value (the ``plain_inputs``
    feature; every other case gives arrays of the contract's dtype)."""
    return any(is_plain(v) for r in run.requests for v in (r.get("inputs") or {}).values())


def keyworded(run: RunCase) -> bool:
    """Whether a request of the case leaves ``greedy`` unset or gives a sampling keyword (the
    ``sampling_keywords`` feature; every other request says greedy or not, and gives none)."""
    return any(
        r.get("greedy", True) is None or any(k in r for k in SAMPLING_KEYWORDS)
        for r in run.requests
    )


def run_catalogue() -> list[Case]:
    cases = []
    documents: dict[str, tuple[str, ...]] = {}
    counted: set[str] = set()  # packages with a component_sessions (and contract_counters) case
    for run in RUN_CASES:
        if run.package not in documents:
            documents[run.package] = package_features(load_document(run.package))
        draws = ("sampling",) if runtime_draws(run) else ()
        overrides = ("component_overrides",) if overriding(run) else ()
        plains = ("plain_inputs",) if plain(run) else ()
        keywords = ("sampling_keywords",) if keyworded(run) else ()
        features = (*documents[run.package], "run", *draws, *overrides, *plains, *keywords)
        exact = ("reference_draws",) if draws else ()  # exact tokens of the runtime's draws
        build = _copy_base(run.package)
        notes = f" ({run.notes})" if run.notes else ""

        case = functools.partial(_run_case, run, features, build)

        cases.append(case("golden", f"results equal the golden{notes}", _judge_golden(run), exact))
        cases.append(
            case("determinism", "two runs give identical results", _judge_determinism(run))
        )
        cases.append(
            case(
                "executor",
                "no ONNX Runtime session under the native executor",
                _judge_native_executor(run),
                ("native_executor",),
            )
        )
        cases.append(case("parity", PARITY, _judge_parity(run), ("parity", *exact)))
        refusals = expected_refusals(run)
        if run.package not in counted and len(refusals) < len(run.requests):
            counted.add(run.package)
            cases.append(
                case(
                    "component_sessions",
                    "running the requests again creates no session (one per component)",
                    _judge_component_sessions(run),
                    ("session_counters",),
                )
            )
            cases.append(
                case(
                    "contract_counters",
                    "runtime contract executions counted where the package declares them",
                    _judge_contract_counters(run),
                    ("contract_counters",),
                )
            )
        if run.rows_independent:
            cases.append(case("rows", "each batched row equals its solo run", _judge_rows(run)))
        if draws and (package_path(run.package) / GENAI_CONFIG).exists():
            cases += sampling_cases(run, case)
        if refusals:
            which = ", ".join(f"request {i}: {code}" for i, code in refusals.items())
            cases.append(
                case(
                    "fail_closed",
                    f"refused at run time before publishing anything ({which}){notes}",
                    _judge_run_refusal(run, refusals),
                    ("rule_codes",),
                    rule=", ".join(sorted(set(refusals.values()))),
                    prefix="fail_closed/run",
                )
            )
    for run in NATIVE_GAP_CASES:
        features = (*package_features(load_document(run.package)), "run", "native_executor")
        cases.append(
            Case(
                f"executor/{run.id}",
                "executor",
                features,
                f"refused at load (H90), or run on the native executor alone ({run.notes})",
                _copy_base(run.package),
                _judge_native_gap(run),
                None,
                run,
            )
        )
    return cases


# ------------------------------------------------------------------ sampling


def _sampled(run: RunCase) -> tuple[dict, list[int]]:
    """The case's first sampled request and its first prompt row (the draws' prompt)."""
    request = next(r for r in run.requests if r.get("greedy") is False)
    return request, list(request["prompt"][0])


def _judge_reproducible(run: RunCase):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        first, second = execute(runtime, run, root), execute(runtime, run, root)
        problems = [
            f"request {i}: tokens {a.get('tokens')} then {b.get('tokens')}"
            for i, (a, b) in enumerate(zip(first, second, strict=True))
            if a.get("tokens") != b.get("tokens") or a.get("error") != b.get("error")
        ]
        return _verdict(problems, "the same seeds give the same tokens")

    return judge


def _judge_within_filters(run: RunCase):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        oracle = sampling.LogitsOracle(root)
        problems = []
        for i, (request, result) in enumerate(zip(run.requests, execute(runtime, run, root),
                                                  strict=True)):  # fmt: skip
            if request.get("greedy") is not False or result.get("error"):
                continue
            for row, tokens in enumerate(result.get("tokens") or []):
                settings = sampling.request_settings(request, row)
                prompt = list(request["prompt"][row])
                where = f"request {i}, row {row}"
                problems += sampling.sequence_problems(oracle, prompt, tokens, settings, where)
        return _verdict(problems, "every drawn token is one the filters keep")

    return judge


def _judge_distribution(run: RunCase, settings: tuple[sampling.Settings | None, ...]):
    """The first token over ``sampling.DRAWS`` seeds follows the exact distribution under each
    of ``settings`` (None: the case's own)."""

    def judge(runtime: Runtime, root: Path) -> Outcome:
        request, prompt = _sampled(run)
        logits = sampling.LogitsOracle(root)(prompt)
        handle = runtime.load(str(root))
        problems = []
        try:
            for s in settings:
                s = s or sampling.request_settings(request, 0)
                results = []
                for draw in sampling.draw_requests(prompt, s):
                    try:
                        results.append(runtime.run(handle, draw))
                    except Refused as exc:
                        results.append({"error": exc.code or "refused"})
                counts, missing = sampling.first_tokens(results)
                problems += missing[:1] or sampling.judge_draws(counts, logits, s)
        finally:
            runtime.close(handle)
        checked = ", ".join(
            (s or sampling.request_settings(request, 0)).describe() for s in settings
        )
        return _verdict(problems, f"{sampling.DRAWS} draws follow the distribution ({checked})")

    return judge


COLD, HOT = sampling.Settings(temperature=0.6), sampling.Settings(temperature=2.5)
TOP_P = sampling.Settings(temperature=1.0, top_p=0.7)
MIN_P = sampling.Settings(temperature=1.0, min_p=0.1)


def sampling_cases(run: RunCase, case) -> list[Case]:
    n = sampling.DRAWS
    of = f"the first token of {n} single-token requests (seeds {sampling.SEED0}, ...)"
    specs = [
        ("reproducible", "the same requests with the same seeds give the same tokens",
         _judge_reproducible(run), ()),
        ("within_filters", "every drawn token is one the temperature, top-k, top-p and min-p "
         "filters keep", _judge_within_filters(run), ()),
        ("distribution", f"{of} follows the exact distribution under the case's settings "
         f"(chi-square, p >= {sampling.ALPHA:g})", _judge_distribution(run, (None,)), ()),
        ("temperature", f"{of} follows the exact distribution at temperature 0.6 and at 2.5, "
         "no filter", _judge_distribution(run, (COLD, HOT)), ()),
        ("top_p", f"{of} follows the exact distribution under top-p 0.7",
         _judge_distribution(run, (TOP_P,)), ()),
        ("min_p", f"{of} follows the exact distribution under min-p 0.1",
         _judge_distribution(run, (MIN_P,)), ("min_p",)),
    ]  # fmt: skip
    out = []
    for name, expected, judge, extra in specs:
        made = case("sampling", expected, judge, extra)
        out.append(
            Case(
                f"sampling/{run.id}/{name}",
                made.suite,
                made.features,
                made.expected,
                made.build,
                made.judge,
                None,
                run,
            )  # fmt: skip
        )
    return out


# ------------------------------------------------------------------ KV admission


def _load_budgeted(runtime: Runtime, root: Path, budget):
    return runtime.load(str(root), options={kv_admission.OPTION: budget})


def _judge_admission(case: kv_admission.AdmissionCase):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        codes = "rule_codes" in (runtime.describe().get("features") or ())
        run = RunCase(case.id, case.package, case.requests)
        handle = _load_budgeted(runtime, root, case.budget)
        try:
            budgeted = run_requests(runtime, handle, run)
        finally:
            runtime.close(handle)
        fitting = [r for i, r in enumerate(case.requests) if i not in case.refused]
        free = execute(runtime, RunCase(case.id, case.package, tuple(fitting)), root)
        ran, wrong, admitted = [], [], []
        for i, result in enumerate(budgeted):
            if i in case.refused:
                if not result.get("error"):
                    published = ", ".join(sorted(result.get("outputs") or {})) or "nothing"
                    ran.append(f"request {i} ran over the budget (published: {published})")
                elif codes and "H113" not in refusal_codes(result["error"]):
                    wrong.append(f"request {i} refused with {result['error']}, expected H113")
            else:
                admitted.append(result)
        if ran or wrong:
            return _verdict(ran + wrong, "", "not_refused" if ran else "wrong_code")
        problems = [
            f"admitted request {n}: {problem}"
            for n, problem in enumerate(result_differences(free, admitted))
        ]
        if case.formula:
            problems += goldens.differences(kv_admission.expected_results(case, fitting), admitted)
        return _verdict(problems, "over-budget requests refused, nothing published; the others "
                        "equal their unbudgeted runs")  # fmt: skip

    return judge


def _judge_load_refused(code: str | None, options, what: str):
    """The package is refused at load with ``code`` (any code when None) when loaded with
    ``options(root)``, the load options of a feature that takes them; ``what`` says what was
    loaded."""

    def judge(runtime: Runtime, root: Path) -> Outcome:
        try:
            handle = runtime.load(str(root), options=options(root))
        except Refused as exc:
            if code is None or code in refusal_codes(exc.code):
                return Outcome(True, f"refused at load [{exc.code}]")
            message = exc.message.splitlines()[0] if exc.message else ""
            return Outcome(False, f"refused at load [{exc.code}], not {code}: {message}",
                           "wrong_code")  # fmt: skip
        runtime.close(handle)
        return Outcome(False, f"loaded {what} without refusal", "not_refused")

    return judge


def admission_catalogue() -> list[Case]:
    cases = []
    for case in kv_admission.CASES:
        features = (*package_features(load_document(case.package)), "run", kv_admission.FEATURE)
        cases.append(
            Case(
                f"kv_admission/{case.id}",
                "kv_admission",
                features,
                f"refused (H113) where the KV exceeds the budget, publishing nothing; the "
                f"others equal their unbudgeted runs ({case.notes})",
                case.variant.materialise if case.variant else _copy_base(case.package),
                _judge_admission(case),
                "H113",
                RunCase(case.id, case.package, case.requests, notes=case.notes),
                {kv_admission.OPTION: case.budget},
            )
        )
    base = kv_admission.UNBOUNDED_KV.base
    budgets = [
        (name, base, _copy_base(base), budget, f"kv_budget_bytes {budget!r}")
        for name, budget in kv_admission.BAD_BUDGETS.items()
    ]
    budgets += [
        (
            variant.note,
            variant.base,
            variant.materialise,
            10**9,
            f"a KV it cannot bound ({variant.describe()})",
        )
        for variant in kv_admission.UNBOUNDABLE
    ]
    for name, package, build, budget, what in budgets:
        features = (
            *package_features(load_document(package)),
            kv_admission.FEATURE,
            "rule_codes",
        )
        cases.append(
            Case(
                f"fail_closed/kv_admission/{name}",
                "fail_closed",
                features,
                f"refused at load (H114): {what}",
                build,
                _judge_load_refused(
                    "H114",
                    lambda root, budget=budget: {kv_admission.OPTION: budget},
                    f"with kv_budget_bytes {budget!r}",
                ),
                "H114",
                options={kv_admission.OPTION: budget},
            )
        )
    return cases


# ------------------------------------------------------------------ attached drafts


def _judge_drafted(run: RunCase, pair: drafts.Pair):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        options = {drafts.OPTION: str(pair.draft_folder(root))}
        return _against_golden(run, runtime, root, options=options, decoded_only=True)

    return judge


def drafts_catalogue() -> list[Case]:
    cases = []
    for name, pair, runs in drafts.PAIRS:
        target, draft = pair.target, pair.draft
        features = (*package_features(load_document(target)), "run", drafts.FEATURE)
        for run in drafts.greedy_cases(target, runs):
            notes = f" ({run.notes})" if run.notes else ""
            cases.append(
                Case(
                    f"drafted/{name}/{run.id.removeprefix(target + '/')}",
                    "drafted",
                    features,
                    f"{pair.describe()}: the tokens, finish reasons and refusals of "
                    f"{target}'s golden{notes}",
                    pair.materialise,
                    _judge_drafted(run, pair),
                    run=run,
                    options={drafts.OPTION: draft},
                )
            )
    for refusal in drafts.REFUSALS:
        target = refusal.pair.target
        features = (*package_features(load_document(target)), drafts.FEATURE)
        if refusal.code is not None:
            features = (*features, "rule_codes")
        cases.append(
            Case(
                f"fail_closed/drafted/{refusal.note}",
                "fail_closed",
                features,
                f"refused at load ({refusal.code or 'any code'}): {refusal.pair.describe()}",
                refusal.pair.materialise,
                _judge_load_refused(
                    refusal.code,
                    lambda root, pair=refusal.pair: {drafts.OPTION: str(pair.draft_folder(root))},
                    refusal.pair.describe(),
                ),
                refusal.code,
                options={drafts.OPTION: refusal.pair.draft},
            )
        )
    return cases


# ------------------------------------------------------------------ continuous batching


def _serve(runtime: Runtime, root: Path, case: batching.BatchCase, executor=None) -> list[dict]:
    path = str(root)
    load: dict = {} if executor is None else {"executor": executor}
    if case.kv_budget is not None:  # only a runtime declaring kv_admission takes options
        load["options"] = {kv_admission.OPTION: case.kv_budget}
    handle = runtime.load(path, **load)
    try:
        return runtime.serve(handle, batching.requests(case), case.slots)
    finally:
        runtime.close(handle)


def _served_outcome(problems: list[str], passed: str) -> Outcome:
    return _verdict(problems, passed)


def _judge_batch(case: batching.BatchCase):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        want = batching.expected(case)
        if want is None:
            return Outcome(False, "no current golden for a served request's run case "
                           "(run tools/regen_goldens.py)", "mismatch")  # fmt: skip
        try:
            served = _serve(runtime, root, case)
        except Refused as exc:
            return Outcome(False, f"refused [{exc.code}]: {exc.message}", "refused")
        problems = batching.schedule_problems(case, served)
        problems += batching.result_problems(want, served)
        return _served_outcome(problems, "each request equals its solo run; the schedule "
                               "respects arrivals and slots")  # fmt: skip

    return judge


def _judge_served_record(case: batching.BatchCase, problems_of, passed: str):
    """A serve whose schedule holds, judged by ``problems_of(case, served)`` (what the serve
    reports beside its results: counters, the per-step trace)."""

    def judge(runtime: Runtime, root: Path) -> Outcome:
        try:
            served = _serve(runtime, root, case)
        except Refused as exc:
            return Outcome(False, f"refused [{exc.code}]: {exc.message}", "refused")
        problems = batching.schedule_problems(case, served)
        return _served_outcome(problems or problems_of(case, served), passed)

    return judge


def _judge_batch_determinism(case: batching.BatchCase):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        try:
            first, second = _serve(runtime, root, case), _serve(runtime, root, case)
        except Refused as exc:
            return Outcome(False, f"refused [{exc.code}]: {exc.message}", "refused")

        def plain(served):  # the schedule and tokens (outputs and events compared below)
            return [
                {
                    **{k: v for k, v in s.items() if k not in ("outputs", "events")},
                    "tokens": [int(t) for t in np.asarray(s.get("tokens") or []).reshape(-1)],
                }
                for s in served
            ]

        problems = (
            [] if plain(first) == plain(second) else ["two serves of the same requests differ"]
        )
        if not problems:
            again = sorted(second, key=lambda s: s["index"])
            problems = [f"second serve: {p}" for p in batching.output_problems(again, first)]
        return _served_outcome(problems, "two serves give identical results and schedules")

    return judge


def _judge_batch_rows(case: batching.BatchCase):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        try:
            served = _serve(runtime, root, case)
        except Refused as exc:
            return Outcome(False, f"refused [{exc.code}]: {exc.message}", "refused")
        return _solo_outcome(runtime, root, case, served, "each served request equals its solo run")

    return judge


def _solo_outcome(runtime: Runtime, root: Path, case, served: list[dict], passed: str) -> Outcome:
    """Each served request against the runtime's own run of it alone."""
    solo = execute(runtime, batching.solo_run(case), root)
    want = []
    for i, result in enumerate(solo):
        if result.get("error"):
            return Outcome(False, f"request {i} alone was refused [{result['error']}]",
                           "refused")  # fmt: skip
        want.append({"tokens": result["tokens"][0], "finish_reason": result["finish_reasons"][0]})
    problems = batching.result_problems(want, served)
    problems += batching.output_problems(solo, served)
    return _served_outcome(problems, passed)


def _judge_uncut(case: batching.BatchCase):
    """Refused with the case's code, or served apart with each request equal to its solo run."""

    def judge(runtime: Runtime, root: Path) -> Outcome:
        try:
            served = _serve(runtime, root, case)
        except Refused as exc:
            if case.refused in refusal_codes(exc.code):
                return Outcome(True, f"refused [{exc.code}]")
            return Outcome(False, f"refused [{exc.code}], not {case.refused}: {exc.message}",
                           "wrong_code")  # fmt: skip
        return _solo_outcome(runtime, root, case, served,
                             "served apart: each request equals its solo run")  # fmt: skip

    return judge


def _judge_batch_parity(case: batching.BatchCase):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        executors = list(runtime.describe().get("executors") or [])
        if len(executors) < 2:
            outcome = _judge_batch(case)(runtime, root)
            got = f"one executor, against the goldens: {outcome.got}"
            return Outcome(outcome.passed, got, outcome.kind)
        try:
            results = {e: _serve(runtime, root, case, e) for e in executors}
        except Refused as exc:
            return Outcome(False, f"refused [{exc.code}]: {exc.message}", "refused")
        problems = []
        for a, b in itertools.combinations(executors, 2):
            want = [
                {"tokens": s["tokens"], "finish_reason": s["finish_reason"]}
                for s in sorted(results[a], key=lambda s: s["index"])
            ]
            problems += [f"{a} vs {b}: {p}" for p in batching.result_problems(want, results[b])]
        return _served_outcome(problems, f"{', '.join(executors)} agree")

    return judge


def _judge_not_served(slots, arrival, code: str):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        handle = runtime.load(str(root))
        request = {"prompt": [[5, 6, 7]], "max_new_tokens": 2, "arrival": arrival}
        try:
            served = runtime.serve(handle, [request], slots)
        except Refused as exc:
            if code in refusal_codes(exc.code):
                return Outcome(True, f"refused [{exc.code}]")
            return Outcome(False, f"refused [{exc.code}], not {code}: {exc.message}",
                           "wrong_code")  # fmt: skip
        finally:
            runtime.close(handle)
        return Outcome(False, f"served {len(served)} request(s) without refusal", "not_refused")

    return judge


def batching_catalogue() -> list[Case]:
    cases = []
    refusals = (
        (batching.NOT_SERVABLE.note, batching.NOT_SERVABLE.base, batching.NOT_SERVABLE.materialise,
         1, 0, "H124", f"a package that may not be batched ({batching.NOT_SERVABLE.describe()})"),
        *((name, package, _copy_base(package), slots, arrival, code, what)
          for name, package, slots, arrival, code, what in batching.SERVED_REFUSALS),
    )  # fmt: skip
    for name, base, build, slots, arrival, code, what in refusals:
        features = (*package_features(load_document(base)), "run", batching.FEATURE, "rule_codes")
        cases.append(
            Case(
                f"fail_closed/continuous_batching/{name}",
                "fail_closed",
                features,
                f"refused ({code}) before anything is served: {what}",
                build,
                _judge_not_served(slots, arrival, code),
                code,
            )
        )
    for case in batching.UNCUT:
        features = (*package_features(load_document(case.package)), "run", batching.FEATURE)
        cases.append(
            Case(
                f"fail_closed/continuous_batching/{case.id.split('/')[-1]}",
                "fail_closed",
                (*features, "rule_codes"),
                f"refused ({case.refused}) while serving, or served apart with each request "
                f"equal to its solo run: {case.notes}",
                case.variant.materialise,
                _judge_uncut(case),
                case.refused,
            )
        )
    for case in batching.CASES:
        features = (*package_features(load_document(case.package)), "run", batching.FEATURE)
        if case.kv_budget is not None:
            features = (*features, kv_admission.FEATURE)
        if "sampled" in case.tags:  # the runtime draws; exact draws for the goldens
            features, sampled = (*features, "sampling"), ("reference_draws",)
        else:
            sampled = ()
        build = case.variant.materialise if case.variant else _copy_base(case.package)
        notes = f" ({case.notes})"
        for ident, suite, expected, judge, extra in (
            (f"continuous_batching/{case.id}", "continuous_batching",
             "each served request equals its solo run (the golden); arrivals and slots "
             "respected, freed slots reused", _judge_batch(case), sampled),
            (f"determinism/continuous_batching/{case.id}", "determinism",
             "two serves give identical results", _judge_batch_determinism(case), ()),
            (f"rows/continuous_batching/{case.id}", "rows",
             "each served request equals the runtime's own solo run of it",
             _judge_batch_rows(case), ()),
            (f"parity/continuous_batching/{case.id}", "parity", PARITY,
             _judge_batch_parity(case), ("parity", *sampled)),
            (f"batch_counters/{case.id}", "batch_counters",
             "requests decoding at one step share its one run of the loop body; the counters "
             "agree with the schedule",
             _judge_served_record(case, batching.counter_problems, "one run of the loop body "
                                  "per batch step; the counters agree with the schedule"),
             ("batch_counters",)),
            (f"batch_trace/{case.id}", "batch_trace",
             "each step's record (slots, accepted_len, liveness bit, runs of the body) agrees "
             "with the schedule",
             _judge_served_record(case, batching.trace_problems,
                                  "the batch trace agrees with the schedule"),
             ("batch_trace",)),
        ):  # fmt: skip
            cases.append(Case(ident, suite, (*features, *extra), expected + notes, build, judge))
    return cases


def catalogue() -> list[Case]:
    cases: list[Case] = []
    features = {base: package_features(load_document(base)) for base in BASES}
    for base in BASES:
        cases.append(
            Case(
                id=f"acceptance/{base}",
                suite="acceptance",
                features=features[base],
                expected="the valid package loads",
                build=_copy_base(base),
                judge=_judge_accept,
            )
        )
    for variant in VARIANTS:
        cases.append(
            Case(
                id=f"acceptance/{variant.ident}",
                suite="acceptance",
                features=features[variant.base],
                expected=f"the valid package loads: {variant.describe()}",
                build=variant.materialise,
                judge=_judge_accept,
            )
        )
    seen: set[str] = set()
    for mutation in MUTATIONS:
        ident = f"fail_closed/{mutation.ident}"
        n = 2
        while ident in seen:
            ident, n = f"fail_closed/{mutation.ident}-{n}", n + 1
        seen.add(ident)
        cases.append(
            Case(
                id=ident,
                suite="fail_closed",
                features=(*features[mutation.base], "rule_codes"),
                expected=f"refused ({mutation.code} at {mutation.location}"
                + "".join(f", and {c}" for c in mutation.also)
                + f"): {mutation.describe()}",
                build=mutation.materialise,
                judge=_judge_refusal(mutation.code, mutation.location, mutation.also),
                stricter=("rule_locations", "exact_rule_codes"),
                rule=mutation.code,
            )
        )
    return (
        cases + run_catalogue() + admission_catalogue() + batching_catalogue() + drafts_catalogue()
    )


def materialise(case_id: str, dest: Path) -> Path:
    """Write a case's package under ``dest`` (for reproducing a failure by hand)."""
    for case in catalogue():
        if case.id == case_id:
            dest.mkdir(parents=True, exist_ok=True)
            return case.build(dest)
    raise KeyError(f"no case {case_id!r}")
