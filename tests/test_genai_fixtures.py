"""The generated decoders in onnxruntime-genai's layout (``fixtures/generators/genai_decoders.py``):
their files, and greedy tokens from onnxruntime-genai against independent references."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from fixtures import package_path
from fixtures.generators import GENERATORS, genai_decoders
from fixtures.generators.common import write_package
from tests.genai_oracle import (
    end_ids,
    genai_greedy,
    load_config,
    numpy_greedy,
    session_greedy_batch,
)

# the decoders (genai_draft, genai_decoder's draft, is a perturbed copy of genai_decoder; the
# draft tests run it)
PACKAGES = sorted(n for n in genai_decoders.GENERATORS if n.startswith("genai_decoder"))
MAX_NEW = 8
SEEDS = (0, 1, 2)
LENGTHS = (1, 5, 3, 7, 2)
# Prompts whose greedy continuation ends on an end token within MAX_NEW (found by search; if a
# change of the generator moves them, pick new ones: the end-token path must stay covered).
ENDING = {
    "genai_decoder": [[59, 13, 7, 44, 6, 16], [67, 85, 21, 70, 37, 48]],
    "genai_decoder_gqa": [[60], [70, 73]],
    "genai_decoder_multi_eos": [[26, 22], [61, 14], [69, 35, 58, 66]],
}
# genai_decoder's weights, its logits rounded to float16: the same prompts end
ENDING["genai_decoder_half_logits"] = ENDING["genai_decoder"]

try:
    import onnxruntime_genai  # noqa: F401

    GENAI_MISSING = ""
except ImportError as exc:  # the test extra installs it where wheels exist
    GENAI_MISSING = str(exc) or type(exc).__name__

needs_genai = pytest.mark.skipif(
    bool(GENAI_MISSING), reason=f"onnxruntime-genai cannot be imported: {GENAI_MISSING}"
)


def _folder(name: str):
    return package_path(name)


def _prompts(name: str, seed: int) -> list[list[int]]:
    vocab = load_config(_folder(name))["model"]["vocab_size"]
    rng = np.random.default_rng(seed)
    # ids from 3 up: clear of pad (0), bos (1) and the end tokens
    return [[int(t) for t in rng.integers(3, vocab, size=n)] for n in LENGTHS]


# ------------------------------------------------------------------ files


def test_genai_packages_are_registered():
    assert set(PACKAGES) <= set(GENERATORS)
    assert PACKAGES == [
        "genai_decoder",
        "genai_decoder_gqa",
        "genai_decoder_half_logits",
        "genai_decoder_multi_eos",
    ]


@pytest.mark.parametrize("name", PACKAGES)
def test_files_are_small_and_regenerate_identically(name, tmp_path):
    committed = _folder(name)
    files = sorted(p.name for p in committed.iterdir())
    assert files == ["genai_config.json", "model.onnx", "tokenizer.json"]
    assert (committed / "model.onnx").stat().st_size < 100_000
    for attempt in ("a", "b"):
        written = write_package(genai_decoders.GENERATORS[name](), tmp_path / attempt)
        assert sorted(p.name for p in written) == files
        for f in files:
            assert (tmp_path / attempt / f).read_bytes() == (committed / f).read_bytes(), (
                "run python tools/generate_fixtures.py"
            )


@pytest.mark.parametrize("name", PACKAGES)
def test_model_uses_standard_ops_and_symbolic_dims(name):
    model = onnx.load(_folder(name) / "model.onnx")
    onnx.checker.check_model(model, full_check=True)
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 21)]
    assert {n.domain for n in model.graph.node} == {""}
    assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)
    config = load_config(_folder(name))
    decoder = config["model"]["decoder"]
    layers, kv, head = (
        decoder["num_hidden_layers"],
        decoder["num_key_value_heads"],
        decoder["head_size"],
    )

    def dims(value):
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]

    inputs = {v.name: (v.type.tensor_type.elem_type, dims(v)) for v in model.graph.input}
    outputs = {v.name: (v.type.tensor_type.elem_type, dims(v)) for v in model.graph.output}
    i64, f32 = onnx.TensorProto.INT64, onnx.TensorProto.FLOAT
    expected_in = {
        "input_ids": (i64, ["batch", "sequence"]),
        "attention_mask": (i64, ["batch", "total_sequence"]),
        "position_ids": (i64, ["batch", "sequence"]),
    }
    logits = genai_decoders.DESIGNS[name].logits_type
    expected_out = {"logits": (logits, ["batch", "sequence", config["model"]["vocab_size"]])}
    for layer in range(layers):
        for kind in ("key", "value"):
            expected_in[f"past_key_values.{layer}.{kind}"] = (
                f32,
                ["batch", kv, "past_sequence", head],
            )
            expected_out[f"present.{layer}.{kind}"] = (f32, ["batch", kv, "total_sequence", head])
    assert inputs == expected_in
    assert outputs == expected_out
    assert decoder["num_attention_heads"] * head == decoder["hidden_size"]


@pytest.mark.parametrize("name", PACKAGES)
def test_config_is_sorted_and_names_the_model(name):
    text = (_folder(name) / "genai_config.json").read_text()
    config = json.loads(text)
    assert text == json.dumps(config, indent=2, sort_keys=True) + "\n"
    assert config["model"]["type"] == "llama"
    assert config["model"]["decoder"]["filename"] == "model.onnx"
    assert config["search"]["do_sample"] is False
    assert config["search"]["past_present_share_buffer"] is False


@pytest.mark.parametrize("name", PACKAGES)
def test_tokenizer_words_are_token_ids(name):
    """``tokenizer.json`` turns the word ``t<N>`` into id ``N`` for the whole vocabulary and
    back, so a text interface can carry any row of token ids."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(_folder(name) / "tokenizer.json"))
    vocab = load_config(_folder(name))["model"]["vocab_size"]
    assert tokenizer.get_vocab_size() == vocab
    ids = list(range(vocab)) + [7, 7, 3]
    text = " ".join(genai_decoders.token_word(i) for i in ids)
    assert tokenizer.encode(text).ids == ids
    assert tokenizer.decode(ids, skip_special_tokens=False) == text
    assert tokenizer.encode("t5  t6\tt7").ids == [5, 6, 7]


def test_variants_differ_as_designed():
    decoder = load_config(_folder("genai_decoder_gqa"))["model"]["decoder"]
    assert decoder["num_key_value_heads"] < decoder["num_attention_heads"]
    assert decoder["num_hidden_layers"] == 2
    assert len(end_ids(load_config(_folder("genai_decoder_multi_eos")))) == 2


# ------------------------------------------------------------------ references agree


@pytest.mark.parametrize("name", PACKAGES)
def test_padded_batches_equal_solo_runs(name):
    """The model's padding contract: left padding (mask 0 at pads, positions counting real
    tokens, cache appended at the end) and onnxruntime-genai's engine layout (right padding,
    each row's cache compact) both give every row its solo tokens."""
    folder = _folder(name)
    prompts = _prompts(name, 0) + ENDING[name]
    solo = numpy_greedy(folder, prompts, MAX_NEW)
    assert session_greedy_batch(folder, prompts, MAX_NEW, "left") == solo
    assert session_greedy_batch(folder, prompts, MAX_NEW, "right") == solo


@needs_genai
@pytest.mark.parametrize("name", PACKAGES)
@pytest.mark.parametrize("seed", SEEDS)
def test_genai_equals_numpy_row_by_row(name, seed):
    folder = _folder(name)
    prompts = _prompts(name, seed)
    expected = numpy_greedy(folder, prompts, MAX_NEW)
    for prompt, row in zip(prompts, expected, strict=True):
        assert genai_greedy(folder, [prompt], MAX_NEW) == [row], prompt


@needs_genai
@pytest.mark.parametrize("name", PACKAGES)
def test_end_tokens_end_rows_and_are_included(name):
    folder = _folder(name)
    stops = end_ids(load_config(folder))
    got = genai_greedy(folder, ENDING[name], MAX_NEW)
    assert got == numpy_greedy(folder, ENDING[name], MAX_NEW)
    for row in got:
        assert row[-1] in stops and not (set(row[:-1]) & stops), row
    if name == "genai_decoder_multi_eos":
        assert {row[-1] for row in got} == stops  # both end tokens end some row


@needs_genai
@pytest.mark.parametrize("name", PACKAGES)
def test_generator_batch_of_equal_lengths_equals_solo_runs(name):
    """One ``og.Generator`` over same-length rows (0.18 takes no padding), rows ending on an end
    token at different steps included."""
    folder = _folder(name)
    rng = np.random.default_rng(11)
    vocab = load_config(folder)["model"]["vocab_size"]
    ending = ENDING[name][0]
    prompts = [ending] + [[int(t) for t in rng.integers(3, vocab, len(ending))] for _ in range(3)]
    solo = [genai_greedy(folder, [p], MAX_NEW)[0] for p in prompts]
    assert genai_greedy(folder, prompts, MAX_NEW) == solo
    assert len({len(r) for r in solo}) > 1  # one row ended early


@needs_genai
@pytest.mark.parametrize("name", PACKAGES)
def test_genai_ragged_batch_equals_solo_runs(name):
    """A ragged batch through ``og.Engine`` (right-padded, compact caches) gives every row its
    solo tokens. 0.18's engine fails when rows end at different steps, so the batch holds rows
    that run the full ``MAX_NEW`` tokens without an end token."""
    folder = _folder(name)
    stops = end_ids(load_config(folder))
    candidates = [p for seed in SEEDS for p in _prompts(name, seed)]
    solo = numpy_greedy(folder, candidates, MAX_NEW)
    batch, expected = [], []
    for prompt, row in zip(candidates, solo, strict=True):
        if len(row) == MAX_NEW and row[-1] not in stops and len(prompt) not in map(len, batch):
            batch.append(prompt)
            expected.append(row)
    assert len(batch) >= 4 and min(map(len, batch)) == 1 and max(map(len, batch)) >= 5
    assert genai_greedy(folder, batch, MAX_NEW, engine=True) == expected


@needs_genai
@pytest.mark.parametrize("name", PACKAGES)
def test_greedy_output_is_not_degenerate(name):
    folder = _folder(name)
    rows = genai_greedy(folder, _prompts(name, 0), MAX_NEW)
    tokens = [t for row in rows for t in row]
    assert len(set(tokens)) >= len(tokens) // 3, rows
    assert len({row[0] for row in rows}) >= 3, rows
    assert any(len(set(row)) >= 4 for row in rows), rows


# ------------------------------------------------------------------ the model.io and lowered copies


def test_model_io_decoder_uses_only_upstream_keys():
    """Its end and pad ids are tokenizer special tokens (upstream ModelCapabilities has no eos or
    pad field); the model section holds upstream fields only; the graph is the folder's one
    ONNX file (no `model.artifact`)."""
    import dataclasses

    import yaml

    from reference_runtime.package.model import ModelFacts

    folder = _folder("model_io_decoder")
    assert sorted(p.name for p in folder.iterdir()) == ["inference_metadata.yaml", "model.onnx"]
    document = yaml.safe_load((folder / "inference_metadata.yaml").read_text())
    upstream = {f.name for f in dataclasses.fields(ModelFacts)}
    assert set(document["model"]) <= upstream
    special = document["package"]["tokenizer"]["special_tokens"]
    config = load_config(_folder("genai_decoder"))
    assert {special["eos"]["id"]} == end_ids(config)
    assert special["pad"]["id"] == config["model"]["pad_token_id"]
    assert (folder / "model.onnx").read_bytes() == (
        _folder("genai_decoder") / "model.onnx"
    ).read_bytes()


def test_lowered_decoder_is_the_lowered_model_io_decoder():
    import yaml

    from reference_runtime.package.lowering import lower

    stored = yaml.safe_load((_folder("lowered_decoder") / "inference_metadata.yaml").read_text())
    assert stored == yaml.safe_load(lower(_folder("model_io_decoder")))
    assert "io" not in stored["model"]  # a workflow document never carries model.io
    assert (_folder("lowered_decoder") / "model.onnx").read_bytes() == (
        _folder("model_io_decoder") / "model.onnx"
    ).read_bytes()


def test_lowered_decoder_runs_as_an_authored_package_with_the_same_tokens():
    from reference_runtime import Engine

    rows = [[59, 13, 7, 44, 6, 16], [9], [10, 11, 12]]  # the first ends on the end token
    authored = Engine.from_dir(_folder("lowered_decoder"))
    lowered = Engine.from_dir(_folder("model_io_decoder"))
    assert (authored.provenance, lowered.provenance) == ("authored", "lowered")
    a, b = (
        authored.run(prompt=rows, max_new_tokens=MAX_NEW),
        lowered.run(prompt=rows, max_new_tokens=MAX_NEW),
    )
    assert a.tokens == b.tokens == numpy_greedy(_folder("genai_decoder"), rows, MAX_NEW)
    assert a.finish_reasons == b.finish_reasons and "stop" in a.finish_reasons
