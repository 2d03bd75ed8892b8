"""Speculative decoding versus plain greedy decoding of the same target, in tokens per second.

    python tools/bench_speculative.py [--executor ort|native] [--new-tokens 64] [--width 4]
                                      [--rounds 5] [--json]

Builds, in a temporary folder, the generated speculative packages
(``fixtures/generators/speculative_block.py``) with a draft that agrees with the target at a
high rate (it prefers another token at 20% of its table rows) and at a low one (70%), for a
``block`` and a ``chained`` proposal and for the bare target with the draft as a bare decoder
of its own attached at lowering (``lowered``: ``Engine.from_dir(target, draft=...)``, a chained
proposal that reads token ids), and the target alone as a plain ``model.io`` decoder. Each
round runs one greedy request (one prompt row, end ids ignored so every run makes
``--new-tokens`` tokens) through every engine, in rotating order, so all see the same machine.
Reports, from one run, each configuration's tokens per second (median over the rounds), its
acceptance rate (accepted / proposed proposals) and the median of the paired ratios
(speculative tokens/s over plain tokens/s within a round). Every speculative run must give the
plain run's tokens (exit status 1 otherwise).

On these fixtures the draft and the target are graphs of the same size, so the ratio measures
what speculation saves in calls through the interpreter and the executor; with a target much
larger than its draft the saving grows with the acceptance rate.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures.generators.common import write_package  # noqa: E402
from fixtures.generators.speculative_block import (  # noqa: E402
    build,
    speculative_draft,
    speculative_target,
)
from reference_runtime import Engine  # noqa: E402

RATES = {"high": 0.2, "low": 0.7}  # the draft's disagreement: a high and a low acceptance
PROMPT = [[3, 7, 2, 9]]


def run(executor: str, new_tokens: int, width: int, rounds: int, log) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_package(speculative_target(), root / "plain")
        engines = {"plain": Engine.from_dir(root / "plain", executor=executor)}
        for mode in ("block", "chained"):
            for rate, disagree in RATES.items():
                name = f"{mode}/{rate}"
                write_package(build(mode, disagree), root / mode / rate)
                engines[name] = Engine.from_dir(root / mode / rate, executor=executor)
        for rate, disagree in RATES.items():  # the bare target, a bare draft attached
            write_package(speculative_draft(disagree), root / "draft" / rate)
            engines[f"lowered/{rate}"] = Engine.from_dir(
                root / "plain", executor=executor, draft=root / "draft" / rate
            )
        inputs = {"request.proposal_width": [width]}
        seconds: dict[str, list[float]] = {name: [] for name in engines}
        tokens: dict[str, list] = {}
        names = list(engines)
        for r in range(rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                extra = {} if name == "plain" else {"inputs": inputs}
                start = time.perf_counter()
                result = engines[name].run(
                    prompt=PROMPT, max_new_tokens=new_tokens, stop_on_eos=False, **extra
                )
                seconds[name].append(time.perf_counter() - start)
                tokens[name] = result.tokens
            log(f"round {r + 1}/{rounds}")
        report = {"executor": executor, "new_tokens": new_tokens, "width": width, "rows": []}
        plain_rate = [new_tokens / s for s in seconds["plain"]]
        for name in names:
            rates = [new_tokens / s for s in seconds[name]]
            counters = engines[name].counters["speculative"]
            row = {
                "config": name,
                "tokens_per_s": statistics.median(rates),
                "ratio": statistics.median(a / b for a, b in zip(rates, plain_rate, strict=True)),
                "acceptance": (counters["accepted"] / counters["proposed"])
                if counters["proposed"]
                else None,
                "same_tokens": tokens[name] == tokens["plain"],
            }
            report["rows"].append(row)
        return report


def table(report: dict) -> str:
    lines = [
        f"executor {report['executor']}, {report['new_tokens']} new tokens, width "
        f"{report['width']}",
        "",
        "| configuration | tokens/s | ratio to plain | acceptance | same tokens |",
        "|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        acceptance = "-" if row["acceptance"] is None else f"{row['acceptance']:.2f}"
        lines.append(
            f"| {row['config']} | {row['tokens_per_s']:.1f} | {row['ratio']:.2f} | "
            f"{acceptance} | {'yes' if row['same_tokens'] else 'NO'} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executor", choices=("ort", "native"), default="ort")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--width", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = run(
        args.executor,
        args.new_tokens,
        args.width,
        args.rounds,
        lambda message: print(message, file=sys.stderr),
    )
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0 if all(row["same_tokens"] for row in report["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
