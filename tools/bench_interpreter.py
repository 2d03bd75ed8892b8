"""Interpreter overhead: the decoder package through ``Engine`` versus the same ONNX Runtime
sessions driven by a minimal hand-written loop (a transcription of the package's steps).

    python tools/bench_interpreter.py [--package ../shared/upstream-fixtures/decoder]
                                      [--tokens 64] [--samples 5] [--rounds 10]

A sample is ``--rounds`` rounds; each round runs one request through the Engine with its
compiled interpreter (the default), one through the plain interpreter (``compiled=False``) and
one through the hand-written loop, in rotating order, so all paths see the same machine (a
shared machine's speed drifts by tens of percent within seconds). Reports, from one run, for
each interpreter: the median over the samples of the paired throughput ratio (hand-written time
/ Engine time within a sample, so 1.0 means no overhead; the target, for the compiled one, is
>= 0.95) and the interpreter's overhead per invoke in microseconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from reference_runtime import Engine

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "upstream-fixtures" / "decoder"


def hand_written(sessions, prompt: np.ndarray, max_tokens: int) -> list[int]:
    """The decoder workflow's steps, written out by hand against the raw ORT sessions."""

    def run(name, feeds, outputs):
        return sessions[name].session.run(outputs, feeds)

    batch = prompt.shape[0]
    max_it = np.array([max_tokens], np.int64)
    ones = np.ones(batch, np.int64)
    zeros = np.zeros(batch, np.int64)
    active = np.ones(batch, bool)
    done = np.zeros(batch, bool)
    (mask, body_mask, token, lengths, cache_lengths, pos, body_pos, past) = run(
        "decoder_state_initializer",
        {"prompt_tokens": prompt, "prompt_lengths": -ones, "max_iterations": max_it},
        ["attention_mask", "body_attention_mask", "token_slot", "generated_lengths",
         "cache_lengths", "position_ids", "body_position_ids", "past_key_values.0.key"],
    )  # fmt: skip
    logits, cache = run(
        "model",
        {"input_ids": prompt, "past_key_values.0.key": past, "attention_mask": mask,
         "position_ids": pos},
        ["logits", "present.0.key"],
    )  # fmt: skip
    eos, eos_len, row_max = run(
        "termination_batch_initializer",
        {"input_eos_ids": np.full((batch, 1), 127, np.int64), "input_eos_lengths": ones,
         "input_max_iterations": -ones, "fallback_max_iterations": max_it, "active": active},
        ["row_eos_ids", "eos_lengths", "max_iterations"],
    )  # fmt: skip
    (logits,) = run("last_token_logits", {"logits": logits}, ["last_logits"])
    counter = zeros
    temperature, top_k = np.zeros(batch, np.float32), ones
    top_p, min_p = np.ones(batch, np.float32), np.zeros(batch, np.float32)
    mask, pos = body_mask, body_pos
    out = []
    for i in range(max_tokens):
        if not active.any():
            break
        sample, counter_next = run(
            "token_sampler",
            {"logits": logits, "temperature": temperature, "top_k": top_k, "top_p": top_p,
             "min_p": min_p, "seed": zeros, "counter": counter, "active": active, "done": done},
            ["token", "next_counter"],
        )  # fmt: skip
        (slot,) = run("token_to_slot", {"token": sample}, ["slot"])
        feeds = {"active": active, "done": done}
        (lengths,) = run(
            "generated_length_update", {"left": lengths, "right": ones, **feeds}, ["total"]
        )
        (emitted,) = run(
            "generated_length_update", {"left": zeros, "right": ones, **feeds}, ["total"]
        )
        (token,) = run("token_state_update", {"current": token, "update": slot, **feeds}, ["next"])
        done_next, _, active_next = run(
            "termination",
            {"tokens": sample, "eos_ids": eos, "eos_lengths": eos_len,
             "iteration": np.array([i], np.int64), "max_iterations": row_max, "active": active},
            ["done", "continue", "next_active"],
        )  # fmt: skip
        (cache_lengths,) = run(
            "cache_length_update", {"left": cache_lengths, "right": ones, **feeds}, ["total"]
        )
        run("cache_length_update", {"left": zeros, "right": ones, **feeds}, ["total"])
        out.append(int(token[0, 0]) if active[0] and emitted[0] else None)
        mask, pos_next = run(
            "decoder_step_update",
            {"attention_mask": mask, "logical_length": cache_lengths, "position_ids": pos},
            ["next_attention_mask", "next_position_ids"],
        )  # fmt: skip
        logits, cache = run(
            "model",
            {"input_ids": token, "past_key_values.0.key": cache, "attention_mask": mask,
             "position_ids": pos},
            ["logits", "present.0.key"],
        )  # fmt: skip
        (logits,) = run("last_token_logits", {"logits": logits}, ["last_logits"])
        pos, counter, active, done = pos_next, counter_next, active_next, done_next
    return out


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", type=Path, default=DEFAULT)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=10, help="request triples per sample")
    args = parser.parse_args(argv)
    if not (args.package / "inference_metadata.yaml").exists():
        print(f"no decoder package at {args.package}", file=sys.stderr)
        return 2
    engines = {
        "compiled": Engine.from_dir(args.package),
        "plain": Engine.from_dir(args.package, compiled=False),
    }
    sessions = engines["compiled"]._sessions
    prompt = np.array([[1, 2, 3, 4]], np.int64)
    paths = {
        mode: (lambda engine=engine: engine.run(prompt=prompt, max_new_tokens=args.tokens))
        for mode, engine in engines.items()
    }
    paths["hand"] = lambda: hand_written(sessions, prompt, args.tokens)
    expected = paths["compiled"]().tokens[0]
    produced = [t for t in paths["hand"]() if t is not None]
    if produced != expected or paths["plain"]().tokens[0] != expected:
        print(f"the paths disagree: hand {produced}, engine {expected}")
        return 1
    counters = engines["compiled"]
    before = sum(sum(v.values()) for v in counters.counters["invocations"].values())
    paths["compiled"]()
    invokes = sum(sum(v.values()) for v in counters.counters["invocations"].values()) - before
    for _ in range(2):  # warm up every path
        for fn in paths.values():
            fn()
    order = ["compiled", "plain", "hand"]
    samples: dict[str, list] = {"compiled": [], "plain": []}
    overheads: dict[str, list] = {"compiled": [], "plain": []}
    for i in range(args.samples):
        times = dict.fromkeys(order, 0.0)
        for r in range(args.rounds):
            # The order rotates, so no path always runs on a machine another one warmed.
            for name in order[r % 3 :] + order[: r % 3]:
                times[name] += timed(paths[name])
        for name in times:
            times[name] /= args.rounds
        for mode in samples:
            samples[mode].append(times["hand"] / times[mode])
            overheads[mode].append((times[mode] - times["hand"]) / invokes * 1e6)
        print(f"[{i + 1}/{args.samples}] compiled {times['compiled'] * 1e3:8.2f} ms   plain "
              f"{times['plain'] * 1e3:8.2f} ms   hand {times['hand'] * 1e3:8.2f} ms (per request)",
              file=sys.stderr)  # fmt: skip
    print(f"{'metric':<44} value")
    print(f"{'tokens per request':<44} {args.tokens}")
    print(f"{'invokes per request':<44} {invokes}")
    for mode in samples:
        ratio = statistics.median(samples[mode])
        target = "  (target >= 0.95)" if mode == "compiled" else ""
        print(f"{f'median paired ratio (hand / {mode})':<44} {ratio:.3f}{target}")
        print(f"{f'interpreter overhead per invoke ({mode})':<44} "
              f"{statistics.median(overheads[mode]):.1f} us")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
