"""One engine shared by several threads gives every request the result it gets alone.

Each package runs a set of different requests once on one thread (the reference), then the
same requests, shuffled and repeated, from several threads at once on the same engine; every
result must equal its reference, and the counters must count every run exactly.
"""

from __future__ import annotations

import random
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from fixtures import package_path
from reference_runtime import Engine, RunError

THREADS = 6
REPEATS = 3


def lora_jobs(engine):
    def job(segments, counts, scales, active):
        def run():
            inputs = {
                "activations": np.array([[1.0, 2.0], [3.0, -1.0]], np.float32),
                "request.adapter_segments": segments,
                "request.adapter_counts": counts,
                "request.adapter_scales": np.asarray(scales, np.float32),
                "request.adapter_active": active,
            }
            return engine.run(inputs=inputs).outputs["result"].tolist()

        return run

    return [
        job([[0, -1], [1, 0]], [1, 2], [[2.0, 0.0], [1.0, 0.5]], [True, True]),
        job([[1, -1], [0, -1]], [1, 1], [[0.5, 0.0], [3.0, 0.0]], [True, True]),
        job([[0, 1], [0, -1]], [2, 0], [[1.0, -1.0], [0.0, 0.0]], [True, True]),
        job([[0, -1], [1, -1]], [1, 1], [[1.0, 0.0], [1.0, 0.0]], [False, True]),
    ]


def conversation_jobs(engine):
    """Two turns of a conversation in a session of its own (the decoder keeps its KV between
    turns): the sessions' turns interleave across threads."""

    def job(first, second, seed):
        def run():
            sid = engine.create_session()
            kw = dict(max_new_tokens=4, greedy=False, temperature=1.5, seed=seed)
            one = engine.run(prompt=[first], session_id=sid, **kw).tokens
            two = engine.run(prompt=[second], session_id=sid, **kw).tokens
            engine.close_session(sid)
            return one, two

        return run

    return [job([5, 6, 7], [9, 10], 1), job([11, 3], [4], 2), job([2, 2, 2, 2], [8, 1], 3)]


def sampled_jobs(engine):
    def job(prompts, lengths, seed, temperature, top_k):
        def run():
            result = engine.run(
                prompt=prompts,
                inputs={"prompt_lengths": lengths},
                max_new_tokens=8,
                seed=seed,
                greedy=False,
                temperature=temperature,
                top_k=top_k,
            )
            return result.tokens, result.finish_reasons

        return run

    return [
        job([[4, 4, 4, 4], [0, 9, 2, 0]], [4, 3], 31337, 1.5, 2),
        job([[1, 2, 3, 0]], [3], 8, 3.0, 0),
        job([[7, 7, 0, 0], [5, 1, 1, 1]], [2, 4], 99, 0.7, 3),
    ]


def decoder_jobs(engine):
    def job(prompt, **kw):
        return lambda: engine.run(prompt=prompt, max_new_tokens=6, **kw).tokens

    return [
        job([[5, 6, 7]]),
        job([[5, 6, 7]], greedy=False, temperature=2.0, seed=11),
        job([[1, 2], [3, 4]], greedy=False, temperature=1.0, top_p=0.9, seed=4),
        job([[9, 10, 11]], greedy=False, temperature=0.8, top_k=5, seed=2**40),
    ]


WORKLOADS = {
    "lora": lora_jobs,
    "genai_decoder_gqa": conversation_jobs,
    "arithmetic_decoder_sampled": sampled_jobs,
    "genai_decoder": decoder_jobs,
}


def _steady(counters: dict) -> dict:
    """The counts a run adds the same whatever the order (the adapter cache's hits and loads
    depend on it)."""
    return {k: v for k, v in counters.items() if k not in ("adapter_cache", "sessions_created")}


def _delta(before: dict, after: dict):
    if isinstance(after, dict):
        return {
            k: _delta(before.get(k, {} if isinstance(v, dict) else 0), v) for k, v in after.items()
        }
    return after - before


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "plain"])
def test_threads_sharing_engines_get_the_single_threaded_results(compiled):
    engines = {name: Engine.from_dir(package_path(name), compiled=compiled) for name in WORKLOADS}
    jobs = [(name, i, run) for name, make in WORKLOADS.items()
            for i, run in enumerate(make(engines[name]))]  # fmt: skip
    alone = {(name, i): run() for name, i, run in jobs}
    start = {name: engine.counters for name, engine in engines.items()}
    for name, i, run in jobs:  # once more alone: what one pass adds to the counters
        assert run() == alone[(name, i)]
    per_pass = {name: _delta(start[name], engines[name].counters) for name in engines}

    shuffled = [(name, i, run) for _ in range(REPEATS) for name, i, run in jobs]
    random.Random(7).shuffle(shuffled)
    before = {name: engine.counters for name, engine in engines.items()}
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as the interpreter allows
    try:
        with ThreadPoolExecutor(THREADS) as pool:
            results = list(pool.map(lambda job: (job[0], job[1], job[2]()), shuffled))
    finally:
        sys.setswitchinterval(interval)
    assert len(results) == len(shuffled) == REPEATS * len(jobs)
    wrong = [(name, i) for name, i, result in results if result != alone[(name, i)]]
    assert not wrong, f"results differ from the single-threaded ones: {wrong}"
    for name, engine in engines.items():
        added = _steady(_delta(before[name], engine.counters))
        assert added == _steady({k: _times(v, REPEATS) for k, v in per_pass[name].items()})


def _times(value, n):
    return {k: _times(v, n) for k, v in value.items()} if isinstance(value, dict) else value * n


def test_a_session_runs_one_turn_at_a_time():
    engine = Engine.from_dir(package_path("genai_decoder_gqa"))
    sid = engine.create_session()
    with engine._store.turn(sid):  # a turn of this session is in flight
        for attempt in (
            lambda: engine.run(prompt=[[5, 6]], max_new_tokens=2, session_id=sid),
            lambda: engine.reset_session(sid),
            lambda: engine.close_session(sid),
        ):
            with pytest.raises(RunError) as err:
                attempt()
            assert err.value.code == "E58" and "in use by a run" in err.value.message
    assert engine.run(prompt=[[5, 6]], max_new_tokens=2, session_id=sid).tokens
    engine.close_session(sid)
