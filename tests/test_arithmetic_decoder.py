"""The arithmetic decoder packages: both executors produce exactly the formula's tokens.

Expected results come from ``fixtures.generators.arithmetic`` (the formula and a Python copy
of the in-graph hash and sampler), never from an ONNX runtime.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import yaml

from fixtures import package_path
from fixtures.generators import arithmetic as A
from fixtures.generators.common import dump_document, write_package
from reference_runtime import Engine
from reference_runtime.package import validate_package

# every test here runs under the compiled interpreter and the plain one
pytestmark = pytest.mark.usefixtures("interpreter_mode")

EXECUTORS = ("ort", "native")
PACKAGES = tuple(A.GENERATORS)


@pytest.fixture(scope="module")
def engines():
    cache: dict = {}

    def get(package: str, executor: str) -> Engine:
        key = (package, executor)
        if key not in cache:
            cache[key] = Engine.from_dir(package_path(package), executor=executor)
        return cache[key]

    return get


def run(engine: Engine, request: dict):
    return engine.run(
        prompt=request.get("prompt"),
        inputs=dict(request.get("inputs") or {}),
        max_new_tokens=request.get("max_new_tokens"),
        seed=request.get("seed"),
        greedy=request.get("greedy", True),
        stop_on_eos=request.get("stop_on_eos", True),
    )


def assert_matches(result, expected: dict) -> None:
    assert result.tokens == expected["tokens"]
    assert result.finish_reasons == expected["finish_reasons"]
    lengths = result.outputs["sequence_lengths"]
    assert lengths.dtype == np.int64
    np.testing.assert_array_equal(lengths, expected["outputs"]["sequence_lengths"])
    got_rows = result.outputs.get("tokens")
    want_rows = expected["outputs"]["tokens"]
    if got_rows is None:  # nothing was published at all
        assert all(row is None for row in want_rows)
        return
    assert len(got_rows) == len(want_rows)
    for got, want in zip(got_rows, want_rows, strict=True):
        assert (got is None) == (want is None)
        if want is not None:
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------ the run cases


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case", A.RUN_CASES, ids=lambda c: c.id)
def test_run_case_gives_the_formulas_tokens(case, executor, engines):
    engine = engines(case.package, executor)
    for request in case.requests:
        assert_matches(run(engine, request), case.expected(dict(request)))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case", [c for c in A.RUN_CASES if c.rows_independent], ids=lambda c: c.id)
def test_batched_rows_equal_their_solo_runs(case, executor, engines):
    engine = engines(case.package, executor)
    for request in case.requests:
        batched = run(engine, request)
        for r in range(len(request["prompt"])):
            solo = dict(request)
            solo["prompt"] = [request["prompt"][r]]
            solo["inputs"] = {k: v[r : r + 1] for k, v in request["inputs"].items()}
            alone = run(engine, solo)
            assert alone.tokens == [batched.tokens[r]]
            assert alone.finish_reasons == [batched.finish_reasons[r]]
            assert alone.outputs["sequence_lengths"].tolist() == [
                batched.outputs["sequence_lengths"][r]
            ]


def test_run_cases_cover_the_brief():
    by_id = {c.id: c for c in A.RUN_CASES}
    assert len(by_id) == len(A.RUN_CASES)
    plain = "arithmetic_decoder"
    expected = {
        name: [
            by_id[f"{plain}/{name}"].expected(dict(r)) for r in by_id[f"{plain}/{name}"].requests
        ]
        for name in (
            "greedy_single",
            "greedy_batch_lengths",
            "end_token_early",
            "no_stop_on_eos",
            "sampled_two_seeds",
        )
    }
    # one row stops at the end token early, the other runs to the limit
    early = expected["end_token_early"][0]
    assert early["finish_reasons"] == ["stop", "length"]
    assert early["tokens"][0][-1] == A.END and len(early["tokens"][0]) < 8
    # without stop_on_eos the same row runs past the end token to max_new_tokens
    full = expected["no_stop_on_eos"][0]
    assert [len(t) for t in full["tokens"]] == [8, 8]
    assert full["tokens"][0][: len(early["tokens"][0])] == early["tokens"][0]
    # same seed twice: same tokens; another seed: other tokens
    first, again, other = (e["tokens"] for e in expected["sampled_two_seeds"])
    assert first == again and first != other
    # a right-padded row continues exactly as its unpadded prompt does
    single = expected["greedy_single"][0]["tokens"][0]
    mixed = expected["greedy_batch_lengths"][0]["tokens"]
    assert A.MIXED_PROMPT[1][:3] == [3, 1, 4] and mixed[1] == single[: len(mixed[1])]


# ------------------------------------------------------------------ sampling beyond the defaults


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    ("package", "temperature", "top_k", "seed"),
    [
        ("arithmetic_decoder", 2.0, 4, 5),  # ties among the zero logits: lowest indices kept
        ("arithmetic_decoder", 0.5, 0, 99),
        ("arithmetic_decoder_sampled", 1.5, 2, 31337),
        ("arithmetic_decoder_sampled", 3.0, 0, 8),
    ],
)
def test_sampling_keywords_follow_the_python_sampler(
    package, temperature, top_k, seed, executor, engines
):
    design = A.DESIGNS[package]
    prompts = [[4, 4, 4, 4], [0, 9, 2, 0]]
    lengths = [4, 3]
    result = engines(package, executor).run(
        prompt=prompts,
        inputs={"prompt_lengths": lengths},
        max_new_tokens=12,
        seed=seed,
        greedy=False,
        temperature=temperature,
        top_k=top_k,
    )
    for r in range(2):
        tokens, reason = A.simulate(
            design,
            prompts[r],
            length=lengths[r],
            max_new_tokens=12,
            seed=seed,
            temperature=temperature,
            top_k=top_k,
        )
        assert result.tokens[r] == tokens
        assert result.finish_reasons[r] == reason


@pytest.mark.parametrize("executor", EXECUTORS)
def test_custom_end_ids_and_budget(executor, engines):
    prompt = [[3, 1, 4]]
    greedy, _ = A.simulate(A.PLAIN, prompt[0], max_new_tokens=8)
    stop_at = greedy[2]
    result = engines("arithmetic_decoder", executor).run(
        prompt=prompt, inputs={"end_ids": [stop_at, 99]}, max_new_tokens=8
    )
    assert result.tokens == [greedy[:3]]
    assert result.finish_reasons == ["stop"]


def test_top_k_keeps_the_lowest_indices_among_ties():
    logits = A.logits_for(A.PLAIN, 3, 0)  # 4.0 at token 4, zeros elsewhere
    seen = {A.sample(logits, 50.0, 3, seed, 0) for seed in range(200)}
    assert seen == {0, 1, 4}


def test_splitmix_matches_the_published_sequence():
    # splitmix64 seeded with 0: the first outputs of the reference generator
    assert A.splitmix64(0, 0) == 0xE220A8397B1DCDAF
    assert A.splitmix64(0, 1) == 0x6E789E6AA1B965F4
    u = A.splitmix_uniform(0, 0)
    assert u == (0xE220A8397B1DCDAF >> 40) / 2**24 and 0 <= u < 1


# ------------------------------------------------------------------ the packages themselves


@pytest.mark.parametrize("package", PACKAGES)
def test_generator_is_deterministic(package, tmp_path):
    first, second = A.GENERATORS[package](), A.GENERATORS[package]()
    assert dump_document(first.document, first.metadata_name) == dump_document(
        second.document, second.metadata_name
    )
    assert first.graphs.keys() == second.graphs.keys()
    for relpath in first.graphs:
        a = first.graphs[relpath].SerializeToString(deterministic=True)
        b = second.graphs[relpath].SerializeToString(deterministic=True)
        assert a == b, relpath
    files_a = write_package(first, tmp_path / "a")
    files_b = write_package(second, tmp_path / "b")
    rel_a = [f.relative_to(tmp_path / "a") for f in files_a]
    assert rel_a == [f.relative_to(tmp_path / "b") for f in files_b]
    for rel in rel_a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
        # and the committed package is what the generator writes
        assert (package_path(package) / rel).read_bytes() == (tmp_path / "a" / rel).read_bytes()


@pytest.mark.parametrize("package", PACKAGES)
def test_package_is_valid_small_and_declares_exactly_the_derived_capabilities(package, tmp_path):
    root = package_path(package)
    assert validate_package(root) == []
    size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    assert size < 1_000_000
    # every listed capability is one the validator derives: dropping it is refused (H72)
    spec = A.GENERATORS[package]()
    capabilities = spec.document["pipeline"]["workflow"]["manifest"]["capabilities"]
    for capability in capabilities:
        mutated = copy.deepcopy(spec)
        listed = mutated.document["pipeline"]["workflow"]["manifest"]["capabilities"]
        listed.remove(capability)
        write_package(mutated, tmp_path / capability)
        codes = {(v.code, capability in v.message) for v in validate_package(tmp_path / capability)}
        assert ("H72", True) in codes, capability


@pytest.mark.parametrize("executor", EXECUTORS)
def test_executor_runs_every_component_itself(executor):
    engine = Engine.from_dir(package_path("arithmetic_decoder"), executor=executor)
    engine.run(prompt=[[1, 2, 3]], max_new_tokens=3)
    components = yaml.safe_load(
        (package_path("arithmetic_decoder") / "inference_metadata.yaml").read_text()
    )["pipeline"]["workflow"]["components"]
    assert engine.counters["sessions_created"] == {executor: len(components)}
    assert set(engine.counters["invocations"]) == set(components)
    assert all(set(v) == {executor} for v in engine.counters["invocations"].values())


@pytest.mark.parametrize("executor", EXECUTORS)
def test_positions_come_from_the_cache(executor, engines):
    """Padding a prompt changes nothing when its true length is given, and the tokens differ
    when the padding is counted: positions come from the valid cache entries."""
    engine = engines("arithmetic_decoder", executor)
    plain = engine.run(prompt=[[5, 6]], max_new_tokens=6).tokens
    padded = engine.run(prompt=[[5, 6, 0, 0]], inputs={"prompt_lengths": [2]}, max_new_tokens=6)
    counted = engine.run(prompt=[[5, 6, 0, 0]], max_new_tokens=6).tokens
    assert padded.tokens == plain
    assert counted != plain
    assert plain == [A.simulate(A.PLAIN, [5, 6], max_new_tokens=6)[0]]


@pytest.mark.parametrize("package", PACKAGES)
@pytest.mark.parametrize("fault", ["stale", "rows_swapped", "entry_lost"])
def test_a_mishandled_cache_changes_the_tokens(package, fault, monkeypatch):
    """Simulated runtime bugs on the carried cache: the formula's tokens no longer come out."""
    from reference_runtime.workflow import cells

    original = cells.next_value

    def faulty(carry, cell, grouped, values, merge, bounds, where):
        if carry.cell == "cache":
            old, new = values[carry.cell], values[carry.next]
            if fault == "stale":  # the prefill cache is fed again and again
                values[carry.next] = old
            elif fault == "rows_swapped":
                values[carry.next] = new[::-1].copy()
            else:  # the appended entry is lost
                lost = new.copy()
                lost[:, :, -1, :] = 0.0
                values[carry.next] = lost
        return original(carry, cell, grouped, values, merge, bounds, where)

    monkeypatch.setattr(cells, "next_value", faulty)
    engine = Engine.from_dir(package_path(package))
    request = {"prompt_lengths": A.MIXED_LENGTHS}
    result = engine.run(prompt=A.MIXED_PROMPT, inputs=request, max_new_tokens=6)
    expected = [
        A.simulate(A.DESIGNS[package], row, length=n, max_new_tokens=6)[0]
        for row, n in zip(A.MIXED_PROMPT, A.MIXED_LENGTHS, strict=True)
    ]
    assert result.tokens != expected
