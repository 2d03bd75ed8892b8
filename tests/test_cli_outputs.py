"""`reference-runtime run`: what it prints (summaries of large arrays, compact JSON with the
tokens once and the text), what `--out` saves (.npy, .wav, .png, result.json), and how it
refuses a request that misses or misnames inputs (every one at once, in the command line's
terms)."""

from __future__ import annotations

import io
import json
import wave

import numpy as np
from PIL import Image

from fixtures import package_path
from reference_runtime.cli import main


def run(capsys, name: str, *argv) -> tuple[int, str, str]:
    code = main(["run", str(package_path(name)), *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def png_request(tmp_path) -> str:
    pixels = (np.arange(48, dtype=np.uint8).reshape(4, 4, 3) * 5).astype(np.uint8)
    encoded = io.BytesIO()
    Image.fromarray(pixels).save(encoded, format="PNG")
    path = tmp_path / "image.npy"
    np.save(path, np.frombuffer(encoded.getvalue(), np.uint8))
    return f"request.image=@{path}"


def test_every_missing_and_unknown_input_at_once_in_cli_terms(capsys):
    code, _, err = run(capsys, "branching", "--input", "negat=true")
    assert code == 1
    first, fix = err.splitlines()
    assert first == (
        "error [H75]: required inputs 'mode', 'negate', 'request.tokens' were not supplied; "
        "the request supplies undeclared input 'negat' (did you mean 'negate'?)"
    )
    assert fix.startswith(
        "  fix: Pass --tokens [[...]], --input mode=[...] (int64 [1]), --input negate=VALUE "
        "(bool scalar)."
    )
    assert "inputs={" not in err  # the API's terms stay in the API
    assert "The inputs a request may supply: mode, negate, request.tokens." in fix


def test_the_api_keeps_its_own_terms():
    from reference_runtime import Engine, RunError

    engine = Engine.from_dir(package_path("branching"))
    try:
        engine.run(inputs={"negat": True})
    except RunError as exc:
        assert exc.code == "H75"
        assert "'negat' (did you mean 'negate'?)" in exc.message
        assert exc.hint.startswith("Pass prompt=..., inputs={'mode': ..., 'negate': ...}.")
    else:  # pragma: no cover - the request is refused
        raise AssertionError("a request missing inputs ran")


def test_json_is_compact_with_text_and_tokens_once(capsys):
    code, out, _ = run(capsys, "genai_decoder", "--tokens", "[[1,2]]", "--max-new-tokens", 3,
                       "--json")  # fmt: skip
    assert code == 0
    assert out.count("\n") == 1  # one line
    report = json.loads(out)
    assert report["tokens"] == [[59, 19, 56]] and report["text"] == ["t59 t19 t56"]
    assert report["tokens_output"] == "tokens" and "tokens" not in report["outputs"]
    assert report["finish_reasons"] == ["length"]
    assert out.count("59,19,56") == 1  # the tokens, once
    code, out, _ = run(capsys, "genai_decoder", "--tokens", "[[1,2]]", "--max-new-tokens", 3,
                       "--json", "--indent", 2)  # fmt: skip
    assert code == 0 and json.loads(out) == report and '\n  "tokens": [\n' in out


def test_large_arrays_print_a_summary(capsys, tmp_path):
    code, out, _ = run(capsys, "media", "--input", png_request(tmp_path))
    assert code == 0
    image = next(line for line in out.splitlines() if line.startswith("image: "))
    assert image.startswith("image: float32 [1, 3, 4, 4]  min 0  max 0.921569  mean 0.460784  [")
    assert "..." in image and len(image) < 200


def test_out_saves_every_output_and_result_json(capsys, tmp_path):
    out_dir = tmp_path / "out"
    code, out, _ = run(capsys, "media", "--input", png_request(tmp_path), "--out", out_dir)
    assert code == 0 and "result.json" in out
    result = json.loads((out_dir / "result.json").read_text())
    assert result["files"] == {
        "image": ["image.npy", "image.png"],
        "audio": ["audio.npy", "audio.wav"],
        "audio_raw": ["audio_raw.npy", "audio_raw.wav"],
    }
    assert result["counters"]["runs"] == 1
    image = np.load(out_dir / "image.npy")
    assert image.shape == (1, 3, 4, 4) and image.dtype == np.float32
    png = np.asarray(Image.open(out_dir / "image.png"))
    assert png.shape == (4, 4, 3)
    np.testing.assert_array_equal(png, np.round(np.moveaxis(image[0], 0, -1) * 255))
    audio = np.load(out_dir / "audio.npy")
    with wave.open(str(out_dir / "audio.wav")) as wav:
        assert (wav.getnchannels(), wav.getframerate(), wav.getsampwidth()) == (2, 16000, 2)
        frames = np.frombuffer(wav.readframes(wav.getnframes()), "<i2").reshape(-1, 2)
    np.testing.assert_array_equal(frames.T, np.round(audio[0] * 32767).astype(np.int16))


def test_out_saves_tokens_and_per_row_outputs(capsys, tmp_path):
    out_dir = tmp_path / "out"
    code, _, _ = run(capsys, "genai_decoder", "--tokens", "[[1,2]]", "--max-new-tokens", 3,
                     "--out", out_dir)  # fmt: skip
    assert code == 0
    result = json.loads((out_dir / "result.json").read_text())
    assert result["tokens"] == [[59, 19, 56]] and result["text"] == ["t59 t19 t56"]
    assert result["finish_reasons"] == ["length"]
    files = result["files"]["tokens"]
    saved = [np.load(out_dir / f) for f in files if f is not None]
    assert [row.reshape(-1).tolist() for row in saved] == result["tokens"]


def test_a_package_with_session_state_runs_as_a_fresh_session(capsys):
    code, out, err = run(capsys, "session_counter")
    assert code == 0, err
    assert out == "count: int64 [1]  [1]\n"
