"""Run the ONNX backend node cases through the native executor and report per op type.

    python tools/native_node_report.py [--failures]

Cases whose op types all have native kernels are run (passed / failed); cases listed in
tests/native_node_exclusions.yaml (refused by design, or failing for a stated reason) are
counted as excluded; the others are counted as not implemented.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.native_node_cases import (  # noqa: E402
    applicable,
    corpus,
    exclusions,
    op_types,
    refusal_reason,
)
from tests.test_native_node_cases import run_case  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--failures", action="store_true", help="print each failure")
    args = parser.parse_args(argv)
    cases = applicable()
    excluded = exclusions()
    table: dict[str, Counter] = defaultdict(Counter)
    failures = []
    for i, case in enumerate(cases, 1):
        ops = sorted(op for _, op in op_types(case.model))
        key = case.name.removeprefix("test_").split("_expanded")[0]
        label = ops[0] if len(ops) == 1 else key
        if i % 100 == 0:
            print(f"[{i}/{len(cases)}]", file=sys.stderr)
        if case.name in excluded or refusal_reason(case.name) is not None:
            table[label]["excluded"] += 1
            continue
        try:
            run_case(case)
        except AssertionError as exc:
            table[label]["failed"] += 1
            failures.append((case.name, str(exc).splitlines()[0][:160]))
        else:
            table[label]["passed"] += 1
    total = Counter()
    print(f"{'op / case family':<40} {'passed':>7} {'failed':>7} {'excluded':>9}")
    for label in sorted(table):
        row = table[label]
        total.update(row)
        print(f"{label:<40} {row['passed']:>7} {row['failed']:>7} {row['excluded']:>9}")
    ran = total["passed"] + total["failed"]
    rate = total["passed"] / ran if ran else 0.0
    print(f"{'total':<40} {total['passed']:>7} {total['failed']:>7} {total['excluded']:>9}")
    print(f"corpus: {len(corpus())} cases; run: {len(cases)}; not implemented: "
          f"{len(corpus()) - len(cases)}; pass rate of run cases: {rate:.2%}")  # fmt: skip
    if args.failures:
        for name, reason in failures:
            print(f"FAILED {name}: {reason}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
