"""Bare decoders lowered at load: determinism, validation, execution beneath the interpreter.

The upstream `tiny-llm` package (legacy `model.io` metadata) is the subject here; tests skip when
the shared upstream fixtures are absent. How a `model.io` document is read (the typed model, H91
and H93 refusals, end ids from the tokenizer's special tokens) is tested on our own
`model_io_decoder` fixture. Its graph only accepts one row per request (it
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
from reference_runtime.package import validate_package
from reference_runtime.package.lowering import lower, package_shape
from tests.conftest import UPSTREAM, WHERE

TINY = UPSTREAM / "tiny-llm"
needs_tiny = pytest.mark.skipif(
    not TINY.is_dir(), reason=f"the upstream example packages are absent ({WHERE})"
)


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
    assert validate_package(TINY) == []  # the folder, lowered to `text` as it loads
    workflow = yaml.safe_load(text)["pipeline"]["workflow"]
    kv = {k: v for k, v in workflow["state"].items() if v.get("service_group")}
    assert len(kv) == 2 and all(v["management"] == "runtime" for v in kv.values())
    contracts = {c["contract"]["id"] for c in workflow["components"].values()}
    assert contracts == {
        "onnx-genai.autoregressive-decode",
        "onnx-genai.token-policy",
        "onnx-genai.continuous-batch",  # a lowered decoder may be served in a batch
    }
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
        "onnx-genai.continuous-batch": 3,  # one batch step per decode step of the loop
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


def _edited_copy(source: Path, tmp_path: Path, edit) -> Path:
    root = tmp_path / f"pkg{len(list(tmp_path.iterdir()))}"
    shutil.copytree(source, root)
    for p in root.iterdir():
        p.chmod(0o644)
    document = yaml.safe_load((root / "inference_metadata.yaml").read_text())
    edit(document)
    (root / "inference_metadata.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    return root


def _refusal(root: Path) -> list[tuple[str, str]]:
    with pytest.raises(PackageError) as caught:
        Engine.from_dir(root)
    return [(v.code, v.location) for v in caught.value.violations]


@needs_tiny
@pytest.mark.parametrize(
    ("edit", "location"),
    [
        (lambda d: d["model"]["io"].update(logits_output="nope"), "model.io.logits_output"),
        (lambda d: d["model"]["io"]["kv_outputs"].pop(), "model.io.kv_outputs"),
        (lambda d: d["model"]["io"].update(hidden_output="nope"), "model.io.hidden_output"),
    ],
)
def test_a_model_io_package_that_cannot_be_lowered_is_refused_naming_the_key(
    edit, location, tmp_path
):
    assert _refusal(_edited_copy(TINY, tmp_path, edit)) == [("H91", location)]


# ------------------------------------------------------------------ model.io, typed

MODEL_IO = ("model", "io")


def _model_io(tmp_path: Path, edit) -> Path:
    from fixtures import package_path

    return _edited_copy(package_path("model_io_decoder"), tmp_path, edit)


def _set(*path_and_value):
    *path, key, value = path_and_value

    def edit(document):
        node = document
        for part in path:
            node = node.setdefault(part, {})
        node[key] = value

    return edit


def _lowered(root: Path) -> dict:
    return yaml.safe_load(lower(root))


def test_every_model_io_field_is_read_accepted_or_refused():
    """A field upstream's ModelIoSpec gains must be classified here before it can be lowered."""
    import dataclasses

    from reference_runtime.package.lowering import abi
    from reference_runtime.package.model import ModelIO

    fields = {f.name for f in dataclasses.fields(ModelIO)}
    read, accepted, refused = set(abi.IO_READ), set(abi.IO_ACCEPTED), set(abi.IO_UNSUPPORTED)
    assert read | accepted | refused == fields
    assert len(read) + len(accepted) + len(refused) == len(fields) == 19


UNSUPPORTED_FIELDS = [
    ("inputs_embeds_input", "inputs_embeds"),
    ("encoder_hidden_states_input", "encoder_hidden_states"),
    ("audio_features_input", "audio_features"),
    ("cross_kv_inputs", ["cross.0.key"]),
    ("cross_kv_outputs", ["cross_present.0.key"]),
    ("state_pairs", [{"input": "state_in", "output": "state_out"}]),
    (
        "optional_inputs",
        {"token_type_ids": {"presence": "types", "absent": {"kind": "zeros", "shape": [1]}}},
    ),
    (
        "static_cache",
        {
            "write_indices_input": "write_indices",
            "kv_sequence_length_input": "kv_lengths",
            "key_cache_inputs": ["k_in"],
            "value_cache_inputs": ["v_in"],
            "key_cache_outputs": ["k_out"],
            "value_cache_outputs": ["v_out"],
        },
    ),
    ("sequence_source", "inputs_embeds"),
    ("kv_ownership", "shared"),
    ("kv_layout", "seq_major_bsnh"),
    ("kv_layout", {"strides": {"batch": ["kv_heads"], "seq": ["head_dim"]}}),
]


@pytest.mark.parametrize(("key", "value"), UNSUPPORTED_FIELDS, ids=lambda v: str(v)[:24])
def test_a_model_io_feature_this_runtime_does_not_implement_is_refused_h93(key, value, tmp_path):
    root = _model_io(tmp_path, _set(*MODEL_IO, key, value))
    assert _refusal(root) == [("H93", f"model.io.{key}")]


def test_h93_is_a_refusal_of_a_valid_document_not_a_violation(tmp_path):
    from reference_runtime.package.rules.catalogue import RULES

    assert RULES["H93"].kind == "unsupported" and RULES["H91"].kind == "violation"
    root = _model_io(tmp_path, _set(*MODEL_IO, "static_cache", dict(UNSUPPORTED_FIELDS[7][1])))
    (violation,) = validate_package(root)
    assert violation.code == "H93" and "static KV cache" in violation.message


def test_every_unsupported_field_is_named_in_one_refusal(tmp_path):
    def edit(document):
        io = document["model"]["io"]
        io.update(encoder_hidden_states_input="enc", kv_ownership="shared")
        io.update(state_pairs=[{"input": "s", "output": "t"}])

    assert sorted(_refusal(_model_io(tmp_path, edit))) == [
        ("H93", "model.io.encoder_hidden_states_input"),
        ("H93", "model.io.kv_ownership"),
        ("H93", "model.io.state_pairs"),
    ]


@pytest.mark.parametrize("key", ["token_input", "logits_output"])
def test_an_undeclared_token_or_logits_port_is_not_resolved_from_shapes(key, tmp_path):
    root = _model_io(tmp_path, lambda d: d["model"]["io"].pop(key))
    assert _refusal(root) == [("H93", f"model.io.{key}")]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("sequence_source", "token_ids"),
        ("kv_ownership", "owned"),
        ("kv_layout", "head_major_bnsh"),
        ("hidden_output", "logits"),  # a graph output: checked, never fetched
    ],
)
def test_model_io_fields_that_change_nothing_here_are_accepted(key, value, tmp_path):
    from fixtures import package_path

    root = _model_io(tmp_path, _set(*MODEL_IO, key, value))
    assert lower(root) == lower(package_path("model_io_decoder"))


def test_model_io_aliasing_is_carried_into_the_kv_group(tmp_path):
    from fixtures import package_path

    def group(document):
        return document["pipeline"]["workflow"]["serving"]["state_service"]["groups"][
            "decoder_cache"
        ]

    assert group(_lowered(package_path("model_io_decoder")))["aliasing"] == "forbidden"
    root = _model_io(tmp_path, _set(*MODEL_IO, "aliasing", "permitted"))
    assert group(_lowered(root))["aliasing"] == "permitted"
    assert validate_package(root) == []


def test_a_kv_layout_the_graph_does_not_have_is_refused(tmp_path):
    """head_major_bnsh (also meant when kv_layout is absent) is [batch, heads, sequence, head]:
    a graph whose KV has its sequence axis elsewhere cannot be lowered under it."""
    import onnx

    root = _model_io(tmp_path, lambda d: None)
    model = onnx.load(root / "model.onnx")
    for value in [*model.graph.input, *model.graph.output]:
        if "key" in value.name or "value" in value.name:
            dims = value.type.tensor_type.shape.dim  # [batch, heads, sequence, head]
            sequence, heads = dims[2].dim_param, dims[1].dim_value
            dims[1].dim_param, dims[2].dim_value = sequence, heads  # now [batch, seq, heads, head]
    onnx.save(model, root / "model.onnx")
    assert set(_refusal(root)) == {("H91", "model.io.kv_inputs")}


def test_model_io_is_checked_against_the_published_schema(tmp_path):
    """ModelIoSpec is closed, so an unknown io key is A01; a wrong type is A05. Nothing is
    lowered from a document the schema refuses."""
    root = _model_io(tmp_path, _set(*MODEL_IO, "bogus", 1))
    assert _refusal(root) == [("A01", "model.io.bogus")]
    root = _model_io(tmp_path, _set(*MODEL_IO, "kv_inputs", "past"))
    assert [code for code, _ in _refusal(root)] == ["A05"]


def test_unknown_model_keys_are_accepted_and_never_read(tmp_path):
    """ModelCapabilities is open: the previous non-format keys (eos_token_ids, pad_token_id,
    artifact) and any other key are accepted, ignored, and not carried."""
    from fixtures import package_path

    def edit(document):
        document["model"].update(
            bogus=1, eos_token_ids=[5, 6], pad_token_id=7, artifact="elsewhere.onnx", name="x"
        )

    root = _model_io(tmp_path, edit)
    assert lower(root) == lower(package_path("model_io_decoder"))
    assert "bogus" not in lower(root) and "elsewhere" not in lower(root)


def test_end_and_pad_ids_come_from_the_special_tokens(tmp_path):
    from fixtures import package_path

    workflow = _lowered(package_path("model_io_decoder"))["pipeline"]["workflow"]
    assert workflow["inputs"]["package.eos_token_ids"]["default"] == [2]
    decode = workflow["components"]["decoder"]["contract"]["parameters"]
    assert decode["pad_token_id"] == 0

    # Another end id: the row now stops on it (the token greedy decoding produces first).
    engine = Engine.from_dir(package_path("model_io_decoder"))
    free = engine.run(prompt=[[5, 6, 7]], max_new_tokens=6, stop_on_eos=False).tokens[0]
    assert 2 not in free[:3] and len(set(free[:3])) == 3, free
    special = ("package", "tokenizer", "special_tokens")
    root = _model_io(tmp_path, _set(*special, "eos", {"id": free[2], "content": "<end>"}))
    edited = _lowered(root)["pipeline"]["workflow"]
    assert edited["inputs"]["package.eos_token_ids"]["default"] == [free[2]]
    result = Engine.from_dir(root).run(prompt=[[5, 6, 7]], max_new_tokens=6)
    assert result.tokens[0] == free[:3] and result.finish_reasons == ["stop"]

    # A pad id of its own is the decode contract's pad.
    root = _model_io(tmp_path, _set(*special, "pad", {"id": 3, "content": "<p>"}))
    assert (
        _lowered(root)["pipeline"]["workflow"]["components"]["decoder"]["contract"]["parameters"][
            "pad_token_id"
        ]
        == 3
    )


def test_without_an_end_token_rows_stop_only_on_a_bound(tmp_path):
    def edit(document):
        del document["package"]["tokenizer"]["special_tokens"]["eos"]
        document["model"]["eos_token_ids"] = [2]  # not part of the format: never read

    root = _model_io(tmp_path, edit)
    workflow = _lowered(root)["pipeline"]["workflow"]
    assert "package.eos_token_ids" not in workflow["inputs"]
    policy = workflow["steps"][0]["steps"][0]
    assert "eos_token_ids" not in policy["inputs"]
    result = Engine.from_dir(root).run(prompt=[[5, 6, 7], [9]], max_new_tokens=12)
    assert result.finish_reasons == ["length", "length"]
    assert all(len(row) == 12 for row in result.tokens)


@pytest.mark.parametrize("what", ["eos", "pad"])
def test_a_special_token_outside_the_vocabulary_is_refused(what, tmp_path):
    special = ("package", "tokenizer", "special_tokens")
    root = _model_io(tmp_path, _set(*special, what, {"id": 96, "content": "<x>"}))
    assert _refusal(root) == [("H91", f"package.tokenizer.special_tokens.{what}.id")]


def test_the_graph_is_the_one_onnx_file_of_the_folder(tmp_path):
    root = _model_io(tmp_path, lambda d: None)
    shutil.copy(root / "model.onnx", root / "other.onnx")
    assert _refusal(root) == [("H91", "model.io")]
    (root / "model.onnx").unlink()
    (root / "other.onnx").unlink()
    assert _refusal(root) == [("H91", "model.io")]


def test_sections_that_need_a_workflow_are_not_lowered(tmp_path):
    profile = {"generation": {"kind": "generation", "version": "1"}}
    root = _model_io(tmp_path, lambda d: d.update(profiles=profile))
    assert _refusal(root) == [("H93", "profiles")]


def test_model_facts_and_package_sections_are_carried(tmp_path):
    from fixtures import package_path

    document = _lowered(package_path("model_io_decoder"))
    assert document["model"] == {"max_sequence_length": 64, "vocab_size": 96}
    assert document["package"]["tokenizer"]["special_tokens"]["eos"] == {
        "id": 2,
        "content": "</s>",
    }
    assert "generation" not in document
    root = _model_io(tmp_path, lambda d: d.update(quantization={"default": "fp32"}))
    assert _lowered(root)["quantization"] == {"default": "fp32"}
    assert validate_package(root) == []


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
