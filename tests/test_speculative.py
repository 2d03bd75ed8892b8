"""``onnx-genai.speculative-block@1``: greedy speculative decoding equals plain greedy decoding of
the target, token for token, for every proposal width and proposal execution, on both
executors; the counters show that proposals were accepted, rejected and rolled back."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fixtures import package_path
from fixtures.generators.common import write_package
from fixtures.generators.speculative_block import PROMPTS, WIDTH, build, greedy
from reference_runtime import Engine
from reference_runtime.errors import RunError

MODES = ("block", "chained", "folded")
EXECUTORS = ("ort", "native")
SPECULATIVE = "onnx-genai.speculative-block"


def _width(width: int) -> dict:
    return {"request.proposal_width": np.array([width], dtype=np.int64)}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("width", range(1, WIDTH + 1))
def test_greedy_speculation_equals_plain_greedy(engines, mode, executor, width):
    plain = engines("speculative_target", executor).run(prompt=PROMPTS, max_new_tokens=16)
    engine = engines(f"speculative_{mode}", executor)
    before = engine.counters["speculative"]
    result = engine.run(prompt=PROMPTS, max_new_tokens=16, inputs=_width(width))
    after = engine.counters["speculative"]
    assert result.tokens == plain.tokens
    assert result.finish_reasons == plain.finish_reasons
    assert plain.tokens == [greedy(p, 16)[0] for p in PROMPTS]  # the formula, too
    done = {key: after[key] - before[key] for key in after}
    assert done["steps"] > 0
    # every active row proposes ``width`` tokens per step
    assert done["proposed"] % width == 0 and done["proposed"] >= width * done["steps"]
    assert done["committed"] == sum(len(row) for row in result.tokens)
    if width > 1 or mode == "block":
        assert 0 < done["accepted"] < done["proposed"], done  # accepted and rejected
    assert done["rollbacks"] > 0, done


@pytest.mark.parametrize("mode", MODES)
def test_counters_account_for_every_call(engines, mode):
    engine = engines(f"speculative_{mode}", "ort")
    before = engine.counters
    engine.run(prompt=[[3, 7, 2]], max_new_tokens=12, inputs=_width(3))
    after = engine.counters
    spec = {k: after["speculative"][k] - before["speculative"][k] for k in after["speculative"]}
    calls = {
        name: after["invocations"][name][executor] - before["invocations"][name].get(executor, 0)
        for name, executor in (("target", "ort"), ("draft", "ort"), ("speculate", "contract"))
    }
    contract = after["contract_executions"][SPECULATIVE] - before["contract_executions"].get(
        SPECULATIVE, 0
    )
    assert calls["speculate"] == contract == spec["steps"] + 1  # the prefill, then each step
    assert calls["target"] == spec["steps"] + 1  # one verification per step
    assert spec["proposed"] == 3 * spec["steps"]  # one row, width 3
    if mode == "block":
        assert calls["draft"] == spec["proposer_calls"] == spec["steps"]  # one block per step
    elif mode == "folded":
        assert calls["draft"] == spec["proposer_calls"] == 3 * spec["steps"]  # one per token
    else:  # the recurrent cell reads the prompt first: one call per prompt token
        assert calls["draft"] == spec["proposer_calls"] == 3 * spec["steps"] + 3


@pytest.mark.parametrize("mode", MODES)
def test_a_draft_that_always_agrees_never_rolls_back_a_block(mode, tmp_path):
    root = tmp_path / mode
    write_package(build(mode, disagree=0.0), root)
    engine = Engine.from_dir(root)
    result = engine.run(prompt=PROMPTS, max_new_tokens=16, inputs=_width(WIDTH))
    assert result.tokens == [greedy(p, 16)[0] for p in PROMPTS]
    spec = engine.counters["speculative"]
    assert spec["accepted"] == spec["proposed"] > 0
    if mode == "block":
        assert spec["rollbacks"] == 0
    else:  # a chained proposal accepts at most width - 1: every row's step truncates one slot
        assert spec["rollbacks"] == spec["proposed"] // WIDTH


@pytest.mark.parametrize("mode", MODES)
def test_a_draft_that_always_disagrees_still_decodes_the_target(mode, tmp_path):
    root = tmp_path / mode
    write_package(build(mode, disagree=1.0), root)
    engine = Engine.from_dir(root, executor="native")
    result = engine.run(prompt=PROMPTS, max_new_tokens=16, inputs=_width(2))
    assert result.tokens == [greedy(p, 16)[0] for p in PROMPTS]
    spec = engine.counters["speculative"]
    assert spec["accepted"] < spec["proposed"] / 4
    assert spec["rollbacks"] > 0


@pytest.mark.parametrize("mode", MODES)
def test_rows_equal_their_solo_runs(engines, mode):
    engine = engines(f"speculative_{mode}", "ort")
    batched = engine.run(prompt=PROMPTS, max_new_tokens=12, inputs=_width(3))
    for i, prompt in enumerate(PROMPTS):
        solo = engine.run(prompt=[prompt], max_new_tokens=12, inputs=_width(3))
        assert solo.tokens == [batched.tokens[i]]
        assert solo.finish_reasons == [batched.finish_reasons[i]]


@pytest.mark.parametrize("width", [0, WIDTH + 1, -1])
def test_a_width_outside_the_bound_is_refused(engines, width):
    engine = engines("speculative_block", "ort")
    before = engine.counters["invocations"]
    with pytest.raises(RunError) as refused:
        engine.run(prompt=[[3, 7, 2]], max_new_tokens=4, inputs=_width(width))
    assert refused.value.code == "F118"
    assert "max_proposal_width" in refused.value.message
    after = engine.counters["invocations"]  # refused before the target or the draft ran
    assert {k: after.get(k) for k in ("target", "draft")} == {
        k: before.get(k) for k in ("target", "draft")
    }


def test_stop_on_eos_off_runs_to_the_bound(engines):
    prompt = [[5, 8]]
    for mode in MODES:
        result = engines(f"speculative_{mode}", "ort").run(
            prompt=prompt, max_new_tokens=20, stop_on_eos=False
        )
        assert result.tokens == [greedy(prompt[0], 20, stop_on_eos=False)[0]]
        assert result.finish_reasons == ["length"]


def test_zero_new_tokens(engines):
    result = engines("speculative_block", "ort").run(prompt=[[3, 7, 2]], max_new_tokens=0)
    plain = engines("speculative_target", "ort").run(prompt=[[3, 7, 2]], max_new_tokens=0)
    assert result.tokens == plain.tokens == [[]]
    assert result.finish_reasons == plain.finish_reasons


@pytest.mark.parametrize("executor", EXECUTORS)
def test_the_command_line_runs_speculation(executor, capsys):
    from reference_runtime.cli import main

    args = ["run", str(package_path("speculative_chained")), "--tokens", "[[3, 7, 2]]",
            "--max-new-tokens", "10", "--input", "proposal_width=[2]",
            "--executor", executor, "--json"]  # fmt: skip
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tokens"] == [greedy([3, 7, 2], 10)[0]]
    assert report["counters"]["speculative"]["rollbacks"] > 0
    assert report["counters"]["contract_executions"][SPECULATIVE] > 0
    assert set(report["counters"]["invocations"]["target"]) == {executor}


def test_the_command_line_refuses_a_width_outside_the_bound(capsys):
    from reference_runtime.cli import main

    args = ["run", str(package_path("speculative_block")), "--tokens", "[[3, 7, 2]]",
            "--input", "proposal_width=[9]"]  # fmt: skip
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "F118" in err and "Traceback" not in err


def test_rollback_truncates_the_target_cache_along_its_sequence_axis():
    """One prefill and one step of the contract's session, read directly: the target's cache
    keeps exactly the committed tokens but the last (along axis 2, its group's sequence_axis),
    the widest row sets the extent and the other rows' extra slots are masked out."""
    from reference_runtime.counters import Counters
    from reference_runtime.executors import load_sessions
    from reference_runtime.package import load_package

    package = load_package(package_path("speculative_block"))
    counters = Counters()
    session = load_sessions(package, "ort", "cpu", counters)["speculate"]
    prompts = np.array([[3, 7, 2], [4, 11, 6], [9, 9, 1]], dtype=np.int64)
    common = {"max_new_tokens": np.array([32])}  # no end ids: every row goes on
    ports = ["tokens", "accepted_len", "pending", "pending_lengths", "target_mask",
             "proposer_mask", "next_active", "generated", "finish_reason", "target_present",
             "proposer_present"]  # fmt: skip
    first = session.run({"tokens": prompts, **common}, ports)
    assert (
        first["target_present"].shape == (3, 1, 3, 1) and first["accepted_len"].tolist() == [1] * 3
    )
    step = session.run(
        {**common, "proposal_width": np.array([WIDTH]), "active": first["next_active"],
         "generated": first["generated"], "finish_reason": first["finish_reason"],
         "pending": first["pending"], "pending_lengths": first["pending_lengths"],
         "target_mask": first["target_mask"], "proposer_mask": first["proposer_mask"],
         "target_past": first["target_present"], "proposer_past": first["proposer_present"]},
        ports,
    )  # fmt: skip
    committed = step["accepted_len"]
    assert (committed >= 1).all() and (committed <= WIDTH + 1).all()
    assert len(set(committed.tolist())) > 1  # rows accepted differently
    assert step["target_present"].shape == (3, 1, 3 + int(committed.max()), 1)
    assert step["target_mask"].sum(axis=1).tolist() == (3 + committed).tolist()
    for r, n in enumerate(committed.tolist()):  # the masked slots are the row's last ones
        assert step["target_mask"][r].tolist() == [1] * (3 + n) + [0] * int(committed.max() - n)
    assert counters.snapshot()["speculative"]["rollbacks"] == int((committed < WIDTH + 1).sum())
    full = [greedy(p, 32, stop_on_eos=False)[0] for p in prompts.tolist()]
    for r, n in enumerate(committed.tolist()):
        assert step["tokens"][r, :n].tolist() == full[r][1 : 1 + n]
