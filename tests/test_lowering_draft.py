"""A bare decoder lowered with a draft (``Engine.from_dir(target, draft=folder)``): greedy
speculative decoding equals plain greedy decoding of the target, token for token, on both
executors and for every proposal width; the counters show that proposals were accepted,
rejected and rolled back; what the pair cannot run is refused with its code."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import yaml

from fixtures import package_path
from fixtures.generators.common import write_package
from fixtures.generators.speculative_block import (
    PROMPTS,
    greedy,
    speculative_draft,
)
from reference_runtime import Engine, validate_package
from reference_runtime.cli import main
from reference_runtime.errors import PackageError, RunError, UsageError
from reference_runtime.package.lowering import lower
from reference_runtime.package.lowering.speculative import MAX_PROPOSAL_WIDTH

EXECUTORS = ("ort", "native")
# (target, draft): the running-sum pair (a formula) and two small transformers
PAIRS = (("speculative_target", "speculative_draft"), ("genai_decoder", "genai_draft"))
RAGGED = {
    "speculative_target": PROMPTS,
    "genai_decoder": [[5, 6, 7], [9], [10, 11, 12, 13, 14, 15]],
}


def _width(width: int) -> dict:
    return {"request.proposal_width": np.array([width], dtype=np.int64)}


@pytest.fixture(scope="module")
def drafted():
    """``drafted(target, draft, executor)``: one engine per pair and executor."""
    cache = {}

    def get(target, draft, executor):
        if (target, draft, executor) not in cache:
            cache[target, draft, executor] = Engine.from_dir(
                package_path(target), executor, draft=package_path(draft)
            )
        return cache[target, draft, executor]

    return get


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p[0])
@pytest.mark.parametrize("width", range(1, MAX_PROPOSAL_WIDTH + 1))
def test_greedy_speculation_with_a_draft_equals_plain_greedy(
    engines, drafted, pair, executor, width
):
    target, draft = pair
    prompts = RAGGED[target]
    plain = engines(target, executor).run(prompt=prompts, max_new_tokens=24, stop_on_eos=False)
    engine = drafted(target, draft, executor)
    assert engine.provenance == "lowered"
    before = engine.counters["speculative"]
    result = engine.run(prompt=prompts, max_new_tokens=24, stop_on_eos=False, inputs=_width(width))
    after = engine.counters["speculative"]
    assert result.tokens == plain.tokens
    assert result.finish_reasons == plain.finish_reasons
    if target == "speculative_target":  # the formula, too
        assert plain.tokens == [greedy(p, 24, stop_on_eos=False)[0] for p in prompts]
    done = {key: after[key] - before[key] for key in after}
    assert done["steps"] > 0
    assert done["proposed"] % width == 0 and done["proposed"] >= width * done["steps"]
    assert done["committed"] == sum(len(row) for row in result.tokens)
    assert 0 < done["accepted"] < done["proposed"], done  # accepted and rejected
    assert done["rollbacks"] > 0, done


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p[0])
def test_eos_and_the_context_bound_end_rows_as_plain_decoding_does(engines, drafted, pair):
    target, draft = pair
    engine = drafted(target, draft, "ort")
    plain = engines(target, "ort")
    long = list(range(1, 15)) * 4  # 56 tokens: the context (64) ends the row
    for prompt, keywords, reason in (
        # the context ends the long row, close enough to it that a step proposes fewer tokens
        # than the width
        ([long[:56], [3, 4]], {"stop_on_eos": False, "max_new_tokens": 20}, "context_length"),
        ([[1, 2, 5], *RAGGED[target]], {"max_new_tokens": 60}, "stop"),  # end ids
        # the package's default bound: max_length (genai_config), else the context
        ([[5, 6, 7]], {"stop_on_eos": False}, None),
    ):
        expected = plain.run(prompt=prompt, **keywords)
        got = engine.run(prompt=prompt, inputs=_width(MAX_PROPOSAL_WIDTH), **keywords)
        assert got.tokens == expected.tokens
        assert got.finish_reasons == expected.finish_reasons
        assert reason is None or reason in expected.finish_reasons


def test_the_proposer_is_called_once_per_proposal():
    engine = Engine.from_dir(
        package_path("speculative_target"), draft=package_path("speculative_draft")
    )
    engine.run(prompt=[[3, 7, 2]], max_new_tokens=12, inputs=_width(3))
    counters = engine.counters
    spec = counters["speculative"]
    calls = {name: sum(counters["invocations"][name].values()) for name in ("target", "draft")}
    assert calls["target"] == spec["steps"] + 1  # the prefill, then one verification per step
    # one call per proposal: the first reads the pending tokens, each later one a proposal
    assert calls["draft"] == spec["proposer_calls"] == 3 * spec["steps"]
    assert counters["contract_executions"]["onnx-genai.speculative-block"] == spec["steps"] + 1


def test_a_draft_that_always_agrees_accepts_every_proposal(tmp_path):
    """Unlike a chained proposal fed embeddings (at most width - 1), a proposer that reads token
    ids may accept all of them: nothing is rolled back."""
    write_package(speculative_draft(disagree=0.0), tmp_path / "draft")
    engine = Engine.from_dir(package_path("speculative_target"), draft=tmp_path / "draft")
    result = engine.run(prompt=PROMPTS, max_new_tokens=16, inputs=_width(MAX_PROPOSAL_WIDTH))
    assert result.tokens == [greedy(p, 16)[0] for p in PROMPTS]
    spec = engine.counters["speculative"]
    assert spec["accepted"] == spec["proposed"] > 0
    assert spec["rollbacks"] == 0


def test_a_draft_that_always_disagrees_still_decodes_the_target(tmp_path):
    write_package(speculative_draft(disagree=1.0), tmp_path / "draft")
    engine = Engine.from_dir(package_path("speculative_target"), "native", draft=tmp_path / "draft")
    result = engine.run(prompt=PROMPTS, max_new_tokens=16, inputs=_width(2))
    assert result.tokens == [greedy(p, 16)[0] for p in PROMPTS]
    spec = engine.counters["speculative"]
    assert spec["accepted"] < spec["proposed"] / 4 and spec["rollbacks"] > 0


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p[0])
def test_rows_equal_their_solo_runs(drafted, pair):
    engine = drafted(*pair, "ort")
    prompts = RAGGED[pair[0]]
    batched = engine.run(prompt=prompts, max_new_tokens=12, inputs=_width(3))
    for i, prompt in enumerate(prompts):
        solo = engine.run(prompt=[prompt], max_new_tokens=12, inputs=_width(3))
        assert solo.tokens == [batched.tokens[i]]
        assert solo.finish_reasons == [batched.finish_reasons[i]]


def test_the_default_width_is_the_maximum(drafted):
    engine = drafted("speculative_target", "speculative_draft", "ort")
    before = engine.counters["speculative"]
    engine.run(prompt=[[3, 7, 2]], max_new_tokens=12)
    after = engine.counters["speculative"]
    steps = after["steps"] - before["steps"]
    assert after["proposed"] - before["proposed"] == MAX_PROPOSAL_WIDTH * steps


def test_the_authored_fixture_is_the_lowering(tmp_path):
    """``speculative_lowered`` is what the pair lowers to, with the draft's graph under
    ``draft/``: it loads as an authored package and decodes the same tokens."""
    document = yaml.safe_load(
        lower(package_path("speculative_target"), draft=package_path("speculative_draft"))
    )
    authored = package_path("speculative_lowered") / "inference_metadata.yaml"
    assert yaml.safe_load(authored.read_text()) == document
    assert document["pipeline"]["workflow"]["components"]["draft"]["implementation"] == {
        "kind": "onnx",
        "artifact": "draft/model.onnx",
    }
    execution = document["speculative"]["proposal_execution"]
    assert execution["kind"] == "chained" and "token_embedding" not in execution
    engine = Engine.from_dir(package_path("speculative_lowered"))
    assert engine.provenance == "authored"
    result = engine.run(prompt=PROMPTS, max_new_tokens=16, inputs=_width(2))
    assert result.tokens == [greedy(p, 16)[0] for p in PROMPTS]


def test_lowering_with_a_draft_is_deterministic():
    args = package_path("genai_decoder"), package_path("genai_draft")
    assert lower(args[0], draft=args[1]) == lower(args[0], draft=args[1])


# ------------------------------------------------------------------ refusals


def test_vocabularies_of_different_sizes_are_refused():
    with pytest.raises(PackageError) as refused:
        Engine.from_dir(package_path("genai_decoder"), draft=package_path("genai_decoder_gqa"))
    (violation,) = refused.value.violations
    assert violation.code == "H91" and violation.path == ("draft", "vocab_size")
    assert "80" in violation.message and "96" in violation.message


def test_a_draft_on_a_workflow_package_is_a_usage_error():
    with pytest.raises(UsageError) as refused:
        Engine.from_dir(package_path("speculative_block"), draft=package_path("speculative_draft"))
    assert refused.value.code == "USAGE"
    assert "workflow package" in refused.value.message
    assert "speculative" in refused.value.hint


@pytest.mark.parametrize("kind", ["workflow", "empty", "file", "missing"])
def test_a_draft_that_is_not_a_bare_decoder_is_a_usage_error(tmp_path, kind):
    draft = {
        "workflow": package_path("speculative_lowered"),
        "empty": tmp_path,
        "file": package_path("speculative_draft") / "model.onnx",
        "missing": tmp_path / "nowhere",
    }[kind]
    with pytest.raises(UsageError) as refused:
        Engine.from_dir(package_path("speculative_target"), draft=draft)
    assert refused.value.code == "USAGE"
    assert "draft" in refused.value.message


def test_a_draft_the_runtime_cannot_read_is_refused_under_draft(tmp_path):
    spec = speculative_draft()
    del spec.document["model"]["io"]["attention_mask_input"]
    write_package(spec, tmp_path / "draft")
    violations = validate_package(package_path("speculative_target"), draft=tmp_path / "draft")
    assert [v.code for v in violations] == ["H91"]
    assert violations[0].path[0] == "draft" and "the draft" in violations[0].message


def test_a_draft_with_a_shorter_context_is_refused(tmp_path):
    spec = speculative_draft()
    spec.document["model"]["max_sequence_length"] = 32
    write_package(spec, tmp_path / "draft")
    violations = validate_package(package_path("speculative_target"), draft=tmp_path / "draft")
    assert [(v.code, v.path) for v in violations] == [("H91", ("draft", "context_length"))]


def test_a_target_that_samples_by_default_is_refused(tmp_path):
    target = tmp_path / "target"
    shutil.copytree(package_path("genai_decoder"), target)
    config = json.loads((target / "genai_config.json").read_text())
    config["search"]["do_sample"] = True
    (target / "genai_config.json").write_text(json.dumps(config))
    violations = validate_package(target, draft=package_path("genai_draft"))
    assert [(v.code, v.path) for v in violations] == [("H91", ("draft", "do_sample"))]


def test_a_target_graph_under_draft_is_refused(tmp_path):
    target = tmp_path / "target"
    shutil.copytree(package_path("genai_decoder"), target)
    (target / "draft").mkdir()
    (target / "model.onnx").rename(target / "draft" / "model.onnx")
    config = json.loads((target / "genai_config.json").read_text())
    config["model"]["decoder"]["filename"] = "draft/model.onnx"
    (target / "genai_config.json").write_text(json.dumps(config))
    assert validate_package(target) == []  # alone, it is a valid decoder
    violations = validate_package(target, draft=package_path("genai_draft"))
    assert [(v.code, v.path) for v in violations] == [("H91", ("draft", "artifact"))]


@pytest.mark.parametrize(
    "keywords",
    [{"greedy": False}, {"temperature": 0.7}, {"top_k": 5}, {"top_p": 0.5}, {"min_p": 0.1}],
)
def test_a_request_to_sample_is_refused(drafted, keywords):
    engine = drafted("speculative_target", "speculative_draft", "ort")
    before = engine.counters["invocations"]
    with pytest.raises(RunError) as refused:
        engine.run(prompt=[[3, 7, 2]], max_new_tokens=4, **keywords)
    assert refused.value.code == "H75"
    assert "verifies every token greedily" in refused.value.message
    assert "without a draft" in refused.value.hint
    assert engine.counters["invocations"] == before  # nothing ran


def test_an_authored_speculative_package_refuses_to_sample_too(engines):
    with pytest.raises(RunError) as refused:
        engines("speculative_block", "ort").run(prompt=[[3, 7, 2]], greedy=False)
    assert refused.value.code == "H75"


def test_a_drafted_decoder_cannot_be_served(drafted):
    engine = drafted("speculative_target", "speculative_draft", "ort")
    with pytest.raises(UsageError) as refused:
        list(engine.serve([{"prompt": [3, 7, 2]}]))
    assert refused.value.code == "H124"


# ------------------------------------------------------------------ the command line


def test_run_with_a_draft(capsys):
    target, draft = package_path("speculative_target"), package_path("speculative_draft")
    code = main(["run", str(target), "--draft", str(draft), "--tokens", "[[3,7,2]]",
                 "--max-new-tokens", "8", "--input", "proposal_width=[2]", "--json"])  # fmt: skip
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tokens"] == [greedy([3, 7, 2], 8)[0]]
    assert report["counters"]["speculative"]["steps"] > 0


def test_validate_and_lower_with_a_draft(capsys):
    target = str(package_path("genai_decoder"))
    assert main(["validate", target, "--draft", str(package_path("genai_draft"))]) == 0
    assert "with a draft" in capsys.readouterr().out
    assert main(["validate", target, "--draft", str(package_path("genai_decoder_gqa"))]) == 1
    assert "H91" in capsys.readouterr().out
    assert main(["lower", target, "--draft", str(package_path("genai_draft"))]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["speculative"]["proposer"] == "draft"


def test_a_draft_on_a_workflow_package_exits_2(capsys):
    code = main(["run", str(package_path("speculative_block")), "--draft",
                 str(package_path("speculative_draft")), "--tokens", "[[1]]"])  # fmt: skip
    assert code == 2
    assert "workflow package" in capsys.readouterr().err


@pytest.mark.parametrize("executor", EXECUTORS)
def test_every_supported_runtime_contract_runs_and_is_counted(executor):
    """The four runtime contracts this runtime supports each execute, counted at dispatch: a
    lowered decoder runs decode, token policy and continuous batch; lowered with a draft, its
    steps are the speculative block's (and the graphs beneath run on the engine's executor)."""
    from reference_runtime.support import REFERENCE_SUPPORT

    target, draft = package_path("genai_decoder"), package_path("genai_draft")
    counted: dict[str, int] = {}
    for engine in (
        Engine.from_dir(target, executor),
        Engine.from_dir(target, executor, draft=draft),
    ):
        engine.run(prompt=[[1, 5, 9]], max_new_tokens=6)
        for contract, count in engine.counters["contract_executions"].items():
            counted[contract] = counted.get(contract, 0) + count
        graphs = {
            name: runs
            for name, runs in engine.counters["invocations"].items()
            if "contract" not in runs
        }
        assert graphs and all(set(runs) == {executor} for runs in graphs.values())
    supported = {entry.split("@")[0] for entry in REFERENCE_SUPPORT.binding_contracts}
    assert set(counted) == supported and len(supported) == 4
    assert all(count > 0 for count in counted.values())
