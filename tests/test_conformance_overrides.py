"""Component overrides in the conformance suite: the request field, the feature, the JSON-lines
transport and ``conformance show``."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from conformance.cases.catalogue import catalogue
from conformance.certify import certify
from conformance.cli import main
from conformance.protocol import FEATURES, decode_request, encode_request
from conformance.runtimes import onnx_genai, ort_genai
from conformance.runtimes.reference import ReferenceRuntime

APPLIED = "component_overrides/applied_for_one_request"
REFUSED = "component_overrides/mismatches_refused"
FEATURE = "component_overrides"


def by_id(*ids):
    cases = {c.id: c for c in catalogue()}
    return [cases[i] for i in ids]


def statuses(spec: str, ids) -> dict[str, tuple[str, str]]:
    _, results = certify(spec, {}, 2, None, progress=False, cases=by_id(*ids))
    return {r.case.id: (r.status, r.got) for r in results}


@pytest.mark.parametrize("overrides", [{"scale": "shift"}, {}, "scale=shift", {"a": ["b"]}])
def test_overrides_travel_as_they_are_through_the_protocol(overrides):
    request = {"prompt": None, "inputs": {"x": np.arange(2)}, "overrides": overrides}
    back = decode_request(json.loads(json.dumps(encode_request(request))))
    assert back["overrides"] == overrides
    assert np.array_equal(back["inputs"]["x"], np.arange(2))


def test_only_cases_carrying_overrides_need_the_feature():
    assert FEATURE in FEATURES
    cases = [c for c in catalogue() if c.run is not None]
    carrying = {c.id for c in cases if any("overrides" in r for r in c.run.requests)}
    assert {f"golden/{APPLIED}", f"fail_closed/run/{REFUSED}"} <= carrying
    assert {c.id for c in cases if FEATURE in c.features} == carrying
    # third-party runtimes do not declare it; the reference runtime does
    assert FEATURE not in ort_genai.FEATURES and FEATURE not in onnx_genai.FEATURES
    assert FEATURE in ReferenceRuntime().describe()["features"]


class NoOverrides(ReferenceRuntime):
    def describe(self):
        info = super().describe()
        info["features"] = [f for f in info["features"] if f != FEATURE]
        return info


def no_overrides():
    return NoOverrides()


def test_a_runtime_without_the_feature_is_not_judged_on_overrides():
    got = statuses(f"python:{__name__}:no_overrides", [f"golden/{APPLIED}"])
    assert got[f"golden/{APPLIED}"][0] == "not_applicable"


def test_overrides_cross_the_json_lines_transport():
    spec = f"exec:{sys.executable} -m conformance.runtimes.example_server"
    got = statuses(spec, [f"golden/{APPLIED}", f"fail_closed/run/{REFUSED}"])
    assert {status for status, _ in got.values()} == {"passed"}, got


def test_show_reproduces_each_request_with_its_overrides(tmp_path, capsys):
    dest = tmp_path / "case"
    assert main(["show", f"golden/{APPLIED}", "--dest", str(dest)]) == 0
    capsys.readouterr()
    requests = json.loads((dest / "requests.json").read_text())
    assert [r.get("overrides") for r in requests] == [None, {"scale": "shift"}, None, {}]
    commands = [line for line in (dest / "reproduce.sh").read_text().splitlines()
                if line.startswith("reference-runtime run")]  # fmt: skip
    assert ["--override scale=shift" in c for c in commands] == [False, True, False, False]
    run = subprocess.run([sys.executable, "reproduce.py"], cwd=dest, capture_output=True,
                         text=True, check=True)  # fmt: skip
    first, second = run.stdout.split("request 1:")[0], run.stdout.split("request 2:")[0]
    assert "y: array([[19,  5]" in first  # scale, twice: 2(2x + k) + k
    assert "y: array([[-11,  22]" in second.split("request 1:")[1]  # shift: 3(3x - k) - k


def test_show_marks_overrides_the_command_line_cannot_spell(tmp_path, capsys):
    dest = tmp_path / "case"
    assert main(["show", f"fail_closed/run/{REFUSED}", "--dest", str(dest)]) == 0
    capsys.readouterr()
    script = (dest / "reproduce.sh").read_text()
    assert '# request 3 carries overrides "scale=shift", which --override cannot spell' in script
    assert "--override scales=shift" in script
    run = subprocess.run([sys.executable, "reproduce.py"], cwd=dest, capture_output=True,
                         text=True, check=True)  # fmt: skip
    refused = [line for line in run.stdout.splitlines() if "refused C21" in line]
    assert len(refused) == len(json.loads((dest / "requests.json").read_text())) - 1


class UncountedReplacement(ReferenceRuntime):
    """Counts a replacement's runs under the component it replaces (as if it had not run)."""

    def __init__(self):
        super().__init__(executor="native")

    def run(self, handle, request):
        result = super().run(handle, request)
        counters = result["diagnostics"]["counters"]
        invocations = {c: dict(e) for c, e in counters["invocations"].items()}
        for target, replacement in (request.get("overrides") or {}).items():
            for executor, n in invocations.pop(replacement, {}).items():
                invocations.setdefault(target, {})[executor] = n
        result["diagnostics"] = {"counters": {**counters, "invocations": invocations}}
        return result


def uncounted_replacement():
    return UncountedReplacement()


def test_the_executor_case_counts_a_replacement_one_for_one():
    case = f"executor/{APPLIED}"
    assert statuses("reference:native", [case])[case][0] == "passed"
    status, got = statuses(f"python:{__name__}:uncounted_replacement", [case])[case]
    assert status == "failed"
    assert "overriding 'scale' with 'shift' counts 2 invocation(s) of 'scale' and 0" in got
