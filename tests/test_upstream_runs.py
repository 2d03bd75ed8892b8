"""The format's upstream example packages run end to end through ``Engine``.

Every expected value is computed here without the Engine: by hand (numpy) from what the
graphs do, or by driving one component graph at a time with ``onnx.reference``'s
``ReferenceEvaluator`` as an oracle. The comments say which, and why the value follows.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

from reference_runtime import Engine, RunError

# ------------------------------------------------------------------ oracle helpers


class GatherElements(OpRun):  # replaces the reference op of this name
    """``onnx.reference``'s GatherElements goes through ``np.choose``, which refuses more than
    64 choices (the decoder's sampler gathers over a 128-token vocabulary)."""

    def _run(self, data, indices, axis=None):
        return (np.take_along_axis(data, indices, axis=axis),)


def _graph(root: Path, relpath: str) -> onnx.ModelProto:
    return onnx.load(str(root / relpath), format="textproto", load_external_data=False)


@functools.cache
def _oracle(root: Path, relpath: str) -> ReferenceEvaluator:
    return ReferenceEvaluator(_graph(root, relpath), new_ops=[GatherElements])


def _call(root: Path, relpath: str, **inputs) -> list[np.ndarray]:
    return _oracle(root, relpath).run(None, inputs)


def _initializers(root: Path, relpath: str) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in _graph(root, relpath).graph.initializer}


def _metadata(root: Path) -> dict:
    return yaml.safe_load((root / "inference_metadata.yaml").read_text())


def _onnx_components(root: Path) -> int:
    components = _metadata(root)["pipeline"]["workflow"]["components"]
    return sum(c["implementation"]["kind"] == "onnx" for c in components.values())


def _delta(before: dict, after: dict) -> dict[str, int]:
    """Per-component invocation counts between two ``engine.counters`` snapshots."""
    names = set(before["invocations"]) | set(after["invocations"])
    out = {}
    for name in names:
        b = sum(before["invocations"].get(name, {}).values())
        a = sum(after["invocations"].get(name, {}).values())
        if a != b:
            out[name] = a - b
    return out


def _engine(upstream_dir: Path, name: str) -> Engine:
    return Engine.from_dir(upstream_dir / name, executor="ort", device="cpu")


# ================================================================== decoder
#
# model.onnx: `logits = ConstantOfShape(0)` of shape [batch, sequence, 128], so every logit is 0
# whatever the prompt. The v2 sampler (policies/token_sampler) divides by the temperature,
# keeps the `top_k` best entries (TopK breaks ties towards the lower index), applies top_p /
# min_p and picks with a counter-based RNG keyed by (seed, counter); inactive rows get -1 and
# keep their counter. termination: a row ends when its token is one of its eos ids or when
# `iteration + 1 >= max_iterations`. The body emits `token.body` with `when: active` (the
# pre-body flag), so a row stops publishing once it is inactive.


@pytest.fixture(scope="module")
def decoder(upstream_dir):
    return _engine(upstream_dir, "decoder")


def _sampled(root, *, seed, n, temperature=1.0, top_k=50, top_p=1.0, min_p=0.0) -> list[int]:
    """The sampler graph on all-zero logits for counters 0..n-1 (rng_counter starts at the
    `request.rng_counter` default 0 and `next_counter = counter + 1` for an active row)."""
    tokens = []
    for counter in range(n):
        token, next_counter = _call(
            root, "policies/token_sampler.onnx.textproto",
            logits=np.zeros((1, 128), np.float32),
            temperature=np.array([temperature], np.float32), top_k=np.array([top_k]),
            top_p=np.array([top_p], np.float32), min_p=np.array([min_p], np.float32),
            seed=np.array([seed]), counter=np.array([counter]),
            active=np.array([True]), done=np.array([False]),
        )  # fmt: skip
        assert next_counter.tolist() == [counter + 1]
        tokens.append(int(token[0]))
    return tokens


def test_decoder_model_logits_are_zero(upstream_dir):
    """The premise of the decoder expectations, checked on the graph itself."""
    root = upstream_dir / "decoder"
    logits, present = _call(
        root, "model.onnx.textproto",
        input_ids=np.array([[5, 6, 7]]), attention_mask=np.ones((1, 3), np.int64),
        position_ids=np.array([[0, 1, 2]]),
        **{"past_key_values.0.key": np.zeros((1, 2, 0, 8), np.float32)},
    )  # fmt: skip
    assert logits.shape == (1, 3, 128) and not logits.any()
    assert present.shape == (1, 2, 3, 8)
    # Greedy (temperature 0, top_k 1, top_p 1, min_p 0) on zero logits picks token 0.
    assert _sampled(root, seed=0, n=2, temperature=0.0, top_k=1) == [0, 0]


def test_decoder_greedy_single_row(upstream_dir, decoder):
    before = decoder.counters
    result = decoder.run(prompt=[[5, 6, 7]], max_new_tokens=4)
    after = decoder.counters
    # Greedy on zero logits: token 0 each iteration; the default eos id 127 never comes, so the
    # row runs all 4 iterations and stops on the max-token bound.
    assert result.tokens == [[0, 0, 0, 0]]
    assert result.finish_reasons == ["length"]
    (row,) = result.outputs["tokens"]
    assert row.dtype == np.int64 and row.shape == (1, 4)
    n = 4
    assert after["loop_iterations"] - before["loop_iterations"] == n
    assert _delta(before, after) == {
        "decoder_state_initializer": 1,
        "termination_batch_initializer": 1,
        "model": 1 + n,  # once in setup (the prompt), once per iteration
        "last_token_logits": 1 + n,
        "token_sampler": n,
        "token_to_slot": n,
        "generated_length_update": 2 * n,  # two invokes per body
        "token_state_update": n,
        "termination": n,
        "cache_length_update": 2 * n,
        "decoder_step_update": n,
    }
    # One ONNX Runtime session per ONNX component, created at load, never per invocation.
    assert (
        after["sessions_created"]
        == {"ort": _onnx_components(upstream_dir / "decoder")}
        == {"ort": 11}
    )
    assert after["runs"] - before["runs"] == 1


def test_decoder_eos_ends_the_row(decoder):
    before = decoder.counters
    result = decoder.run(prompt=[[5, 6, 7]], max_new_tokens=4, inputs={"eos_ids": [[0]]})
    after = decoder.counters
    # The first greedy token (0) is the row's eos id: termination clears `active`, and the loop
    # predicate (`active`) is false before the second body.
    assert result.tokens == [[0]] and result.finish_reasons == ["stop"]
    assert after["loop_iterations"] - before["loop_iterations"] == 1
    assert _delta(before, after)["model"] == 2


def test_decoder_batched_rows_equal_single_runs(decoder):
    prompts = [[5, 6, 7], [1, 2, 3], [4, 4, 4]]
    eos = [[0], [127], [127]]
    batched = decoder.run(
        prompt=prompts,
        max_new_tokens=4,
        inputs={"eos_ids": eos, "package.active": [True, True, False]},
    )
    # Row 0 stops on its eos after one token and publishes nothing more (a shorter stream);
    # row 1 runs to the bound; row 2 is inactive from the start and publishes nothing at all.
    assert batched.tokens == [[0], [0, 0, 0, 0], []]
    assert batched.finish_reasons == ["stop", "length", "stop"]
    rows = batched.outputs["tokens"]
    assert [None if r is None else r.shape for r in rows] == [(1, 1), (1, 4), None]
    for r in (0, 1):
        alone = decoder.run(prompt=[prompts[r]], max_new_tokens=4, inputs={"eos_ids": [eos[r]]})
        assert alone.tokens == [batched.tokens[r]]
        assert alone.finish_reasons == [batched.finish_reasons[r]]
        np.testing.assert_array_equal(alone.outputs["tokens"][0], rows[r])


def test_decoder_seeded_sampling_follows_the_sampler_graph(upstream_dir, decoder):
    root = upstream_dir / "decoder"
    kw = dict(max_new_tokens=6, greedy=False, temperature=1.0, top_k=50)
    first = decoder.run(prompt=[[5, 6, 7]], seed=7, **kw)
    again = decoder.run(prompt=[[5, 6, 7]], seed=7, **kw)
    other = decoder.run(prompt=[[5, 6, 7]], seed=8, **kw)
    expected7 = _sampled(root, seed=7, n=6)
    expected8 = _sampled(root, seed=8, n=6)
    assert first.tokens == again.tokens == [expected7]  # reproducible for a fixed seed
    assert other.tokens == [expected8]
    assert expected7 != expected8
    # top_k 50 over equal logits keeps the indices 0..49 (TopK breaks ties to the lower index).
    assert all(0 <= t < 50 for t in expected7 + expected8)
    assert first.finish_reasons == ["length"]
    # top_p 0.09 over 50 equal probabilities (0.02 each) keeps the 5 whose preceding mass
    # (0, 0.02, ..., 0.08) is below 0.09: tokens 0..4.
    narrow = decoder.run(prompt=[[5, 6, 7]], seed=7, top_p=0.09, **kw)
    assert narrow.tokens == [_sampled(root, seed=7, n=6, top_p=0.09)]
    assert all(0 <= t < 5 for t in narrow.tokens[0])
    # Sampling with top_k 1 is greedy again.
    assert decoder.run(prompt=[[5, 6, 7]], seed=7, **{**kw, "top_k": 1}).tokens == [[0] * 6]


def test_decoder_sampled_batch_rows_equal_single_runs(upstream_dir, decoder):
    root = upstream_dir / "decoder"
    stream7 = _sampled(root, seed=7, n=6)
    eos0 = stream7[2]  # row 0 ends on its third sampled token
    stop_at = stream7.index(eos0) + 1
    kw = dict(max_new_tokens=6, greedy=False, temperature=1.0, top_k=50)
    batched = decoder.run(
        prompt=[[5, 6, 7], [1, 2, 3]],
        inputs={"request.seed": np.array([7, 8]), "eos_ids": [[eos0], [127]]},
        **kw,
    )
    # Each row samples from its own (seed, counter) stream; a finished row consumes no more
    # counters and publishes nothing more.
    assert batched.tokens == [stream7[:stop_at], _sampled(root, seed=8, n=6)]
    assert batched.finish_reasons == ["stop", "length"]
    for r, (seed, eos) in enumerate([(7, eos0), (8, 127)]):
        alone = decoder.run(
            prompt=[[[5, 6, 7], [1, 2, 3]][r]], seed=seed, inputs={"eos_ids": [[eos]]}, **kw
        )
        assert alone.tokens == [batched.tokens[r]]
        assert alone.finish_reasons == [batched.finish_reasons[r]]


# ================================================================== static_cache
#
# state_init: zero key/value caches [batch, capacity=8, 4]; `cache_lengths = min(w + 1, 8)`;
# the token is the prompt's last one. model: scatters `embedding[token]` (key) and its square
# (value) at [row, write_index], then `logits = (sum over slots < cache_length of key + value)
# @ projection`. Loop body: `token = argmax(logits)`; step_update: `w' = min(w + 1, 7)` for
# every row, `length' = min(length + 1, 8)` only for active rows, `active' = active and
# length + 1 < 8`; the loop runs while any row is active (`loop_active`, one value, so no
# inactive-row merge: service-group buffers and the cursor move for every row).


def _static_cache_expected(root, prompt, write_indices, active, iterations, capacity=8):
    weights = _initializers(root, "model.onnx.textproto")
    emb, proj = weights["embedding"], weights["projection"]
    prompt = np.asarray(prompt)
    w = np.asarray(write_indices, np.int64)
    active = np.asarray(active, bool)
    rows = np.arange(len(prompt))
    key = np.zeros((len(prompt), capacity, 4), np.float32)
    value = np.zeros_like(key)

    def model(token, w, lengths):
        key[rows, w] = emb[token]
        value[rows, w] = emb[token] * emb[token]
        valid = (np.arange(capacity)[None, :] < lengths[:, None])[..., None]
        pooled = (key * valid).sum(axis=1) + (value * valid).sum(axis=1)
        return (pooled @ proj)[:, None, :]

    lengths = np.minimum(w + 1, capacity)
    logits = model(prompt[:, -1], w, lengths)
    loop_active, done = True, 0
    while done < iterations and loop_active:
        token = logits.argmax(axis=2)[:, 0]
        w = np.minimum(w + 1, capacity - 1)
        grown = np.minimum(lengths + 1, capacity)
        room = lengths + 1 < capacity
        lengths = np.where(active, grown, lengths)
        active = active & room
        logits = model(token, w, lengths)
        loop_active = bool(active.any())
        done += 1
    return {
        "logits": logits, "cache_lengths": lengths, "write_indices": w,
        "key_cache": key, "value_cache": value, "iterations": done,
    }  # fmt: skip


def _check_static_cache(result, expected):
    for name in ("cache_lengths", "write_indices"):
        np.testing.assert_array_equal(result.outputs[name], expected[name])
        assert result.outputs[name].dtype == np.int64
    for name in ("logits", "key_cache", "value_cache"):
        assert result.outputs[name].dtype == np.float32
        np.testing.assert_allclose(result.outputs[name], expected[name], rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def static_cache(upstream_dir):
    return _engine(upstream_dir, "static_cache")


def test_static_cache_inactive_row_length_frozen_cursor_moves(upstream_dir, static_cache):
    root = upstream_dir / "static_cache"
    before = static_cache.counters
    result = static_cache.run(
        prompt=[[3, 5], [1, 2]], inputs={"write_indices": [0, 4], "active": [True, False]}
    )
    after = static_cache.counters
    expected = _static_cache_expected(root, [[3, 5], [1, 2]], [0, 4], [True, False], 3)
    _check_static_cache(result, expected)
    # By hand: 3 iterations (`request.max_iterations` defaults to 3). Row 0 (active): length
    # 1 -> 4, cursor 0 -> 3. Row 1 (inactive): length frozen at min(4 + 1, 8) = 5 while its
    # cursor moves 4 -> 7.
    assert result.outputs["cache_lengths"].tolist() == [4, 5]
    assert result.outputs["write_indices"].tolist() == [3, 7]
    key = result.outputs["key_cache"]
    # Slots written: row 0 at 0..3, row 1 at 4..7 (the moving cursor writes the buffer too);
    # nothing else.
    assert [np.flatnonzero(np.abs(key[r]).sum(axis=1)).tolist() for r in (0, 1)] == [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
    ]
    assert after["loop_iterations"] - before["loop_iterations"] == 3
    assert _delta(before, after) == {
        "state_init": 1, "model": 4, "next_token": 3, "step_update": 3, "loop_continue": 3,
    }  # fmt: skip


def test_static_cache_stops_when_full(upstream_dir, static_cache):
    root = upstream_dir / "static_cache"
    for w in (6, 7):  # 7 = capacity - 1, the last valid slot
        before = static_cache.counters
        result = static_cache.run(
            prompt=[[4]], inputs={"write_indices": [w], "active": [True]}, max_new_tokens=5
        )
        expected = _static_cache_expected(root, [[4]], [w], [True], 5)
        _check_static_cache(result, expected)
        # length min(w + 1, 8) reaches 8 after one step; `length + 1 < 8` is then false, so
        # the loop ends after one iteration with the cursor parked on the last slot.
        assert expected["iterations"] == 1
        assert static_cache.counters["loop_iterations"] - before["loop_iterations"] == 1
        assert result.outputs["cache_lengths"].tolist() == [8]
        assert result.outputs["write_indices"].tolist() == [7]


@pytest.mark.parametrize("write_index", [-1, 8, 100])
def test_static_cache_refuses_out_of_range_write_before_the_graph_runs(static_cache, write_index):
    before = static_cache.counters
    with pytest.raises(RunError) as info:
        static_cache.run(prompt=[[3]], inputs={"write_indices": [write_index], "active": [True]})
    after = static_cache.counters
    assert info.value.code == "E56"
    assert "decoder_cache" in info.value.message and str(write_index) in info.value.message
    # state_init (not a write_indices port) ran; the model, the first component whose
    # write_indices port receives the destination, was refused before it ran.
    assert _delta(before, after) == {"state_init": 1}
    assert after["runs"] == before["runs"]


# ================================================================== diffusion
#
# Setup: schedule (31 sigmas), timesteps (30), initial scale 14.614641; `latent = noise *
# scale`; text_encoder broadcasts the ids to [batch, sequence, 32]. Body (iteration i, value
# [batch] filled with i): timestep = timesteps[i]; model_input = latent / sqrt(sigma_i^2 + 1);
# denoiser: `noise_pred = sample + timestep + mean(hidden)`; Euler step `latent + (sigma_{i+1}
# - sigma_i) * noise_pred`. The continue predicate is `not any(false)`, so the loop runs
# `max_iterations` times. Both appends use the last axis (the emit's default).


def _diffusion_expected(root, prompt, noise, iterations):
    (schedule,) = _call(root, "policies/diffusion_schedule.onnx.textproto")
    (timesteps,) = _call(root, "policies/diffusion_timesteps.onnx.textproto")
    (scale,) = _call(root, "policies/initial_state_scale.onnx.textproto")
    (latent,) = _call(root, "policies/tensor_scale.onnx.textproto", tensor=noise, scale=scale)
    (hidden,) = _call(root, "text_encoder/model.onnx.textproto", input_ids=np.asarray(prompt))
    estimates, trajectory = [], []
    for i in range(iterations):
        step = np.full(len(noise), i, np.int64)
        (timestep,) = _call(
            root, "policies/schedule_lookup.onnx.textproto", schedule=timesteps, step=step
        )
        (model_input,) = _call(
            root, "policies/model_input_scale.onnx.textproto",
            sample=latent, step=step, schedule=schedule,
        )  # fmt: skip
        (estimate,) = _call(
            root, "denoiser/model.onnx.textproto",
            sample=model_input, timestep=timestep, encoder_hidden_states=hidden,
        )  # fmt: skip
        (latent,) = _call(
            root, "policies/solver_step.onnx.textproto",
            sample=latent, derivative=estimate, step=step, schedule=schedule,
        )  # fmt: skip
        estimates.append(estimate)
        trajectory.append(latent)
    (image,) = _call(root, "vae_decoder/model.onnx.textproto", latent=latent)
    return latent, image, estimates, trajectory


@pytest.fixture(scope="module")
def diffusion(upstream_dir):
    return _engine(upstream_dir, "diffusion")


def _noise(rows, seed=0):
    return np.random.default_rng(seed).standard_normal((rows, 4, 2, 3)).astype(np.float32)


def test_diffusion_final_latent_matches_the_solver_graphs(upstream_dir, diffusion):
    root = upstream_dir / "diffusion"
    prompt, noise, n = [[1, 2, 3], [4, 5, 6]], _noise(2), 3
    result = diffusion.run(prompt=prompt, inputs={"noise": noise}, max_new_tokens=n)
    latent, image, estimates, trajectory = _diffusion_expected(root, prompt, noise, n)
    tol = dict(rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(result.outputs["latent"], latent, **tol)
    np.testing.assert_allclose(result.outputs["image"], image, **tol)
    np.testing.assert_array_equal(result.outputs["image"], result.outputs["latent"][:, :3])
    # One chunk of width 3 per iteration, appended along the last axis.
    for name, chunks in (("noise_estimate", estimates), ("latent_trajectory", trajectory)):
        value = result.outputs[name]
        assert value.shape == (2, 4, 2, 3 * n)
        for i, chunk in enumerate(chunks):
            np.testing.assert_allclose(value[..., 3 * i : 3 * (i + 1)], chunk, **tol)
    np.testing.assert_array_equal(
        result.outputs["latent_trajectory"][..., -3:], result.outputs["latent"]
    )


def test_diffusion_default_iterations_grow_the_appends(upstream_dir, diffusion):
    root = upstream_dir / "diffusion"
    prompt, noise = [[7, 1]], _noise(1, seed=1)
    before = diffusion.counters
    result = diffusion.run(prompt=prompt, inputs={"noise": noise})
    # `request.max_iterations` defaults to 30: 30 chunks of width 3.
    assert diffusion.counters["loop_iterations"] - before["loop_iterations"] == 30
    assert result.outputs["noise_estimate"].shape == (1, 4, 2, 90)
    assert result.outputs["latent_trajectory"].shape == (1, 4, 2, 90)
    latent, _, _, _ = _diffusion_expected(root, prompt, noise, 30)
    np.testing.assert_allclose(result.outputs["latent"], latent, rtol=1e-5, atol=1e-4)


def test_diffusion_batched_rows_equal_single_runs(diffusion):
    prompt, noise = [[1, 2, 3], [4, 5, 6]], _noise(2, seed=2)
    batched = diffusion.run(prompt=prompt, inputs={"noise": noise}, max_new_tokens=4)
    for r in range(2):
        alone = diffusion.run(
            prompt=[prompt[r]], inputs={"noise": noise[r : r + 1]}, max_new_tokens=4
        )
        for name in ("image", "latent", "noise_estimate", "latent_trajectory"):
            np.testing.assert_array_equal(alone.outputs[name], batched.outputs[name][r : r + 1])


# ================================================================== codec


def test_codec_encoder_then_decoder(upstream_dir):
    engine = _engine(upstream_dir, "codec")
    waveform = np.random.default_rng(3).standard_normal((2, 1, 16)).astype(np.float32)
    result = engine.run(inputs={"request.waveform": waveform})
    # encoder: codes = Identity(waveform); decoder: waveform = Identity(codes).
    (codes,) = _call(upstream_dir / "codec", "encoder/model.onnx.textproto", waveform=waveform)
    (decoded,) = _call(upstream_dir / "codec", "decoder/model.onnx.textproto", codes=codes)
    np.testing.assert_array_equal(result.outputs["waveform"], decoded)
    np.testing.assert_array_equal(result.outputs["waveform"], waveform)
    assert result.tokens is None and result.finish_reasons is None
    counters = engine.counters
    assert counters["invocations"] == {"decoder": {"ort": 1}, "encoder": {"ort": 1}}
    assert counters["sessions_created"] == {"ort": 2}


# ================================================================== adapter
#
# The workflow invokes only the `overlay` (parameter-overlay@1 on target `projection`, whose
# base weight is the 2x2 identity and whose in/out features are equal), so per row
# `y = x + sum over the row's adapters of scale * (alpha / rank) * b (a . x)` with a [1, 2]
# and b [2, 1] from adapters/<alias>/adapter.json; inactive rows and rows with no adapter
# pass through.


def _lora(upstream_dir) -> dict[int, tuple]:
    root = upstream_dir / "adapter"
    artifacts = _metadata(root)["adapters"]["artifacts"]
    out = {}
    for alias, artifact in artifacts.items():
        factors = json.loads((root / f"adapters/{alias}/adapter.json").read_text())
        entry = factors["targets"]["projection"]
        a = np.asarray(entry["a"], np.float64).reshape(1, 2)
        b = np.asarray(entry["b"], np.float64).reshape(2, 1)
        out[artifact["index"]] = (a, b, artifact["alpha"] / artifact["rank"])
    return out


def _overlay_expected(lora, x, segments, counts, scales, active):
    y = np.asarray(x, np.float64).copy()
    for r in range(len(y)):
        if not active[r]:
            continue
        for slot in range(counts[r]):
            a, b, factor = lora[segments[r][slot]]
            y[r] += scales[r][slot] * factor * (b @ (a @ np.asarray(x[r], np.float64)))
    return y


def _selection(segments, counts, scales, active):
    return {
        "request.adapter_segments": segments,
        "request.adapter_counts": counts,
        "request.adapter_scales": scales,
        "request.active": active,
    }


BLUE, GREEN, PEFT, RED = 0, 1, 2, 3  # `index` of each artifact in inference_metadata.yaml


def test_adapter_overlay_per_row(upstream_dir):
    engine = _engine(upstream_dir, "adapter")
    x = np.array([[1, 2], [3, -1], [0.5, 0.5], [2, 2]], np.float32)
    sel = ([[BLUE, RED], [RED, -1], [BLUE, -1], [GREEN, -1]], [2, 1, 0, 1],
           [[1.0, 0.5], [-1.5, 0.0], [1.0, 0.0], [3.0, 0.0]], [True, True, True, False])  # fmt: skip
    result = engine.run(inputs={"activations": x, **_selection(*sel)})
    expected = _overlay_expected(_lora(upstream_dir), x, *sel)
    # By hand: row 0 = [1,2] + 1*[3,4]*(0*1+1*2) + 0.5*[1,2]*(1*1+0*2) = [7.5, 11];
    # row 1 = [3,-1] - 1.5*[1,2]*3 = [-1.5, -10]; row 2 selects nothing and row 3 is inactive:
    # both pass through.
    assert expected.tolist() == [[7.5, 11.0], [-1.5, -10.0], [0.5, 0.5], [2.0, 2.0]]
    assert result.outputs["result"].dtype == np.float32
    np.testing.assert_allclose(result.outputs["result"], expected, rtol=1e-6)
    assert engine.counters["invocations"] == {
        "overlay": {"adapter:onnx-genai.parameter-overlay@1": 1}
    }
    assert engine.counters["sessions_created"] == {"ort": 1}  # the base decoder graph


def test_adapter_lru_cache_counters(upstream_dir):
    engine = _engine(upstream_dir, "adapter")  # fresh: the cache starts empty
    lora = _lora(upstream_dir)
    x = np.array([[1.0, -2.0]], np.float32)
    # cache.max_entries is 2 (least recently used evicted)
    sequence = [  # adapter, (loads, hits, evictions) after the request
        (BLUE, (1, 0, 0)),   # load blue                      cache: blue
        (RED, (2, 0, 0)),    # load red                       cache: blue, red
        (BLUE, (2, 1, 0)),   # hit blue                       cache: red, blue
        (GREEN, (3, 1, 1)),  # load green, evict red (LRU)    cache: blue, green
        (RED, (4, 1, 2)),    # load red, evict blue           cache: green, red
        (GREEN, (4, 2, 2)),  # hit green                      cache: red, green
        (PEFT, (5, 2, 3)),   # load peft, evict red           cache: green, peft
    ]  # fmt: skip
    for index, (loads, hits, evictions) in sequence:
        sel = ([[index, -1]], [1], [[2.0, 0.0]], [True])
        result = engine.run(inputs={"activations": x, **_selection(*sel)})
        np.testing.assert_allclose(
            result.outputs["result"], _overlay_expected(lora, x, *sel), rtol=1e-6
        )
        assert engine.counters["adapter_cache"] == {
            "loads": loads, "hits": hits, "evictions": evictions,
        }  # fmt: skip
    # Two rows sharing one adapter in one request: one load at most, then a hit.
    sel = ([[BLUE, -1], [BLUE, -1]], [1, 1], [[1.0, 0.0], [1.0, 0.0]], [True, True])
    engine.run(inputs={"activations": np.ones((2, 2), np.float32), **_selection(*sel)})
    assert engine.counters["adapter_cache"] == {"loads": 6, "hits": 3, "evictions": 4}


@pytest.mark.parametrize(
    "sel",
    [
        ([[BLUE, BLUE]], [2], [[1.0, 1.0]], [True]),  # the same adapter twice in a row
        ([[7, -1]], [1], [[1.0, 0.0]], [True]),  # an undeclared adapter index
        ([[BLUE, -1]], [1], [[17.0, 0.0]], [True]),  # a scale outside [-16, 16]
        ([[BLUE, -1]], [3], [[1.0, 0.0]], [True]),  # more adapters than segment slots
        ([[BLUE, RED], [GREEN, -1]], [2, 1], [[1.0, 1.0], [1.0, 0.0]], [True, True]),  # 3 > cache
    ],
    ids=["duplicate", "unknown", "scale", "count", "cache"],
)
def test_adapter_bad_selection_is_refused_before_running(upstream_dir, sel):
    engine = _engine(upstream_dir, "adapter")
    x = np.ones((len(sel[1]), 2), np.float32)
    with pytest.raises(RunError) as info:
        engine.run(inputs={"activations": x, **_selection(*sel)})
    assert info.value.code == "G87"
    counters = engine.counters
    assert counters["invocations"] == {} and counters["runs"] == 0
    assert counters["adapter_cache"] == {"loads": 0, "hits": 0, "evictions": 0}


# ================================================================== speculative
#
# proposer: proposes the carried tokens unchanged (`proposed = tokens_state`, 4 per row).
# verifier: target scores are one-hot of the proposal with column min(r + 1, 3) of row r
# replaced by token 31. speculative_acceptance: the accepted prefix is the matching prefix,
# then the target's correction at the first mismatch; `accepted_len = matched + 1` (or 4 when
# everything matched, which sets `done` and clears `continue`). grammar: lookahead consumes
# proposal tokens from the cloned state until a forbidden one; the committed length is
# min(accepted_len, lookahead); commit advances the grammar state over that many accepted
# tokens; a state with exactly one allowed token forces it. Emits: the committed accepted
# tokens, then the forced token (when one is forced).
#
# Grammar used: 2 states x 32 tokens. State 0 allows every token and stays in 0, except 31,
# which moves to state 1; state 1 allows only token 9 (so 9 is forced there).


def _grammar(forbid: tuple[int, ...] = ()) -> np.ndarray:
    """The grammar above; `forbid` lists tokens state 0 rejects."""
    table = np.zeros((2, 32), np.int64)
    table[0, 31] = 1
    table[1, :] = -1
    table[1, 9] = 0
    for token in forbid:
        table[0, token] = -1
    return table


@pytest.fixture(scope="module")
def speculative(upstream_dir):
    return _engine(upstream_dir, "speculative")


def _speculate(engine, prompt, table, states=None, **kw):
    rows = len(prompt)
    return engine.run(
        prompt=prompt,
        inputs={
            "grammar.initial_state": np.asarray(states or [0] * rows, np.int64),
            "grammar.transition_table": table,
            "telemetry.draft_ms": np.ones(rows, np.float32),
            "telemetry.target_ms": np.ones(rows, np.float32),
            "verifier.past_key_values.0.key": np.zeros((rows, 2, 0, 8), np.float32),
            "verifier.past_key_values.0.value": np.zeros((rows, 4, 0, 4), np.float32),
        },
        **kw,
    )


def test_speculative_acceptance_graph_premise(upstream_dir):
    """The first iteration of the single-row case below, on the policy graphs themselves."""
    root = upstream_dir / "speculative"
    proposal = np.array([[5, 6, 7, 8]])
    scores, _, _ = _call(
        root, "verifier/model.onnx.textproto", proposed_tokens=proposal,
        **{"past_key_values.0.key": np.zeros((1, 2, 0, 8), np.float32),
           "past_key_values.0.value": np.zeros((1, 4, 0, 4), np.float32)},
    )  # fmt: skip
    assert scores.argmax(-1).tolist() == [[5, 31, 7, 8]]
    tokens, length, done, next_offset, rollback, cont = _call(
        root, "policies/speculative_acceptance.onnx.textproto", target_scores=scores,
        proposed_tokens=proposal, seed=np.array([0]), offset=np.array([0]),
    )  # fmt: skip
    assert tokens.tolist() == [[5, 31, 0, 0]] and length.tolist() == [2]
    assert done.tolist() == [False] and cont.tolist() == [True] and rollback.tolist() == [1]
    assert next_offset.tolist() == [4]


def test_speculative_single_row(speculative):
    before = speculative.counters
    result = _speculate(speculative, [[5, 6, 7, 8]], _grammar(), max_new_tokens=5)
    after = speculative.counters
    # Iteration 0: target [5,31,7,8] -> accepted [5,31], length 2; lookahead (state 0) takes all
    # 4, so 2 are committed: 5 keeps state 0, 31 moves to state 1, which forces 9.
    # Iteration 1: the proposal [5,31,0,0] matches the target entirely (done); lookahead from
    # state 1 rejects 5, so nothing is committed; state 1 still forces 9.
    assert result.tokens == [[5, 31, 9, 9]]
    assert result.finish_reasons == ["stop"]  # done before max_iterations (5)
    assert after["loop_iterations"] - before["loop_iterations"] == 2
    delta = _delta(before, after)
    assert delta["verifier"] == delta["proposer"] == delta["grammar_commit"] == 2
    # The grammar components run on the adapter executor, not ONNX Runtime.
    assert set(after["invocations"]["grammar_commit"]) == {"adapter:onnx-genai.grammar-guidance@1"}


def test_speculative_max_iterations_bound(speculative):
    result = _speculate(speculative, [[5, 6, 7, 8]], _grammar(), max_new_tokens=1)
    # Only iteration 0 above: [5, 31] then the forced 9; the row was still active.
    assert result.tokens == [[5, 31, 9]]
    assert result.finish_reasons == ["length"]


def test_speculative_grammar_limits_the_commit(speculative):
    # State 0 forbids token 2. Iteration 0: proposal [1,2,3,4], target [1,31,3,4], accepted
    # [1,31] (length 2); lookahead stops at 2 after 1 token, so only [1] is committed (state
    # stays 0: more than one token allowed, nothing forced). Iteration 1: proposal [1,31,0,0]
    # is all accepted (done); lookahead takes 1 and 31 (-> state 1) and stops at 0: [1,31] is
    # committed and state 1 forces 9.
    result = _speculate(speculative, [[1, 2, 3, 4]], _grammar(forbid=(2,)), max_new_tokens=5)
    assert result.tokens == [[1, 1, 31, 9]]
    assert result.finish_reasons == ["stop"]


def test_speculative_grammar_rejects_everything(speculative):
    # State 0 forbids the first proposed token: nothing is ever committed or forced. The emits
    # carry no `when`, so the row still publishes, but only empty chunks (valid_length 0).
    result = _speculate(speculative, [[5, 6, 7, 8]], _grammar(forbid=(5,)), max_new_tokens=5)
    (row,) = result.outputs["tokens"]
    assert row.shape == (1, 0) and row.dtype == np.int64
    assert result.tokens == [[]]


def test_speculative_batch_finished_row_publishes_nothing_more(speculative):
    # Row 0 as in the single-row case (the verifier corrects column min(0 + 1, 3) = 1).
    # Row 1: the verifier writes 31 into column min(1 + 1, 3) = 2, which the proposal already
    # holds, so everything is accepted at iteration 0 (done); lookahead from state 0 takes 1, 2,
    # 31 (-> state 1) and stops at 4: [1, 2, 31] committed, then the forced 9. Row 1 is inactive
    # in iteration 1 and publishes nothing more.
    result = _speculate(speculative, [[5, 6, 7, 8], [1, 2, 31, 4]], _grammar(), max_new_tokens=5)
    assert result.tokens == [[5, 31, 9, 9], [1, 2, 31, 9]]
    assert result.finish_reasons == ["stop", "stop"]
    alone = _speculate(speculative, [[5, 6, 7, 8]], _grammar(), max_new_tokens=5)
    assert alone.tokens == [result.tokens[0]]


# ================================================================== speech_wav
#
# vocoder: m = 0.001 * mean(prompt_tokens of the row); for i in 0..63, ramp = i / 64;
# channel 0 = 0.5 sin(2 pi (ramp + m)); channel 1 = 0.4 sin(2 pi (ramp + m + 0.5)).


def test_speech_wav_vocoder_values(upstream_dir):
    engine = _engine(upstream_dir, "speech_wav")
    prompt = np.array([[2, 10, 20, 3], [5, 5, 5, 5]])
    result = engine.run(prompt=prompt)
    m = 0.001 * prompt.mean(axis=1)[:, None]
    ramp = np.arange(64)[None, :] / 64
    expected = np.stack(
        [0.5 * np.sin(2 * np.pi * (ramp + m)), 0.4 * np.sin(2 * np.pi * (ramp + m + 0.5))],
        axis=1,
    )
    audio = result.outputs["audio"]
    assert audio.dtype == np.float32 and audio.shape == (2, 2, 64)
    np.testing.assert_allclose(audio, expected, atol=2e-6)
    # The text-assembly adapter belongs to the API boundary: loaded, never invoked.
    counters = engine.counters
    assert counters["invocations"] == {"vocoder": {"ort": 1}}
    assert counters["sessions_created"] == {"ort": 1}
