"""How many of the reference runtime's deliberate faults the run suites catch (kill).

    python tools/fault_kill_count.py [--jobs N] [--fault NAME]...

For every fault of ``reference_runtime.faults.FAULTS`` (one at a time, through
``REFERENCE_RUNTIME_FAULT``) it certifies the reference runtime on every case that runs
requests (the golden, determinism, rows, executor and parity suites, and the run-time cases of
fail_closed), under ``reference:native`` for faults only a native executor shows and
``reference`` otherwise. A first row without any fault shows the suites pass as they are. It
prints one row per fault (the cases that failed, and one of them with what it got) and ends
with ``killed N/M faults``; a fault no case catches survives. Progress goes to stderr. The exit
status is 0 iff every fault is killed and the fault-free run has no failure.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from conformance.cases.catalogue import catalogue
from conformance.certify import certify
from reference_runtime.faults import ENVIRONMENT_VARIABLE, FAULTS

# Faults visible only under a given runtime spec (the rest are certified under `reference`).
SPECS = {"native_falls_back_to_ort": "reference:native"}


def run_cases():
    return [c for c in catalogue() if c.run is not None]


def failures(spec: str, fault: str | None, jobs: int, cases) -> list:
    previous = os.environ.pop(ENVIRONMENT_VARIABLE, None)
    if fault is not None:
        os.environ[ENVIRONMENT_VARIABLE] = fault
    try:
        _, results = certify(spec, {}, jobs, None, progress=True, cases=cases)
    finally:
        os.environ.pop(ENVIRONMENT_VARIABLE, None)
        if previous is not None:
            os.environ[ENVIRONMENT_VARIABLE] = previous
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
        spec = SPECS.get(fault, "reference")
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
