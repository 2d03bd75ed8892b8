"""Text prompts and text results through the package's tokenizer.json."""

from __future__ import annotations

import pytest

from fixtures.generators.validation import TOKENIZER_WORDS, word_level_tokenizer
from reference_runtime import Engine, RunError
from tests.kit import emit, package, request_input, rows


def echo_package(tmp_path, with_tokenizer: bool = True):
    ids = rows("int64", "sequence")
    wf = {
        "inputs": {"request.input_ids": request_input(ids, "prompt_tokens")},
        "outputs": {"tokens": {"contract": ids, "role": "tokens", "stage": "pre_adapter"}},
        "steps": [emit("request.input_ids", "tokens")],
    }
    top = {}
    root = tmp_path / ("text" if with_tokenizer else "ids")
    if with_tokenizer:
        top["package"] = {
            "tokenizer": {
                "algorithm": "wordlevel",
                "vocab_size": len(TOKENIZER_WORDS),
                "artifacts": [{"location": "tokenizer.json"}],
            }
        }
        root.mkdir(parents=True)
        (root / "tokenizer.json").write_bytes(word_level_tokenizer(TOKENIZER_WORDS, ["</s>"]))
    return Engine.from_dir(package(root, wf, {}, **top))


def test_text_prompt_is_tokenised_and_results_decoded(tmp_path):
    result = echo_package(tmp_path).run(prompt="the cat sat")
    assert result.tokens == [[1, 2, 3]]
    assert result.text == ["the cat sat"]


def test_batch_of_text_prompts(tmp_path):
    result = echo_package(tmp_path).run(prompt=["the cat sat", "on the mat"])
    assert result.tokens == [[1, 2, 3], [4, 1, 5]]
    assert result.text == ["the cat sat", "on the mat"]


def test_ragged_text_prompts_are_refused(tmp_path):
    with pytest.raises(RunError) as err:
        echo_package(tmp_path).run(prompt=["the cat", "on the mat"])
    assert err.value.code == "H75" and "different lengths" in err.value.message


def test_text_prompt_without_a_tokenizer_is_refused(tmp_path):
    engine = echo_package(tmp_path, with_tokenizer=False)
    with pytest.raises(RunError) as err:
        engine.run(prompt="the cat sat")
    assert err.value.code == "H75" and "tokenizer.json" in err.value.message
    assert engine.run(prompt=[[1, 2]]).text is None
