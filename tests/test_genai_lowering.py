"""Decoders in onnxruntime-genai's layout (and the same decoder as legacy `model.io`), lowered at
load and run through the one interpreter, against onnxruntime-genai itself as the oracle."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import yaml

from fixtures import package_path
from reference_runtime import Engine, PackageError
from reference_runtime.errors import RunError
from reference_runtime.package.lowering import lower
from tests.genai_oracle import genai_greedy

GENAI = ["genai_decoder", "genai_decoder_gqa", "genai_decoder_multi_eos"]
# package -> the onnxruntime-genai folder holding the same decoder
ORACLE = {name: name for name in GENAI} | {"model_io_decoder": "genai_decoder"}

try:
    import onnxruntime_genai  # noqa: F401

    HAVE_GENAI = True
except ImportError:  # pragma: no cover - platforms without onnxruntime-genai wheels
    HAVE_GENAI = False
needs_genai = pytest.mark.skipif(not HAVE_GENAI, reason="onnxruntime-genai is not installed")


def prompts(seed: int, vocab: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    lengths = [1, 5, 3, 7]
    return [rng.integers(4, vocab, size=n).tolist() for n in lengths]


def vocab_of(name: str) -> int:
    config = json.loads((package_path(ORACLE[name]) / "genai_config.json").read_text())
    return config["model"]["vocab_size"]


@needs_genai
@pytest.mark.parametrize("executor", ["ort", "native"])
@pytest.mark.parametrize("name", sorted(ORACLE))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_tokens_equal_onnxruntime_genai(name, executor, seed, engines):
    engine = engines(name, executor)
    rows = prompts(seed, vocab_of(name))
    want = genai_greedy(package_path(ORACLE[name]), rows, 8)
    solo = [engine.run(prompt=[row], max_new_tokens=8).tokens[0] for row in rows]
    assert solo == want
    batched = engine.run(prompt=rows, max_new_tokens=8)  # rows of different lengths
    assert batched.tokens == want
    eos = set(engine.package.metadata.workflow.inputs["package.eos_token_ids"].default)
    for tokens, reason in zip(batched.tokens, batched.finish_reasons, strict=True):
        assert reason == ("stop" if tokens[-1] in eos and len(tokens) <= 8 else "length")


def test_multiple_end_ids_each_stop_a_row(engines):
    engine = engines("genai_decoder_multi_eos", "ort")
    ends = set()
    for seed in range(12):
        result = engine.run(prompt=prompts(seed, 72), max_new_tokens=24)
        ends |= {
            t[-1] for t, r in zip(result.tokens, result.finish_reasons, strict=True) if r == "stop"
        }
    assert ends == {2, 3}


@pytest.mark.parametrize("name", ["genai_decoder", "model_io_decoder"])
def test_lowering_is_byte_identical_across_processes(name):
    outs = {
        subprocess.run(
            [sys.executable, "-m", "reference_runtime", "lower", str(package_path(name))],
            capture_output=True,
            check=True,
        ).stdout
        for _ in range(2)
    }
    assert len(outs) == 1


def test_counters_prove_the_native_path(engines):
    engine = Engine.from_dir(package_path("genai_decoder_gqa"), executor="native")
    result = engine.run(prompt=[[5, 6], [7]], max_new_tokens=4)
    counters = engine.counters
    steps = max(len(t) for t in result.tokens)
    assert counters["contract_executions"]["onnx-genai.autoregressive-decode"] == 1 + steps
    assert counters["contract_executions"]["onnx-genai.token-policy"] == steps
    assert counters["invocations"]["decoder"] == {"native": 1 + steps}
    assert set(counters["sessions_created"]) == {"native"}


def test_seeded_sampling_is_reproducible_and_rows_are_independent(engines):
    engine = engines("genai_decoder", "ort")
    rows = prompts(3, 96)
    kw = dict(max_new_tokens=10, greedy=False, temperature=1.5, top_k=20, top_p=0.95)
    a = engine.run(prompt=rows, seed=7, **kw).tokens
    assert a == engine.run(prompt=rows, seed=7, **kw).tokens
    assert a != engine.run(prompt=rows, seed=8, **kw).tokens
    assert a != engine.run(prompt=rows, max_new_tokens=10).tokens  # not greedy
    solo = [engine.run(prompt=[row], seed=7, **kw).tokens[0] for row in rows]
    assert solo == a


def test_sampling_filters_are_honoured(engines):
    engine = engines("genai_decoder", "ort")
    greedy = engine.run(prompt=[[5, 6, 7]], max_new_tokens=6).tokens
    # top_k=1 (or a tiny top_p) leaves only the most likely token: sampling equals greedy.
    kw = dict(max_new_tokens=6, greedy=False, temperature=2.0, seed=11)
    assert engine.run(prompt=[[5, 6, 7]], top_k=1, **kw).tokens == greedy
    assert engine.run(prompt=[[5, 6, 7]], top_p=1e-6, **kw).tokens == greedy
    assert engine.run(prompt=[[5, 6, 7]], min_p=1.0, **kw).tokens == greedy


@pytest.mark.parametrize("executor", ["ort", "native"])
def test_session_turns_equal_one_request_with_the_whole_conversation(executor, engines):
    engine = engines("genai_decoder_gqa", executor)
    sid = engine.create_session()
    first = engine.run(prompt=[[5, 6, 7]], max_new_tokens=4, session_id=sid).tokens[0]
    before = dict(engine.counters["prefix_reuse"])
    second = engine.run(prompt=[[9, 10]], max_new_tokens=4, session_id=sid).tokens[0]
    reuse = engine.counters["prefix_reuse"]
    # The KV was kept: the prompt and every generated token but the last (which ended the
    # turn and was never run through the decoder) are not run again.
    assert reuse["hits"] - before["hits"] == 1
    assert reuse["tokens"] - before["tokens"] == 3 + len(first) - 1
    whole = engine.run(prompt=[[5, 6, 7, *first, 9, 10]], max_new_tokens=4).tokens[0]
    assert second == whole
    assert engine.session_token_count(sid) == 3 + len(first) + 2 + len(second)
    engine.close_session(sid)


def test_context_length_ends_rows(engines):
    engine = engines("genai_decoder_multi_eos", "ort")  # context 48
    long = list(range(4, 50))  # 46 tokens
    result = engine.run(prompt=[long], max_new_tokens=10, stop_on_eos=False)
    assert len(result.tokens[0]) == 2 and result.finish_reasons == ["context_length"]


def test_the_cache_may_outgrow_the_context_in_a_padded_batch(engines):
    """A row that ends at the context length leaves the batch's padded cache growing for the
    other rows: the KV cells' `max` is the prefill's capacity (padded prompt + max_new_tokens),
    not the context length."""
    engine = engines("genai_decoder_multi_eos", "ort")  # context 48
    long, short = list(range(4, 50)), [5, 6]
    result = engine.run(prompt=[long, short], max_new_tokens=10, stop_on_eos=False)
    assert result.finish_reasons == ["context_length", "length"]
    assert len(long) + len(result.tokens[1]) > 48  # the padded cache axis outgrew the context
    solo = engine.run(prompt=[short], max_new_tokens=10, stop_on_eos=False).tokens[0]
    assert result.tokens[1] == solo
    workflow = engine.package.metadata.workflow
    assert {c.recurrence.max for n, c in workflow.state.items() if n.startswith("kv_")} == {
        "prefill.capacity"
    }


def test_a_text_prompt_without_a_tokenizer_is_refused(tmp_path):
    root = tmp_path / "pkg"
    shutil.copytree(package_path("genai_decoder"), root)
    (root / "tokenizer.json").unlink()
    engine = Engine.from_dir(root)
    with pytest.raises(RunError) as caught:
        engine.run(prompt="hello", max_new_tokens=2)
    assert "tokenizer" in caught.value.message


def test_a_text_prompt_goes_through_the_folders_tokenizer(engines):
    """The generated folders ship a word-level tokenizer.json (word ``t<N>`` is id N)."""
    engine = engines("genai_decoder", "ort")
    as_text = engine.run(prompt="t5 t6 t7", max_new_tokens=4)
    as_ids = engine.run(prompt=[[5, 6, 7]], max_new_tokens=4)
    assert as_text.tokens == as_ids.tokens


@pytest.mark.parametrize(
    ("edit", "location"),
    [
        (lambda c: c.update(extra=1), '["genai_config.json"].extra'),
        (lambda c: c["search"].update(num_beams=4), '["genai_config.json"].search.num_beams'),
        (
            lambda c: c["search"].update(repetition_penalty=1.2),
            '["genai_config.json"].search.repetition_penalty',
        ),
        (lambda c: c["model"].update(type="whisper"), '["genai_config.json"].model.type'),
        (
            lambda c: c["model"]["decoder"]["inputs"].update(input_ids="ids"),
            '["genai_config.json"].model.decoder.inputs.input_ids',
        ),
        (
            lambda c: c["model"]["decoder"].update(filename="../model.onnx"),
            '["genai_config.json"].model.decoder.filename',
        ),
    ],
)
def test_a_config_that_cannot_be_lowered_is_refused_naming_the_key(edit, location, tmp_path):
    root = tmp_path / "pkg"
    shutil.copytree(package_path("genai_decoder"), root)
    config = json.loads((root / "genai_config.json").read_text())
    edit(config)
    (root / "genai_config.json").write_text(json.dumps(config))
    with pytest.raises(PackageError) as caught:
        Engine.from_dir(root)
    assert set(caught.value.codes) == {"H91"}
    assert caught.value.violations[0].location == location


@needs_genai
@pytest.mark.parametrize("name", ["genai_decoder", "model_io_decoder"])
def test_cli_run_gives_onnxruntime_genai_tokens(name, capsys):
    from reference_runtime.cli import main as cli

    rows = prompts(5, vocab_of(name))
    code = cli(["run", str(package_path(name)), "--prompt", json.dumps(rows),
                "--max-new-tokens", "6", "--executor", "native", "--json"])  # fmt: skip
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tokens"] == genai_greedy(package_path(ORACLE[name]), rows, 6)
    assert report["counters"]["contract_executions"]["onnx-genai.token-policy"] > 0


def test_model_io_generation_defaults_are_carried_and_honoured(tmp_path):
    root = tmp_path / "pkg"
    shutil.copytree(package_path("model_io_decoder"), root)
    document = yaml.safe_load((root / "inference_metadata.yaml").read_text())
    engine = Engine.from_dir(package_path("model_io_decoder"))
    free = engine.run(prompt=[[5, 6, 7]], max_new_tokens=4).tokens[0]
    assert len(free) == 4  # no end token early: the bound below is what stops the row
    # max_length bounds prompt plus generated tokens when the request does not say
    document["generation"] = {"defaults": {"max_length": 6}}
    (root / "inference_metadata.yaml").write_text(yaml.safe_dump(document))
    engine = Engine.from_dir(root)
    assert engine.run(prompt=[[5, 6, 7]]).tokens[0] == free[:3]
    assert engine.run(prompt=[[5, 6, 7]], max_new_tokens=4).tokens[0] == free
    document["generation"] = {"defaults": {"max_length": -1}}  # still validated
    (root / "inference_metadata.yaml").write_text(yaml.safe_dump(document))
    with pytest.raises(PackageError) as caught:
        Engine.from_dir(root)
    assert caught.value.codes == ["A05"]


def _lowered(root) -> dict:
    return yaml.safe_load(lower(root))


def test_search_defaults_become_upstream_generation_defaults():
    """Only upstream GenerationDefaults fields are written; random_seed has none and becomes the
    seed input's default."""
    config = json.loads((package_path("genai_decoder") / "genai_config.json").read_text())
    document = _lowered(package_path("genai_decoder"))
    defaults = document["generation"]["defaults"]
    search = config["search"]
    assert defaults == {k: search[k] for k in ("max_length", "do_sample", "temperature",
                                               "top_k", "top_p")}  # fmt: skip
    inputs = document["pipeline"]["workflow"]["inputs"]
    assert inputs["request.seed"]["default"] == 0
    assert inputs["request.max_new_tokens"]["default"] == config["model"]["context_length"]


def _edited_genai(tmp_path, edit):
    root = tmp_path / "pkg"
    shutil.copytree(package_path("genai_decoder"), root)
    config = json.loads((root / "genai_config.json").read_text())
    edit(config)
    (root / "genai_config.json").write_text(json.dumps(config))
    return root


def test_random_seed_is_the_seed_default_and_do_sample_samples(tmp_path):
    def edit(config):
        config["search"].update(do_sample=True, temperature=1.5, top_k=20, random_seed=7)

    root = _edited_genai(tmp_path, edit)
    assert _lowered(root)["pipeline"]["workflow"]["inputs"]["request.seed"]["default"] == 7
    engine = Engine.from_dir(root)
    plain = Engine.from_dir(package_path("genai_decoder"))  # do_sample: false
    rows = prompts(3, 96)
    sampled = engine.run(prompt=rows, max_new_tokens=10).tokens  # the package samples
    assert sampled == engine.run(prompt=rows, max_new_tokens=10, seed=7).tokens
    assert sampled != engine.run(prompt=rows, max_new_tokens=10, seed=8).tokens
    greedy = plain.run(prompt=rows, max_new_tokens=10).tokens
    assert sampled != greedy
    assert engine.run(prompt=rows, max_new_tokens=10, greedy=True).tokens == greedy
    # the package's settings equal the same ones given by a request
    explicit = plain.run(prompt=rows, max_new_tokens=10, seed=7, temperature=1.5, top_k=20)
    assert sampled == explicit.tokens


def test_search_max_length_bounds_the_total_length(tmp_path):
    root = _edited_genai(tmp_path, lambda c: c["search"].update(max_length=7))
    free = Engine.from_dir(package_path("genai_decoder")).run(
        prompt=[[10, 11, 12]], max_new_tokens=4, stop_on_eos=False
    )
    result = Engine.from_dir(root).run(prompt=[[10, 11, 12]], stop_on_eos=False)
    assert result.tokens == free.tokens and result.finish_reasons == ["length"]
