"""How many of the reference runtime's deliberate faults the run suites catch (kill).

    python tools/fault_kill_count.py [--jobs N] [--fault NAME]...

For every fault of ``tests/runtime_faults.py`` (one at a time, injected from outside the
runtime into its plain interpreter) it certifies the reference runtime on every case that runs
requests (the golden, determinism, rows, executor and parity suites, and the run-time cases of
fail_closed), on the plain interpreter the faults are injected into: under
``reference:native:plain`` for faults only a native executor shows and ``reference:plain``
otherwise. A first row without any fault shows the suites pass as they are. It
prints one row per fault (the cases that failed, and one of them with what it got) and ends
with ``killed N/M faults``; a fault no case catches survives. Progress goes to stderr. The exit
status is 0 iff every fault is killed and the fault-free run has no failure.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: tests/

from conformance.cases.catalogue import catalogue  # noqa: E402
from conformance.certify import certify  # noqa: E402
from tests.runtime_faults import FAULTS, injected  # noqa: E402

# Faults visible only under a given runtime spec (the rest are certified under
# `reference:plain`).
SPECS = {"native_falls_back_to_ort": "reference:native:plain"}


def run_cases():
    return [c for c in catalogue() if c.run is not None]


def failures(spec: str, fault: str | None, jobs: int, cases) -> list:
    with injected(fault):
        _, results = certify(spec, {}, jobs, None, progress=True, cases=cases)
    return [r for r in results if r.status == "failed"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--fault", action="append", choices=sorted(FAULTS))
    args = parser.parse_args(argv)
    faults = args.fault or sorted(FAULTS)
    cases = run_cases()
    rows = []
    start = time.perf_counter()
    for i, fault in enumerate([None, *faults]):
        spec = SPECS.get(fault, "reference:plain")
        label = fault or "(no fault)"
        print(f"[{i}/{len(faults)}] {label} under {spec}: {len(cases)} cases", file=sys.stderr)
        failed = failures(spec, fault, args.jobs, cases)
        example = f"{failed[0].case.id}: {failed[0].got}" if failed else "-"
        rows.append((label, spec, len(failed), example))
    killed = sum(1 for label, _, count, _ in rows[1:] if count > 0)
    print(f"{len(cases)} run cases per certification, {time.perf_counter() - start:.0f} s in all")
    print()
    print("| fault | runtime | cases failed | example failing case |")
    print("|---|---|---|---|")
    for label, spec, count, example in rows:
        print(f"| {label} | {spec} | {count} | {example[:160].replace('|', '/')} |")
    print()
    print(f"killed {killed}/{len(faults)} faults")
    clean = rows[0][2] == 0
    return 0 if clean and killed == len(faults) else 1


if __name__ == "__main__":
    sys.exit(main())
