"""Running a :class:`fixtures.generators.cases.RunCase` against any runtime.

Conventions of run-case requests: ``session_id: "new"`` opens a fresh session for the case and
``"same"`` reuses it; a refusal (of the run, or of opening the session) becomes ``{"error":
code}``. A request ``{"session_action":
"reset" | "close", "session_id": ...}`` is not a run: it resets or closes that session
(``reset_session`` / ``close_session``), and its result is ``{}`` (or the refusal).
"""

from __future__ import annotations

import functools
import json

import numpy as np

from fixtures import package_path
from fixtures.generators.cases import RunCase

from .. import goldens
from ..goldens import encode_result
from ..package_reader import RequestAxes, read_document, request_axes
from ..protocol import Refused

# A run-case request's ``session_action`` -> the protocol method it calls.
SESSION_ACTIONS = {"reset": "reset_session", "close": "close_session"}


def execute(
    runtime, case: RunCase, root=None, executor: str | None = None, options: dict | None = None
) -> list[dict]:
    """Run every request of ``case``; results in the protocol's form (or ``{"error"}``).
    ``executor`` (one of the runtime's declared executors) and ``options`` (load options, for
    a runtime declaring the feature that takes them) are passed to ``load`` when given."""
    path = str(root or package_path(case.package))
    load: dict = {} if executor is None else {"executor": executor}
    if options is not None:
        load["options"] = options
    handle = runtime.load(path, **load)
    try:
        return run_requests(runtime, handle, case)
    finally:
        runtime.close(handle)


def run_requests(runtime, handle, case: RunCase) -> list[dict]:
    """Run every request of ``case`` on a loaded ``handle`` (its sessions opened afresh)."""
    session = None
    results = []
    for request in case.requests:
        request = dict(request)
        if request.get("session_id") == "new":
            try:
                session = runtime.create_session(handle)
            except Refused as exc:  # a package that cannot hold sessions refuses to open one
                session = None
                results.append({"error": exc.code})
                continue
            request["session_id"] = session
        elif request.get("session_id") == "same":
            request["session_id"] = session
        action = request.get("session_action")
        try:
            if action is None:
                results.append(runtime.run(handle, request))
            else:
                getattr(runtime, SESSION_ACTIONS[action])(handle, request["session_id"])
                results.append({})
        except Refused as exc:
            results.append({"error": exc.code})
    return results


def expected_results(case: RunCase) -> list[dict]:
    return [case.expected(dict(request)) for request in case.requests]


def expected_refusals(case: RunCase) -> dict[int, str]:
    """Request index -> the code it must be refused with: from the case's formula, or else from
    its golden (a case without either expects no refusal)."""
    if case.expected is not None:
        expected = expected_results(case)
    else:
        expected = (goldens.load(case.id) or {}).get("results", [])
    return {i: r["error"] for i, r in enumerate(expected) if r.get("error")}


def result_differences(a: list[dict], b: list[dict]) -> list[str]:
    """How ``b`` differs from ``a`` (both plain results of the same requests), within the
    goldens' tolerance: integers exact, floats within RTOL / ATOL, refusals by code."""
    if len(a) != len(b):
        return [f"{len(b)} results for {len(a)} requests"]
    found = goldens.differences({"results": [encode_result(r) for r in a]}, b)
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if not x.get("error") and not y.get("error"):
            names, others = sorted(x.get("outputs") or {}), sorted(y.get("outputs") or {})
            if names != others:
                found.append(f"request {i}: outputs {others} where the other has {names}")
    return found


def same(a: list[dict], b: list[dict]) -> bool:
    """Exact equality of two lists of results (determinism)."""
    return json.dumps([encode_result(r) for r in a], sort_keys=True) == json.dumps(
        [encode_result(r) for r in b], sort_keys=True
    )


@functools.cache
def _request_axes(package: str) -> RequestAxes:
    return request_axes(read_document(package_path(package)))


def _aligned_inputs(case: RunCase) -> dict:
    """Input name (and application alias) -> request axis, for request-aligned inputs."""
    return _request_axes(case.package).inputs


def request_rows(case: RunCase, request: dict) -> int:
    """How many rows a request carries (from its prompt or its request-aligned inputs)."""
    prompt = request.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        return len(prompt)
    axes = _aligned_inputs(case)
    for name, value in (request.get("inputs") or {}).items():
        if name in axes:
            return int(np.asarray(value).shape[axes[name]])
    return 0


def solo_request(case: RunCase, request: dict, row: int) -> dict:
    """Row ``row`` of a batched request, alone: its prompt row and request-aligned inputs."""
    axes = _aligned_inputs(case)
    solo = dict(request)
    if request.get("prompt") is not None:
        solo["prompt"] = [list(request["prompt"][row])]
    solo["inputs"] = {
        name: np.take(np.asarray(value), [row], axis=axes[name]) if name in axes else value
        for name, value in (request.get("inputs") or {}).items()
    }
    return solo


def row_differences(batched: dict, solo: dict, row: int, aligned: dict | None = None) -> list[str]:
    """How row ``row`` of a batched result differs from the solo run of that row. ``aligned``
    maps dense outputs to their request axis (those are compared too)."""
    found = []
    if batched.get("error") or solo.get("error"):
        if batched.get("error") != solo.get("error"):
            found.append(f"row {row}: refusal {batched.get('error')} vs solo {solo.get('error')}")
        return found
    for key in ("tokens", "finish_reasons"):
        if batched.get(key) is not None and batched[key][row] != solo[key][0]:
            found.append(f"row {row}: {key} {batched[key][row]} vs solo {solo[key][0]}")
    for name, value in batched.get("outputs", {}).items():
        other = solo.get("outputs", {}).get(name)
        if isinstance(value, list):
            a, b = value[row], (other or [None])[0]
            if (a is None) != (b is None) or (
                a is not None and not np.array_equal(np.asarray(a), np.asarray(b))
            ):
                found.append(f"row {row}: output {name!r} differs from its solo run")
        elif aligned and name in aligned and other is not None:
            axis = aligned[name]
            mine = np.take(np.asarray(value), [row], axis=axis)
            if not np.array_equal(mine, np.asarray(other)):
                found.append(f"row {row}: output {name!r} differs from its solo run")
    events, alone = batched.get("events") or {}, solo.get("events") or {}
    if sorted(events) != sorted(alone):
        found.append(f"row {row}: event outputs {sorted(events)} vs solo {sorted(alone)}")
        return found
    for name, emissions in events.items():
        if len(emissions) != len(alone[name]):
            found.append(
                f"row {row}: {len(emissions)} events of {name!r} vs solo {len(alone[name])}"
            )
            continue
        for mine, other in zip(emissions, alone[name], strict=True):
            if isinstance(mine, list):  # a per-row emission: the row's entry
                mine, other = mine[row], other[0] if isinstance(other, list) else other
                if (mine is None) != (other is None) or (
                    mine is not None and not np.array_equal(mine, np.asarray(other))
                ):
                    found.append(f"row {row}: an event of {name!r} differs from its solo run")
                    break
                continue
            mine = np.asarray(mine)
            if aligned and name in aligned:  # a request-aligned event: its row
                mine = np.take(mine, [row], axis=aligned[name])
            if not np.array_equal(mine, np.asarray(other)):
                found.append(f"row {row}: an event of {name!r} differs from its solo run")
                break
    return found


def aligned_outputs(case: RunCase) -> dict:
    """Output name -> request axis, for request-aligned outputs."""
    return _request_axes(case.package).outputs
