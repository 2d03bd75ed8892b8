"""Regenerate goldens/cases/ from the run cases of the generated packages.

    python tools/regen_goldens.py            # rewrite every golden, delete unused ones
    python tools/regen_goldens.py --check    # fail if a golden is missing, stale or unused

A case with a formula (``RunCase.expected``) gets its golden from the formula; the others from
the reference runtime's ONNX Runtime executor. Either way the provenance says which, with the
fixture's hash and the versions of numpy, onnx and onnxruntime.
"""

from __future__ import annotations

import argparse
import json
import sys

from conformance import goldens
from conformance.cases.run_cases import execute, expected_results
from conformance.runtimes.reference import ReferenceRuntime
from fixtures.generators import RUN_CASES


def build(case) -> dict:
    if case.expected is not None:
        return goldens.document(case.id, case.package, expected_results(case), "formula")
    results = execute(ReferenceRuntime("ort"), case)
    return goldens.document(case.id, case.package, results, "runtime", "reference:ort")


def progress(done: int, total: int, label: str) -> None:
    """A progress bar on stderr (one line per case when stderr is not a terminal)."""
    if not sys.stderr.isatty():
        print(f"[{done}/{total}] {label}", file=sys.stderr)
        return
    width = 30
    filled = width * done // total
    bar = "#" * filled + "." * (width - filled)
    print(f"\r[{bar}] {done}/{total} {label[:60]:<60}", end="", file=sys.stderr, flush=True)
    if done == total:
        print(file=sys.stderr)


def comparable(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    doc["provenance"].pop("versions", None)
    return doc


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    wanted = {goldens.golden_name(c.id) for c in RUN_CASES}
    rows, problems = [], []
    for i, case in enumerate(RUN_CASES, 1):
        progress(i, len(RUN_CASES), case.id)
        doc = build(case)
        path = goldens.golden_path(case.id)
        old = json.loads(path.read_text()) if path.is_file() else None
        state = (
            "new" if old is None else ("same" if comparable(old) == comparable(doc) else "changed")
        )
        if args.check and state != "same":
            problems.append(f"{case.id}: golden {state}")
        elif not args.check and state != "same":
            path.write_text(goldens.text(doc))
        rows.append((case.id, doc["provenance"]["obtained"], state))
    for path in sorted(goldens.GOLDENS_DIR.glob("*.json")):
        if path.stem not in wanted:
            if args.check:
                problems.append(f"{path.name}: no run case uses it")
            else:
                path.unlink()
                rows.append((path.stem, "-", "deleted"))
    print(f"{'case':<48} {'obtained':<9} state")
    for case_id, obtained, state in rows:
        print(f"{case_id:<48} {obtained:<9} {state}")
    for problem in problems:
        print(f"problem: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
