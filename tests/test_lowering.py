"""Bare decoders lowered at load: determinism, validation, execution beneath the interpreter.

The upstream `tiny-llm` package (legacy `model.io` metadata) is the subject here; tests skip when
the shared upstream fixtures are absent. Its graph only accepts one row per request (it
unsqueezes the attention mask on the batch axis), so batching is tested on our own decoders.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import yaml

from reference_runtime import Engine, PackageError
from reference_runtime.cli import main as cli
from reference_runtime.lowering import lower, package_shape
from reference_runtime.package import validate_package

TINY = Path(__file__).resolve().parents[2] / "shared" / "upstream-fixtures" / "tiny-llm"
needs_tiny = pytest.mark.skipif(not TINY.is_dir(), reason="shared upstream fixtures are absent")


def recompute_greedy(folder: Path, prompt: list[int], steps: int, context: int) -> list[int]:
    """An independent oracle: the whole sequence is re-run every step, with an empty past."""
    import onnx

    model = onnx.load(str(folder / "model.onnx.textproto"), format="textproto")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    kv = [i for i in session.get_inputs() if i.name.startswith("past")]
    sequence, out = list(prompt), []
    for _ in range(steps):
        if len(sequence) >= context:
            break
        n = len(sequence)
        feed = {
            "input_ids": np.asarray([sequence], dtype=np.int64),
            "attention_mask": np.ones((1, n), dtype=np.int64),
            "position_ids": np.arange(n, dtype=np.int64)[None],
        }
        for value in kv:
            feed[value.name] = np.zeros((1, value.shape[1], 0, value.shape[3]), np.float32)
        logits = session.run(["logits"], feed)[0]
        token = int(np.argmax(logits[0, -1]))
        out.append(token)
        sequence.append(token)
    return out


@needs_tiny
def test_shapes_are_recognised():
    assert package_shape(TINY) == "model_io"
    assert package_shape(TINY.parent / "decoder") == "authored"


@needs_tiny
def test_lowering_is_byte_identical_across_processes():
    runs = [
        subprocess.run(
            [sys.executable, "-m", "reference_runtime", "lower", str(TINY)],
            capture_output=True,
            check=True,
        ).stdout
        for _ in range(2)
    ]
    assert runs[0] == runs[1] and runs[0]
    assert runs[0].decode() == lower(TINY)


@needs_tiny
def test_lowered_document_validates_and_declares_runtime_kv(tmp_path):
    text = lower(TINY)
    assert validate_package(TINY, lowered=text) == []
    workflow = yaml.safe_load(text)["pipeline"]["workflow"]
    kv = {k: v for k, v in workflow["state"].items() if v.get("service_group")}
    assert len(kv) == 2 and all(v["management"] == "runtime" for v in kv.values())
    contracts = {c["contract"]["id"] for c in workflow["components"].values()}
    assert contracts == {"onnx-genai.autoregressive-decode", "onnx-genai.token-policy"}
    # Lowering never writes into the package.
    before = sorted(p.name for p in TINY.iterdir())
    Engine.from_dir(TINY)
    assert sorted(p.name for p in TINY.iterdir()) == before


@needs_tiny
@pytest.mark.parametrize("executor", ["ort", "native"])
@pytest.mark.parametrize("prompt", [[1], [4, 5, 6], [7, 8, 9, 10, 11, 12]])
def test_tiny_llm_greedy_tokens_equal_full_recompute(executor, prompt):
    engine = Engine.from_dir(TINY, executor=executor)
    assert engine.provenance == "lowered"
    result = engine.run(prompt=[prompt], max_new_tokens=6)
    assert result.tokens == [recompute_greedy(TINY, prompt, 6, 16)]
    assert result.finish_reasons == ["length"]


@needs_tiny
def test_counters_show_the_contract_executors_and_the_graph_executor():
    engine = Engine.from_dir(TINY, executor="native")
    engine.run(prompt=[[1, 2]], max_new_tokens=3)
    counters = engine.counters
    assert counters["contract_executions"] == {
        "onnx-genai.autoregressive-decode": 4,  # prefill + one step per generated token
        "onnx-genai.token-policy": 3,
    }
    assert counters["invocations"]["decoder"] == {"native": 4}
    assert counters["invocations"]["policy"] == {"contract": 3}
    assert set(counters["sessions_created"]) == {"native"}


def test_an_authored_package_runs_no_runtime_contract():
    from fixtures import package_path

    engine = Engine.from_dir(package_path("counting_loop"))
    engine.run(inputs={"start": np.asarray([1, 5], dtype=np.int64)}, max_new_tokens=4)
    assert engine.provenance == "authored"
    assert engine.counters["contract_executions"] == {}


@needs_tiny
def test_context_length_is_a_finish_reason():
    engine = Engine.from_dir(TINY)
    result = engine.run(prompt=[list(range(1, 15))], max_new_tokens=10)  # context is 16
    assert len(result.tokens[0]) == 2
    assert result.finish_reasons == ["context_length"]


@needs_tiny
def test_text_prompts_use_the_package_tokenizer():
    engine = Engine.from_dir(TINY)
    result = engine.run(prompt="hello world", max_new_tokens=3)
    assert len(result.tokens[0]) == 3 and isinstance(result.text[0], str)


@needs_tiny
@pytest.mark.parametrize(
    ("edit", "location"),
    [
        (lambda d: d["model"].update(bogus=1), "model.bogus"),
        (lambda d: d["model"]["io"].update(logits_output="nope"), "model.io.logits_output"),
        (lambda d: d["model"]["io"]["kv_outputs"].pop(), "model.io.kv_outputs"),
    ],
)
def test_a_model_io_package_that_cannot_be_lowered_is_refused_naming_the_key(
    edit, location, tmp_path
):
    root = tmp_path / "pkg"
    shutil.copytree(TINY, root)
    for p in root.iterdir():
        p.chmod(0o644)
    document = yaml.safe_load((root / "inference_metadata.yaml").read_text())
    edit(document)
    (root / "inference_metadata.yaml").write_text(yaml.safe_dump(document))
    with pytest.raises(PackageError) as caught:
        Engine.from_dir(root)
    assert caught.value.codes == ["H91"]
    assert caught.value.violations[0].location == location


@needs_tiny
def test_cli_lower_validate_and_run(capsys):
    assert cli(["lower", str(TINY)]) == 0
    assert "onnx-genai.autoregressive-decode" in capsys.readouterr().out
    assert cli(["validate", str(TINY)]) == 0
    assert "bare decoder" in capsys.readouterr().out
    assert cli(["run", str(TINY), "--prompt", "[[1, 2]]", "--max-new-tokens", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tokens"] == [recompute_greedy(TINY, [1, 2], 2, 16)]
    assert report["finish_reasons"] == ["length"]


def test_cli_lower_refuses_an_authored_package(capsys):
    from fixtures import package_path

    assert cli(["lower", str(package_path("counting_loop"))]) == 2
    assert "not a bare decoder" in capsys.readouterr().err


@needs_tiny
def test_session_turns_continue_the_conversation_like_one_request():
    engine = Engine.from_dir(TINY)
    a, b = engine.create_session(), engine.create_session()
    first = engine.run(prompt=[[1, 2]], max_new_tokens=3, session_id=a).tokens[0]
    other = engine.run(prompt=[[9, 9, 9]], max_new_tokens=2, session_id=b).tokens[0]
    assert engine.session_token_count(a) == 5 and engine.session_token_count(b) == 5
    second = engine.run(prompt=[[5]], max_new_tokens=3, session_id=a).tokens[0]
    whole = engine.run(prompt=[[1, 2, *first, 5]], max_new_tokens=3).tokens[0]
    assert second == whole
    assert engine.session_token_count(a) == 9
    # The other session is untouched by a's turns and continues from its own context.
    again = engine.run(prompt=[[4]], max_new_tokens=2, session_id=b).tokens[0]
    assert again == engine.run(prompt=[[9, 9, 9, *other, 4]], max_new_tokens=2).tokens[0]


@needs_tiny
def test_reset_close_and_a_failed_turn():
    engine = Engine.from_dir(TINY)
    sid = engine.create_session()
    engine.run(prompt=[[1, 2]], max_new_tokens=2, session_id=sid)
    with pytest.raises(Exception) as caught:  # two rows cannot continue one conversation
        engine.run(prompt=[[1], [2]], max_new_tokens=2, session_id=sid)
    assert caught.value.code == "H75"
    assert engine.session_token_count(sid) == 4  # the failed turn changed nothing
    engine.reset_session(sid)
    assert engine.session_token_count(sid) == 0
    hits = engine.counters["prefix_reuse"]["hits"]
    cold = engine.run(prompt=[[3]], max_new_tokens=2, session_id=sid).tokens
    assert engine.counters["prefix_reuse"]["hits"] == hits  # the kept KV went with the reset
    assert cold == engine.run(prompt=[[3]], max_new_tokens=2).tokens
    engine.close_session(sid)
    with pytest.raises(Exception) as caught:
        engine.run(prompt=[[3]], max_new_tokens=2, session_id=sid)
    assert caught.value.code == "E58"
    with pytest.raises(Exception) as caught:
        engine.session_token_count(sid)
    assert caught.value.code == "E58"


def test_a_package_publishing_tokens_without_session_state_refuses_sessions():
    from fixtures import package_path

    engine = Engine.from_dir(package_path("arithmetic_decoder"))
    with pytest.raises(Exception) as caught:
        engine.create_session()
    assert caught.value.code == "E58" and "continuation" in caught.value.hint
