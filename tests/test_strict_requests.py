"""Every request mistake is a coded refusal, before any component runs, through the API and
the command line alike, named in the caller's terms; ONNX Runtime sessions that cannot be
created are refused without a word on stdout."""

from __future__ import annotations

import json
from unittest import mock

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from fixtures import package_path
from reference_runtime import Engine, ReferenceRuntimeError, RunError
from reference_runtime.cli import main
from tests.kit import app, out, package, rows
from tests.test_text_prompts import echo_package

NAN, INF = float("nan"), float("inf")

# (API keywords, CLI arguments, words of the API message, words of the CLI message)
KEYWORD_MISTAKES = [
    ({"temperature": NAN}, ["--temperature", "nan"], "temperature=nan", "--temperature nan"),
    ({"temperature": INF}, ["--temperature", "inf"], "temperature=inf", "--temperature inf"),
    ({"temperature": -0.5}, ["--temperature", "-0.5"], "temperature >= 0", "--temperature >= 0"),
    ({"top_p": 1.5}, ["--top-p", "1.5"], "0 < top_p <= 1", "0 < --top-p <= 1"),
    ({"top_p": 0.0}, ["--top-p", "0"], "0 < top_p <= 1", "0 < --top-p <= 1"),
    ({"min_p": 2}, ["--min-p", "2"], "0 <= min_p <= 1", "0 <= --min-p <= 1"),
    ({"min_p": NAN}, ["--min-p", "nan"], "min_p=nan", "--min-p nan"),
    ({"top_k": -1}, ["--top-k", "-1"], "top_k=-1 is outside", "--top-k -1 is outside"),
    ({"top_k": 2.5}, ["--top-k", "2.5"], "top_k must be an integer", "--top-k '2.5' is not an integer"),
    ({"seed": NAN}, ["--seed", "nan"], "seed must be an integer", "--seed 'nan' is not an integer"),
    ({"seed": 1.5}, ["--seed", "1.5"], "seed must be an integer", "--seed '1.5' is not an integer"),
    ({"seed": 2**63}, ["--seed", str(2**63)], "seed=9223372036854775808 is outside",
     "--seed 9223372036854775808 is outside"),
    ({"max_new_tokens": 10**30}, ["--max-new-tokens", str(10**30)], "is above the largest allowed, 2147483647",
     "--max-new-tokens 1000000000000000000000000000000 is above"),
    ({"max_new_tokens": True}, ["--max-new-tokens", "true"], "must be an integer, not bool",
     "--max-new-tokens 'true' is not an integer"),
    ({"max_new_tokens": "5"}, ["--max-new-tokens", "5.0"], "must be an integer, not str",
     "--max-new-tokens '5.0' is not an integer"),
    ({"temperature": "hot"}, ["--temperature", "hot"], "temperature must be a number",
     "--temperature 'hot' is not a number"),
    # NaN and infinities pass no range check either
    ({"temperature": -INF}, ["--temperature=-inf"], "temperature=-inf is not a finite number",
     "--temperature -inf is not a finite number"),
    ({"top_p": NAN}, ["--top-p", "nan"], "top_p=nan is not a finite number",
     "--top-p nan is not a finite number"),
    ({"top_k": NAN}, ["--top-k", "nan"], "top_k must be an integer", "--top-k 'nan' is not an integer"),
    ({"max_new_tokens": NAN}, ["--max-new-tokens", "nan"], "max_new_tokens must be an integer",
     "--max-new-tokens 'nan' is not an integer"),
    ({"seed": INF}, ["--seed", "inf"], "seed must be an integer", "--seed 'inf' is not an integer"),
]  # fmt: skip

# (API prompt, CLI prompt arguments, words of the API message, words of the CLI message); the
# package's vocabulary is 96 tokens (model_io_decoder: package.tokenizer.vocab_size)
PROMPT_MISTAKES = [
    ([[1.0, 2]], ["--tokens", "[[1.0, 2]]"], "token 1.0 (row 0, position 0) is a float",
     "--tokens: token 1.0 (row 0, position 0) is a float"),
    ([[True, 2]], ["--prompt", "[[true, 2]]"], "token True (row 0, position 0) is a bool",
     "--prompt: token True (row 0, position 0) is a bool"),
    ([[NAN]], ["--prompt", "[[NaN]]"], "token nan (row 0, position 0) is a float",
     "--prompt: token nan (row 0, position 0) is a float"),
    ([[1, -1]], ["--prompt", "[[1, -1]]"], "token -1 (row 0, position 1) is outside [0, 95]",
     "--prompt: token -1 (row 0, position 1) is outside [0, 95]"),
    ([[1, 96]], ["--tokens", "[[1, 96]]"], "token 96 (row 0, position 1) is outside [0, 95]",
     "--tokens: token 96 (row 0, position 1) is outside [0, 95]"),
    ([[2**70]], ["--prompt", f"[[{2**70}]]"], f"token {2**70} (row 0, position 0) is outside",
     f"--prompt: token {2**70} (row 0, position 0) is outside"),
    ([["a", "b"]], ["--prompt", '[["a", "b"]]'], "token 'a' (row 0, position 0) is a str",
     "--prompt: token 'a' (row 0, position 0) is a str"),
    (5, ["--tokens", "5"], "the prompt is token rows or text, not int",
     "--tokens: the prompt is token rows or text, not int"),
    ([], ["--tokens", "[]"], "the prompt is empty", "--tokens: the prompt is empty"),
    (np.array([[1.0, 2.0]]), ["--prompt", "[[1,2,3]"], "a float64 array",
     "--prompt '[[1,2,3]' is not JSON token rows"),
    (np.array([[1, 97]]), ["--tokens", "[[1, 97]]"], "token 97 (row 0, position 1) is outside",
     "--tokens: token 97 (row 0, position 1) is outside"),
    (["the", 5], ["--tokens", '["the", 5]'], "text rows and token ids are mixed",
     "--tokens: text rows and token ids are mixed"),
]  # fmt: skip

KV = package_path("model_io_decoder")


@pytest.fixture(scope="module")
def kv_engine():
    return Engine.from_dir(KV)


def _refused_api(engine, **request) -> RunError:
    before = engine.counters["invocations"]
    with pytest.raises(RunError) as err:
        engine.run(**{"prompt": [[1, 2]], "max_new_tokens": 2, **request})
    assert err.value.code == "H75" and err.value.hint
    assert engine.counters["invocations"] == before  # refused before any component ran
    return err.value


def _refused_cli(capsys, *argv) -> dict:
    code = main(["run", str(KV), "--json", *argv])
    captured = capsys.readouterr()
    assert code == 1 and captured.err == ""
    error = json.loads(captured.out)["error"]
    assert error["code"] == "H75" and error["hint"]
    return error


@pytest.mark.parametrize(("keywords", "argv", "api_words", "cli_words"), KEYWORD_MISTAKES)
def test_keyword_mistakes_are_refused_through_the_api_and_the_cli(
    kv_engine, capsys, keywords, argv, api_words, cli_words
):
    assert api_words in _refused_api(kv_engine, **keywords).message
    message = _refused_cli(capsys, "--prompt", "[[1, 2]]", *argv)["message"]
    assert cli_words in message
    if argv[0] != "--max-new-tokens":
        assert "max_new_tokens" not in message  # the command line's own terms


@pytest.mark.parametrize(("prompt", "argv", "api_words", "cli_words"), PROMPT_MISTAKES)
def test_prompt_mistakes_are_refused_through_the_api_and_the_cli(
    kv_engine, capsys, prompt, argv, api_words, cli_words
):
    assert api_words in _refused_api(kv_engine, prompt=prompt).message
    assert cli_words in _refused_cli(capsys, *argv)["message"]


@pytest.mark.parametrize(
    ("request_", "words"),
    [
        ({"greedy": "yes"}, "greedy must be True or False"),
        ({"stop_on_eos": None}, "stop_on_eos must be True or False"),
        ({"inputs": [1, 2]}, "inputs must be a dict"),
        ({"inputs": {1: [1]}}, "input names are strings"),
        (
            {"inputs": {"request.prompt_lengths": np.array([object()])}},
            "an array of Python objects",
        ),
    ],
)
def test_other_api_mistakes_are_refused(kv_engine, request_, words):
    assert words in _refused_api(kv_engine, **request_).message


@pytest.mark.parametrize("overrides", [5, "sampler", [["a", "b"]], {1: "b"}, {"a": None}])
def test_malformed_overrides_are_refused(kv_engine, overrides):
    with pytest.raises(RunError) as err:
        kv_engine.run(prompt=[[1, 2]], max_new_tokens=1, overrides=overrides)
    assert err.value.code == "C21" and "overrides must map component names" in err.value.message


def test_the_cli_refuses_two_prompts_and_unreadable_npy_files(tmp_path, capsys):
    assert main(["run", str(KV), "--json", "--prompt", "a", "--text", "b"]) == 2
    assert "--prompt and --text" in json.loads(capsys.readouterr().out)["error"]["message"]
    path = tmp_path / "objects.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    error = _refused_cli(capsys, "--prompt", "[[1]]", "--input", f"request.prompt_lengths=@{path}")
    assert "not a readable .npy array" in error["message"]


def test_text_prompts_are_never_guessed(tmp_path, capsys):
    root = echo_package(tmp_path).package.root  # a word-level tokenizer.json
    for argv in (["--prompt", "the cat sat"], ["--text", "the cat sat"]):
        assert main(["run", str(root), "--json", *argv]) == 0
        assert json.loads(capsys.readouterr().out)["tokens"] == [[1, 2, 3]]
    # malformed token rows are refused, never tokenised as text
    assert main(["run", str(root), "--json", "--prompt", "[[1, 2, 3]"]) == 1
    assert "is not JSON token rows" in json.loads(capsys.readouterr().out)["error"]["message"]


def test_good_requests_still_run_the_same_through_both(kv_engine, capsys):
    api = kv_engine.run(prompt=np.array([[1, 2, 3]]), max_new_tokens=np.int64(3), seed=np.int64(4))
    argv = ["--tokens", "[[1, 2, 3]]", "--max-new-tokens", "3", "--seed", "4"]
    assert main(["run", str(KV), "--json", *argv]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == api.tokens


@pytest.mark.parametrize(
    ("name", "code", "api_words", "cli_words"),
    [
        # the package's overrides bound max_output_tokens
        ("arithmetic_decoder", "G88", "max_new_tokens=-1 is outside the package's allowed range",
         "--max-new-tokens -1 is outside the package's allowed range"),
        # the bound feeds a loop's max_iterations
        ("model_io_decoder", "D44", "max_new_tokens=-1 is negative",
         "--max-new-tokens -1 is negative"),
    ],
)  # fmt: skip
def test_a_negative_max_new_tokens_is_refused_in_the_callers_terms(
    capsys, name, code, api_words, cli_words
):
    engine = Engine.from_dir(package_path(name))
    with pytest.raises(RunError) as err:
        engine.run(prompt=[[3, 1, 4]], max_new_tokens=-1)
    assert err.value.code == code and api_words in err.value.message and err.value.hint
    argv = ["run", str(package_path(name)), "--json", "--tokens", "[[3, 1, 4]]"]
    assert main([*argv, "--max-new-tokens", "-1"]) == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["code"] == code and cli_words in error["message"]
    assert "max_new_tokens" not in error["message"] + error["hint"]


def test_max_new_tokens_zero_generates_nothing_and_reports_length():
    engine = Engine.from_dir(package_path("genai_decoder"))
    result = engine.run(prompt=[[5, 6, 7]], max_new_tokens=0)
    assert result.tokens == [[]] and result.finish_reasons == ["length"]


def test_out_of_vocabulary_tokens_supplied_as_an_input_are_refused(tmp_path):
    # the prompt's vocabulary comes from the graph's embedding table when the package does not
    # declare one (genai_decoder: 96 rows)
    engine = Engine.from_dir(package_path("genai_decoder"))
    with pytest.raises(RunError) as err:
        engine.run(prompt=[[5, 96]], max_new_tokens=2)
    assert err.value.code == "H75" and "the embedding of 'decoder' = 96" in err.value.message


# ------------------------------------------------------------------ ONNX Runtime creation


def rejected_graph_package(tmp_path):
    """A package whose graph ONNX Runtime refuses to create a session for (LpNormalization
    with p=3: the kernel rejects it while the session initialises)."""
    ids = rows("float32", "n")
    graph = helper.make_graph(
        [helper.make_node("LpNormalization", ["x"], ["y"], p=3, axis=-1)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "n"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    wf = {
        "inputs": {"x": app(ids)},
        "outputs": {"y": out(ids)},
        "components": {
            "norm": {
                "implementation": {"kind": "onnx", "artifact": "norm.onnx"},
                "ports": {"inputs": {"x": ids}, "outputs": {"y": ids}},
            }
        },
        "steps": [{"kind": "invoke", "component": "norm", "inputs": {"x": "x"},
                   "outputs": {"y": "y"}}],
    }  # fmt: skip
    return package(tmp_path / "rejected", wf, {"norm.onnx": model})


def test_a_session_onnx_runtime_rejects_is_refused_silently(tmp_path, capfd):
    root = rejected_graph_package(tmp_path)
    with pytest.raises(ReferenceRuntimeError) as err:
        Engine.from_dir(root)
    assert err.value.code == "C83" and "'norm'" in err.value.message
    out, errors = capfd.readouterr()
    assert out == "" and "onnxruntime" not in errors  # no banner, no logger lines
    assert main(["run", str(root), "--json", "--input", "x=[[1, 2]]"]) == 1
    out, errors = capfd.readouterr()
    assert json.loads(out)["error"]["code"] == "C83" and errors == ""


def test_a_provider_failure_at_creation_is_not_retried_on_another_provider(tmp_path, capfd):
    """ONNX Runtime's wrapper retries a session whose creation raises RuntimeError on the CPU
    provider, printing a banner to stdout, unless the retry is off from the start: here the
    provider fails (as a CUDA provider does) and nothing is retried or printed."""
    from onnxruntime.capi import onnxruntime_inference_collection as wrapper

    calls = []
    native = wrapper.C.InferenceSession

    class FailingProvider:
        def __init__(self, *args):
            self.session = native(*args)

        def initialize_session(self, providers, *rest):
            calls.append(list(providers))
            raise RuntimeError("provider failed to initialise")

    root = package_path("lora")
    with (
        mock.patch.object(wrapper.C, "InferenceSession", FailingProvider),
        pytest.raises(ReferenceRuntimeError) as err,
    ):
        Engine.from_dir(root)
    assert err.value.code == "C83" and "provider failed to initialise" in err.value.message
    assert calls == [["CPUExecutionProvider"]]  # created once, on the requested provider
    assert capfd.readouterr().out == ""
