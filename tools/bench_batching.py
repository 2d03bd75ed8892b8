"""Continuous batching throughput: the same requests served in one continuous batch
(``Engine.serve``) versus run one by one (``Engine.run``), on each executor.

    python tools/bench_batching.py [--package fixtures/packages/genai_decoder] [--requests 16]
                                   [--new-tokens 16] [--slots 1,4,8] [--samples 3]
                                   [--executors ort,native] [--stagger 2]

The requests have prompts of 4 to 16 random tokens and the same ``--new-tokens`` bound (so one
body serves every admitted request); request ``i`` arrives at batch step ``i * --stagger``
(``0``: all at once). End tokens do not stop a row (``stop_on_eos`` off), so every request
generates exactly ``--new-tokens`` tokens. A sample times the one-by-one runs and each batch
size in rotating order, so every path sees the same machine; the figures are the medians over
the samples of the generated tokens per second, and of the paired ratio (one-by-one time /
batched time within a sample: above 1.0 the batch is faster). The served tokens are checked
against the one-by-one tokens: a difference is reported and the exit status is 1.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reference_runtime import Engine  # noqa: E402

DEFAULT = ROOT / "fixtures" / "packages" / "genai_decoder"


def make_requests(count: int, new_tokens: int, stagger: int, vocab: int) -> list[dict]:
    rng = np.random.default_rng(0)
    return [
        {
            "prompt": rng.integers(4, vocab, size=int(rng.integers(4, 17))).tolist(),
            "max_new_tokens": new_tokens,
            "stop_on_eos": False,
            "arrival": i * stagger,
        }
        for i in range(count)
    ]


def vocabulary(engine) -> int:
    """The vocabulary size: the last extent of a declared ``logits`` port (32 when none)."""
    for comp in engine.package.metadata.workflow.components.values():
        logits = comp.ports.outputs.get("logits") if comp.ports else None
        if logits is not None and logits.shape and isinstance(logits.shape[-1], int):
            return logits.shape[-1]
    return 32


def one_by_one(engine, requests) -> tuple[float, list]:
    start = time.perf_counter()
    tokens = [
        engine.run(
            prompt=[r["prompt"]], max_new_tokens=r["max_new_tokens"], stop_on_eos=False
        ).tokens[0]
        for r in requests
    ]
    return time.perf_counter() - start, tokens


def batched(engine, requests, slots: int) -> tuple[float, list]:
    start = time.perf_counter()
    served = {s.index: s.result.tokens[0] for s in engine.serve(requests, slots=slots)}
    elapsed = time.perf_counter() - start
    return elapsed, [served[i] for i in range(len(requests))]


def bench(package, executor, requests, slot_sizes, samples) -> dict:
    engine = Engine.from_dir(package, executor=executor)
    generated = sum(r["max_new_tokens"] for r in requests)
    one_by_one(engine, requests[:2])  # warm up both paths
    batched(engine, requests[:2], 2)
    paths = ["one by one", *(f"slots {n}" for n in slot_sizes)]
    times: dict[str, list[float]] = {p: [] for p in paths}
    ratios: dict[str, list[float]] = {p: [] for p in paths[1:]}
    mismatches = []
    for sample in range(samples):
        order = paths[sample % len(paths) :] + paths[: sample % len(paths)]
        elapsed, reference = {}, None
        results = {}
        for path in order:
            if path == "one by one":
                elapsed[path], results[path] = one_by_one(engine, requests)
            else:
                elapsed[path], results[path] = batched(engine, requests, int(path.split()[1]))
        reference = results["one by one"]
        for path in paths:
            times[path].append(elapsed[path])
            if path != "one by one":
                ratios[path].append(elapsed["one by one"] / elapsed[path])
                if results[path] != reference:
                    mismatches.append(path)
    return {
        "executor": executor,
        "tokens": generated,
        "tokens_per_s": {p: generated / statistics.median(t) for p, t in times.items()},
        "ratio": {p: statistics.median(r) for p, r in ratios.items()},
        "mismatch": sorted(set(mismatches)),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", default=str(DEFAULT))
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--slots", default="1,4,8")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--executors", default="ort,native")
    parser.add_argument("--stagger", type=int, default=2)
    args = parser.parse_args(argv)
    slot_sizes = [int(n) for n in args.slots.split(",") if n.strip()]
    vocab = vocabulary(Engine.from_dir(args.package))
    requests = make_requests(args.requests, args.new_tokens, args.stagger, vocab)
    print(
        f"{args.requests} requests, {args.new_tokens} new tokens each, prompts 4-16 tokens, "
        f"request i arrives at step {args.stagger}*i; {args.samples} samples; "
        f"package {Path(args.package).name}"
    )
    print("| executor | path | tokens/s | ratio vs one by one |")
    print("|---|---|---|---|")
    failed = False
    for executor in [e for e in args.executors.split(",") if e]:
        report = bench(args.package, executor, requests, slot_sizes, args.samples)
        for path, rate in report["tokens_per_s"].items():
            ratio = report["ratio"].get(path)
            shown = "1.00" if ratio is None else f"{ratio:.2f}"
            note = " (mismatch: other tokens)" if path in report["mismatch"] else ""
            print(f"| {executor} | {path} | {rate:.1f} | {shown}{note} |")
        failed = failed or bool(report["mismatch"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
