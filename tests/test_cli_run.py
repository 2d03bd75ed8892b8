"""`reference-runtime run`: the JSON report, `--input` parsing, and errors (on the upstream
example packages; skipped when they are absent)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reference_runtime.cli import main


def _run(capsys, *argv) -> tuple[int, dict]:
    code = main(["run", *map(str, argv), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_json_report_dense_output(upstream_dir, capsys):
    # codec: encoder and decoder are both Identity, so the output is the input. The JSON list
    # takes its dtype (float32) from the input's contract.
    code, report = _run(
        capsys, upstream_dir / "codec", "--input", "request.waveform=[[[0.5, -0.25, 1]]]"
    )
    assert code == 0
    assert set(report) == {
        "outputs", "tokens", "text", "finish_reasons", "tokens_output", "counters"
    }  # fmt: skip
    assert report["outputs"] == {
        "waveform": {"dtype": "float32", "shape": [1, 1, 3], "data": [[[0.5, -0.25, 1.0]]]}
    }
    assert report["tokens"] is None and report["finish_reasons"] is None
    assert report["tokens_output"] is None and report["text"] is None
    counters = report["counters"]
    assert counters["invocations"] == {"decoder": {"ort": 1}, "encoder": {"ort": 1}}
    assert counters["sessions_created"] == {"ort": 2}
    assert counters["runs"] == 1


def test_input_from_npy_file(upstream_dir, tmp_path, capsys):
    waveform = np.arange(8, dtype=np.float32).reshape(2, 1, 4) / 8
    path = tmp_path / "waveform.npy"
    np.save(path, waveform)
    code, report = _run(capsys, upstream_dir / "codec", "--input", f"request.waveform=@{path}")
    assert code == 0
    out = report["outputs"]["waveform"]
    assert (out["dtype"], out["shape"]) == ("float32", [2, 1, 4])
    np.testing.assert_array_equal(np.asarray(out["data"], np.float32), waveform)


def test_json_inputs_take_each_contracts_dtype(upstream_dir, capsys):
    # adapter: float32 activations, int64 segments/counts, float32 scales, bool active, all
    # from JSON. y = x + scale * (alpha / rank) * b (a . x) with blue (index 0): a = [0, 1],
    # b = [3, 4], alpha / rank = 1: [1, 2] + 2 * [3, 4] * 2 = [13, 18].
    code, report = _run(
        capsys, upstream_dir / "adapter",
        "--input", "activations=[[1, 2]]",
        "--input", "request.adapter_segments=[[0, -1]]",
        "--input", "request.adapter_counts=[1]",
        "--input", "request.adapter_scales=[[2, 0]]",
        "--input", "request.active=[true]",
    )  # fmt: skip
    assert code == 0
    assert report["outputs"]["result"] == {
        "dtype": "float32",
        "shape": [1, 2],
        "data": [[13.0, 18.0]],
    }
    assert report["counters"]["adapter_cache"] == {"loads": 1, "hits": 0, "evictions": 0}


def test_json_report_per_row_output(upstream_dir, capsys):
    # decoder: the model's logits are all 0, so greedy decoding picks token 0. Row 0's eos id is
    # 0 (stops after one token), row 1's is 127 (runs to the bound), row 2 is never active.
    code, report = _run(
        capsys, upstream_dir / "decoder",
        "--prompt", "[[5, 6, 7], [1, 2, 3], [4, 4, 4]]",
        "--max-new-tokens", 3,
        "--input", "eos_ids=[[0], [127], [127]]",
        "--input", "package.active=[true, true, false]",
    )  # fmt: skip
    assert code == 0
    # the tokens output is reported once, per row, as "tokens"
    assert report["outputs"] == {} and report["tokens_output"] == "tokens"
    assert report["tokens"] == [[0], [0, 0, 0], []]
    assert report["finish_reasons"] == ["stop", "length", "stop"]
    assert report["counters"]["loop_iterations"] == 3
    assert report["counters"]["invocations"]["model"] == {"ort": 4}


def test_run_error_json_exit_1(upstream_dir, capsys):
    # static_cache refuses a negative write index before the model runs (E56).
    code, report = _run(
        capsys, upstream_dir / "static_cache",
        "--prompt", "[[3]]", "--input", "write_indices=[-1]", "--input", "active=[true]",
    )  # fmt: skip
    assert code == 1
    assert set(report) == {"error"}
    assert set(report["error"]) == {"code", "message", "hint"}
    assert report["error"]["code"] == "E56"
    assert "decoder_cache" in report["error"]["message"]
    assert report["error"]["hint"]


def test_run_error_human_readable(upstream_dir, capsys):
    code = main(["run", str(upstream_dir / "static_cache"), "--prompt", "[[3]]",
                 "--input", "write_indices=[8]", "--input", "active=[true]"])  # fmt: skip
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("error [E56]:") and "\n  fix: " in err


def test_human_readable_report(upstream_dir, capsys):
    code = main(["run", str(upstream_dir / "decoder"), "--prompt", "[[5, 6, 7]]",
                 "--max-new-tokens", "2"])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert out == "tokens row 0 (length): [0, 0]\n"  # the tokens output, once


@pytest.mark.parametrize(
    "value, message",
    [("request.prompt_tokens", "is not NAME=VALUE"), ("x=@/no/such.npy", "does not exist"),
     ("x=[1,", "is not JSON")],
)  # fmt: skip
def test_bad_input_is_a_usage_error(upstream_dir, capsys, value, message):
    code, report = _run(capsys, upstream_dir / "speech_wav", "--input", value)
    assert code == 2
    assert report["error"]["code"] == "USAGE" and message in report["error"]["message"]


def test_undeclared_input_is_refused(upstream_dir, capsys):
    code, report = _run(capsys, upstream_dir / "speech_wav", "--prompt", "[[1, 2]]",
                        "--input", "nope=[1]")  # fmt: skip
    assert code == 1
    assert report["error"]["code"] == "H75" and "nope" in report["error"]["message"]
