"""Greedy decoding speed side by side: this project's runtime (ONNX Runtime and native
executors) against the installed peers (onnxruntime-genai, onnx-genai, nxrt), on the same
onnxruntime-genai folders, prompts and token ids.

    python tools/bench_peers.py [--models tiny,realistic] [--new-tokens 32] [--rounds 5]
                                [--long-position 1024] [--runners NAME,...] [--json FILE]

Models: ``tiny`` is the ``genai_decoder`` fixture (1 layer, hidden 32, vocabulary 96, context
64); ``realistic`` is a decoder of realistic shape with random weights, generated into a
temporary folder by the fixtures' decoder generator (6 layers, hidden 512, 8 query heads and 2
key/value heads, vocabulary 32,000, context 2,048; its pad id is its end id, whose logit is
biased down, so greedy decoding never stops early and every runner decodes every token).

Workloads: ``short`` decodes ``--new-tokens`` tokens after an 8-token prompt; ``long`` (the
realistic model only) decodes them after a ``--long-position``-token prompt, so the cost per
token at that position is visible. Per-token decode time is measured apart from the prompt: a
round times ``N+1`` new tokens, and 1 new token before and after it, and takes the difference
from the mean of the two over ``N`` (the prefill cancels out; at a long position its noise is
what remains, averaged over two timings). Rounds interleave the runners (each round runs every
runner once, in rotating order); figures are medians over the rounds. Every runner's tokens must equal the first
runner's: a runner that differs is reported as a mismatch, not timed. A peer that is not
installed (or whose library does not load) is skipped with the reason.

The table gives tokens per second of decoding (1 / per-token time), the time to the first
token (prompt plus one token), and the ratio of each runner's decode speed to ours under the
ONNX Runtime executor, plus ours at the long position relative to the short one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: fixtures/

from fixtures import package_path  # noqa: E402
from fixtures.generators.common import write_package  # noqa: E402
from fixtures.generators.genai_decoders import PLAIN, Design, build  # noqa: E402

REALISTIC = Design(
    name="realistic_decoder",
    seed=31337,
    vocab=32000,
    hidden=512,
    heads=8,
    kv_heads=2,
    layers=6,
    context_length=2048,
    bos=1,
    eos=2,
    pad=2,  # the end id's logit gets the pad bias: greedy decoding never ends a row early
    embed_scale=1.0,
    position_scale=0.5,
)
PROMPT_LENGTH = 8


@dataclasses.dataclass
class Runner:
    name: str
    # folder -> generate(prompt tokens, new tokens) -> the new token ids
    load: Callable[[Path], Callable[[list[int], int], list[int]]]


def ours(executor: str) -> Runner:
    from reference_runtime import Engine

    def load(folder: Path):
        engine = Engine.from_dir(folder, executor=executor)

        def generate(prompt, new):
            result = engine.run(prompt=[prompt], max_new_tokens=new, greedy=True)
            return list(result.tokens[0])

        return generate

    return Runner(f"ours ({executor})", load)


def protocol_runner(name: str, factory: Callable) -> Runner:
    """A peer behind its conformance adapter (the same calls certification makes)."""

    def load(folder: Path):
        runtime = factory()
        handle = runtime.load(str(folder))

        def generate(prompt, new):
            request = {"prompt": [prompt], "max_new_tokens": new, "greedy": True}
            return list(runtime.run(handle, request)["tokens"][0])

        return generate

    return Runner(name, load)


def peers() -> tuple[list[Runner], dict[str, str]]:
    """The installed peers, and why each missing one is skipped."""
    found, skipped = [], {}
    try:
        from conformance.runtimes.ort_genai import factory

        factory()
        found.append(protocol_runner("onnxruntime-genai", factory))
    except Exception as exc:  # not installed, or its library does not load
        skipped["onnxruntime-genai"] = f"{type(exc).__name__}: {exc}"
    from conformance.runtimes import onnx_genai

    for name, make in (("onnx-genai", onnx_genai.onnx_genai), ("nxrt", onnx_genai.nxrt)):
        try:
            make()
            found.append(protocol_runner(name, make))
        except Exception as exc:
            skipped[name] = f"{type(exc).__name__}: {exc}"
    return found, skipped


def prompt_of(design: Design, length: int) -> list[int]:
    """A deterministic prompt of ``length`` ids that are not special."""
    usable = [t for t in range(design.vocab) if t not in (design.bos, design.pad, *design.eos_ids)]
    return [usable[(7 * i + 3) % len(usable)] for i in range(length)]


def measure(generators: dict, prompt: list[int], new: int, rounds: int, log) -> dict:
    """Per runner: median seconds per decoded token, median time to the first token, and the
    tokens (or the mismatch)."""
    names = list(generators)
    reference = generators[names[0]](prompt, new + 1)
    tokens, mismatched = {}, {}
    for name in names:
        got = generators[name](prompt, new + 1)  # also warms up
        tokens[name] = got
        if got != reference:
            mismatched[name] = got
    timed = [n for n in names if n not in mismatched]
    per_token = {n: [] for n in timed}
    first = {n: [] for n in timed}
    for r in range(rounds):
        order = timed[r % len(timed) :] + timed[: r % len(timed)]
        for name in order:
            generate = generators[name]
            start = time.perf_counter()
            generate(prompt, 1)
            one = time.perf_counter() - start
            start = time.perf_counter()
            decoded = len(generate(prompt, new + 1)) - 1  # fewer when a row ends early
            many = time.perf_counter() - start
            start = time.perf_counter()
            generate(prompt, 1)  # the prompt's time again, after: its noise averages out
            one = (one + time.perf_counter() - start) / 2
            per_token[name].append(max(many - one, 1e-9) / max(decoded, 1))
            first[name].append(one)
        log(f"  round {r + 1}/{rounds}")
    return {
        "tokens": reference,
        "mismatch": {n: {"want": reference, "got": t} for n, t in mismatched.items()},
        "per_token_s": {n: statistics.median(v) for n, v in per_token.items()},
        "first_token_s": {n: statistics.median(v) for n, v in first.items()},
    }


def run(models: list[str], new: int, rounds: int, long_position: int, only, log) -> dict:
    runners = [ours("ort"), ours("native")]
    found, skipped = peers()
    runners += found
    if only:
        runners = [r for r in runners if r.name in only or r.name.split(" ")[0] in only]
    report = {"skipped": skipped, "workloads": []}
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        for model in models:
            if model == "tiny":
                design, folder = PLAIN, package_path(PLAIN.name)
                workloads = [("short", PROMPT_LENGTH)]
            else:
                design, folder = REALISTIC, Path(tmp) / REALISTIC.name
                log(f"generating the realistic decoder into {folder} ...")
                write_package(build(REALISTIC), folder)
                workloads = [("short", PROMPT_LENGTH), ("long", long_position)]
            generators = {}
            for runner in runners:
                try:
                    generators[runner.name] = runner.load(folder)
                except Exception as exc:
                    report["skipped"][f"{runner.name} on {model}"] = f"{type(exc).__name__}: {exc}"
            for workload, length in workloads:
                if length + new + 1 > design.context_length:
                    continue
                log(f"{model} / {workload}: prompt {length}, {new} new tokens, {rounds} rounds")
                figures = measure(generators, prompt_of(design, length), new, rounds, log)
                report["workloads"].append({"model": model, "workload": workload,
                                            "prompt": length, **figures})  # fmt: skip
    return report


def table(report: dict) -> str:
    lines = ["| model | workload | runner | decode tok/s | first token ms | ratio to ours (ort) |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for w in report["workloads"]:
        base = w["per_token_s"].get("ours (ort)")
        for name, seconds in w["per_token_s"].items():
            ratio = f"{base / seconds:.2f}x" if base else "-"
            lines.append(f"| {w['model']} | {w['workload']} (prompt {w['prompt']}) | {name} | "
                         f"{1 / seconds:,.0f} | {w['first_token_s'][name] * 1e3:.1f} | {ratio} |")  # fmt: skip
        for name in w["mismatch"]:
            lines.append(f"| {w['model']} | {w['workload']} | {name} | mismatch: other tokens "
                         "(not timed) | - | - |")  # fmt: skip
    by = {(w["model"], w["workload"]): w["per_token_s"] for w in report["workloads"]}
    notes = []
    for model in sorted({w["model"] for w in report["workloads"]}):
        short, long_ = by.get((model, "short"), {}), by.get((model, "long"), {})
        for name in short:
            if name in long_:
                notes.append(f"- {model}, {name}: per-token time at the long position is "
                             f"{long_[name] / short[name]:.2f}x the short one")  # fmt: skip
        if "onnxruntime-genai" in short and "ours (ort)" in short:
            notes.append(f"- {model}: ours (ort) decodes at "
                         f"{short['onnxruntime-genai'] / short['ours (ort)']:.2f}x "
                         "onnxruntime-genai's tokens/s")  # fmt: skip
        if "ours (native)" in short and "ours (ort)" in short:
            notes.append(f"- {model}: ours (native) at "
                         f"{short['ours (ort)'] / short['ours (native)']:.2f}x ours (ort)")  # fmt: skip
    skipped = [f"- skipped {name}: {why}" for name, why in report["skipped"].items()]
    return "\n".join(lines + [""] + notes + skipped) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny,realistic")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--long-position", type=int, default=1024)
    parser.add_argument("--runners", help="only these runners (comma-separated names)")
    parser.add_argument("--json", help="also write the figures as JSON to this file")
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    unknown = sorted(set(models) - {"tiny", "realistic"})
    if unknown or args.new_tokens < 1 or args.rounds < 1:
        print("bench_peers: --models takes tiny and/or realistic; --new-tokens and --rounds "
              "are at least 1", file=sys.stderr)  # fmt: skip
        return 2
    started = time.perf_counter()

    def log(message):
        print(f"[{time.perf_counter() - started:6.1f} s] {message}", file=sys.stderr, flush=True)

    only = set(args.runners.split(",")) if args.runners else None
    report = run(models, args.new_tokens, args.rounds, args.long_position, only, log)
    print(table(report), end="")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 1 if any(w["mismatch"] for w in report["workloads"]) else 0


if __name__ == "__main__":
    sys.exit(main())
