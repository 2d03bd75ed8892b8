"""Goldens: the expected results of the run cases, with their provenance.

One JSON file per run case, ``goldens/cases/<case id with "/" as "__">.json``:

```json
{"case": "...", "provenance": {"fixture_sha256": "...", "obtained": "formula" | "runtime",
 "runtime": "reference:ort" | null, "versions": {...}},
 "results": [{"tokens": ..., "finish_reasons": ..., "outputs": {...}, "events": {...}}
             | {"error": "E56"}, ...]}
```

Arrays are stored exactly (``{"dtype", "shape", "base64"}``); ``events`` maps each event output
to the list of its emissions. Comparing a result with a golden checks only what the golden
holds: tokens, finish reasons and integer arrays exactly, float arrays within ``RTOL`` /
``ATOL`` (``|got - want| <= ATOL + RTOL * |want|``, NaN equal to NaN), the set of event
outputs and the number of emissions of each exactly, and a refusal by its code. A golden whose
fixture hash no longer matches the package is stale and fails. ``tools/regen_goldens.py``
rewrites them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

import goldens as goldens_package
from fixtures import MANIFEST_PATH

from .protocol import decode_events, decode_value, encode_events, encode_value

# Only golden documents live here (syrupy treats any other file in it as a stale snapshot).
GOLDENS_DIR = Path(goldens_package.__file__).resolve().parent / "cases"
RTOL, ATOL = 1e-4, 1e-5


def golden_name(case_id: str) -> str:
    return case_id.replace("/", "__")


def golden_path(case_id: str) -> Path:
    return GOLDENS_DIR / f"{golden_name(case_id)}.json"


def fixture_hash(package: str) -> str:
    """One SHA-256 over the manifest entries of a generated package."""
    manifest = json.loads(MANIFEST_PATH.read_text())
    files = manifest[package]
    text = "\n".join(f"{name} {files[name]}" for name in sorted(files))
    return hashlib.sha256(text.encode()).hexdigest()


def encode_result(result: dict) -> dict:
    """A run result (or an expectation) in golden form; keys absent stay absent."""
    out: dict = {}
    for key in ("tokens", "finish_reasons", "error"):
        if key in result:
            out[key] = result[key]
    if "outputs" in result:
        out["outputs"] = {k: encode_value(v) for k, v in sorted(result["outputs"].items())}
    if result.get("events") is not None:
        out["events"] = encode_events(dict(sorted(result["events"].items())))
    return out


def decode_result(result: dict) -> dict:
    """A result in golden form back to plain arrays (the inverse of :func:`encode_result`)."""
    out = dict(result)
    if "outputs" in result:
        out["outputs"] = {k: decode_value(v) for k, v in result["outputs"].items()}
    if result.get("events") is not None:
        out["events"] = decode_events(result["events"])
    return out


def document(case_id: str, package: str, results: list[dict], obtained: str, runtime=None) -> dict:
    import onnx
    import onnxruntime

    return {
        "case": case_id,
        "provenance": {
            "fixture_sha256": fixture_hash(package),
            "obtained": obtained,
            "runtime": runtime,
            "versions": {
                "numpy": np.__version__,
                "onnx": onnx.__version__,
                "onnxruntime": onnxruntime.__version__,
            },
        },
        "results": [encode_result(r) for r in results],
    }


def differences(golden: dict, results: list[dict]) -> list[str]:
    """Why ``results`` (plain run results) differ from ``golden`` (empty when they match)."""
    expected = golden["results"]
    if len(expected) != len(results):
        return [f"{len(results)} results for {len(expected)} golden requests"]
    found = []
    for i, (want, got) in enumerate(zip(expected, results, strict=True)):
        where = f"request {i}"
        if "error" in want:
            if want["error"] != got.get("error"):
                found.append(f"{where}: expected refusal {want['error']}, got {got.get('error')}")
            continue
        if got.get("error"):
            found.append(f"{where}: refused with {got['error']}")
            continue
        for key in ("tokens", "finish_reasons"):
            if key in want and want[key] != got.get(key):
                found.append(f"{where}: {key} {got.get(key)} != golden {want[key]}")
        for name, encoded in (want.get("outputs") or {}).items():
            have = (got.get("outputs") or {}).get(name, "<absent>")
            problem = compare_value(decode_value(encoded), have)
            if problem:
                found.append(f"{where}: output {name!r}: {problem}")
        if "events" in want:
            found += event_differences(want["events"], got.get("events") or {}, where)
    return found


def event_differences(want: dict, have: dict, where: str) -> list[str]:
    """``want`` in golden form, ``have`` plain: the same event outputs, emission by emission."""
    if sorted(want) != sorted(have):
        return [f"{where}: event outputs {sorted(have)} != golden {sorted(want)}"]
    found = []
    for name, emissions in want.items():
        if len(have[name]) != len(emissions):
            found.append(f"{where}: {len(have[name])} events of {name!r}, golden {len(emissions)}")
            continue
        for k, (encoded, got) in enumerate(zip(emissions, have[name], strict=True)):
            problem = compare_value(decode_value(encoded), got)
            if problem:
                found.append(f"{where}: event {name!r}[{k}]: {problem}")
                break
    return found


def compare_value(want, have) -> str | None:
    if isinstance(want, list):
        if not isinstance(have, list) or len(have) != len(want):
            return f"expected {len(want)} rows, got {type(have).__name__}"
        for r, (w, h) in enumerate(zip(want, have, strict=True)):
            if w is None or h is None:
                if (w is None) != (h is None):
                    return f"row {r}: {'nothing' if w is None else 'a value'} expected"
                continue
            problem = compare_value(w, h)
            if problem:
                return f"row {r}: {problem}"
        return None
    if isinstance(have, str) or have is None or isinstance(have, list):
        return f"expected an array, got {have!r}"[:200]
    have = np.asarray(have)
    if have.dtype != want.dtype or have.shape != want.shape:
        return f"{have.dtype}{list(have.shape)} where the golden has {want.dtype}{list(want.shape)}"
    if want.dtype.kind == "f" or str(want.dtype) == "bfloat16":
        if not np.allclose(have.astype(np.float64), want.astype(np.float64), rtol=RTOL, atol=ATOL,
                           equal_nan=True):  # fmt: skip
            return f"values differ beyond rtol {RTOL} / atol {ATOL}"
    elif not np.array_equal(have, want):
        return "values differ"
    return None


def load(case_id: str) -> dict | None:
    path = golden_path(case_id)
    return json.loads(path.read_text()) if path.is_file() else None


def text(doc: dict) -> str:
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"
