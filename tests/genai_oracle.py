"""Greedy tokens of decoder folders in onnxruntime-genai's layout (``genai_config.json`` beside
the model), from onnxruntime-genai itself and from independent re-implementations.

Every function returns, per prompt row, only the NEW tokens: never the prompt or any padding.
A row stops at its first end token (``model.eos_token_id``, an int or a list) and that token
IS the last token of the row, as in the token streams the reference runtime publishes
(``fixtures/generators/arithmetic.py``: the end token is published, then the row stops).
Otherwise a row has exactly ``max_new_tokens`` tokens.

How onnxruntime-genai 0.18 takes batches (found by running it):

- ``og.Generator``: ``append_tokens`` takes a 2-D ``[batch, length]`` int32 array, and every
  entry is a real token: there is no padding (``pad_token_id`` is not looked at, the
  ``attention_mask`` it feeds is all ones and ``position_ids`` are ``0 .. length - 1``). A batch
  is therefore rows of one prompt length; :func:`genai_greedy` runs one generator per length.
  ``get_sequence`` leaves the end token out; ``get_next_tokens`` after ``generate_next_token``
  reports it, so that is what is read here.
- ``og.Engine`` (requests of any lengths, scheduled together): the prompts are right-padded in
  one batch; ``attention_mask`` is each row's ones then zeros (compact: the row's cache holds its
  tokens in the first slots), padded positions get ``position_ids`` 0, and during decoding the
  mask marks ``row length + 1`` ones while the cache keeps growing by one slot. The model must
  write each new key/value right after the row's valid slots (as ``GroupQueryAttention`` does),
  not at the end. Its events carry no token when a turn ends on an end token, and in 0.18 a
  batch whose rows end at different steps fails (``FAILED`` events: a pre-allocated output of
  the previous shape) for models without a shared past/present buffer.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def load_config(folder) -> dict:
    return json.loads((Path(folder) / "genai_config.json").read_text())


def end_ids(config: dict) -> set[int]:
    eos = config["model"]["eos_token_id"]
    return {int(t) for t in (eos if isinstance(eos, list) else [eos])}


def _check(prompts, max_new_tokens: int) -> list[list[int]]:
    rows = [[int(t) for t in row] for row in prompts]
    if not rows or any(not row for row in rows):
        raise ValueError("every prompt needs at least one token")
    if max_new_tokens < 1:
        raise ValueError("max_new_tokens must be positive")
    return rows


# ------------------------------------------------------------------ onnxruntime-genai


def genai_greedy(folder, prompts, max_new_tokens: int, *, engine: bool = False) -> list[list[int]]:
    """Greedy new tokens per row from onnxruntime-genai (see the module docstring).

    ``engine=False``: ``og.Model`` / ``og.GeneratorParams`` (``do_sample=False``, ``max_length``
    = prompt length + ``max_new_tokens``) / ``og.Generator``; rows of one prompt length share a
    generator (one ``append_tokens`` of the 2-D batch), then ``generate_next_token`` until every
    row is done. ``engine=True``: every row is a request of one ``og.Engine`` (a ragged batch);
    raises if the engine reports a failure, or if a row ends on an end token while the config
    names several (the engine does not say which one).
    """
    import onnxruntime_genai as og

    rows = _check(prompts, max_new_tokens)
    stops = end_ids(load_config(folder))
    model = og.Model(str(folder))
    if engine:
        return _engine_greedy(og, model, rows, max_new_tokens, stops)
    out: list[list[int] | None] = [None] * len(rows)
    by_length: dict[int, list[int]] = {}
    for i, row in enumerate(rows):
        by_length.setdefault(len(row), []).append(i)
    for length, members in sorted(by_length.items()):
        params = og.GeneratorParams(model)
        params.set_search_options(
            do_sample=False, max_length=length + max_new_tokens, batch_size=len(members)
        )
        generator = og.Generator(model, params)
        generator.append_tokens(np.array([rows[i] for i in members], dtype=np.int32))
        new: list[list[int]] = [[] for _ in members]
        ended = [False] * len(members)
        while not generator.is_done() and not all(ended):
            generator.generate_next_token()
            for j, token in enumerate(generator.get_next_tokens().tolist()):
                if ended[j]:
                    continue
                new[j].append(int(token))
                ended[j] = token in stops or len(new[j]) >= max_new_tokens
        for j, i in enumerate(members):
            out[i] = new[j]
    return out  # type: ignore[return-value]


def _engine_greedy(og, model, rows, max_new_tokens, stops) -> list[list[int]]:
    engine = og.Engine(model)
    events = engine.create_event_buffer(max(64, 4 * len(rows)))
    requests = []
    for row in rows:
        request = engine.create_request()
        turn = og.TurnOptions(request)
        turn.set_do_sample(False)
        turn.set_max_generated_tokens(max_new_tokens)
        request.begin_turn(np.array(row, dtype=np.int32), turn)
        requests.append(request)
    out: list[list[int]] = [[] for _ in rows]
    while engine.has_pending_requests():
        for event in engine.run(events):
            i = next(k for k, r in enumerate(requests) if r is event.request)
            if event.error_code != og.EngineErrorCode.NONE:
                raise RuntimeError(f"onnxruntime-genai engine: row {i} failed ({event.error_code})")
            if event.token is not None:
                out[i].append(int(event.token))
            if event.finish_reason == og.FinishReason.EOS and event.token is None:
                if len(stops) != 1:
                    raise RuntimeError(
                        f"row {i} ended on one of the end tokens {sorted(stops)}; the engine "
                        "does not say which"
                    )
                out[i].append(next(iter(stops)))
    for request in requests:
        request.close()
    return out


# ------------------------------------------------------------------ independent references


class _Session:
    """The decoder as an ``onnxruntime.InferenceSession`` plus what its config says."""

    def __init__(self, folder):
        import onnxruntime as ort

        self.config = load_config(folder)
        decoder = self.config["model"]["decoder"]
        self.stops = end_ids(self.config)
        self.session = ort.InferenceSession(
            str(Path(folder) / decoder["filename"]), providers=["CPUExecutionProvider"]
        )
        self.inputs = decoder["inputs"]
        self.outputs = decoder["outputs"]
        self.layers = int(decoder["num_hidden_layers"])
        self.kv_shape = (int(decoder["num_key_value_heads"]), int(decoder["head_size"]))

    def empty_cache(self, batch: int) -> list[np.ndarray]:
        kv, head = self.kv_shape
        return [np.zeros((batch, kv, 0, head), np.float32) for _ in range(2 * self.layers)]

    def run(self, ids, mask, positions, cache):
        feed = {
            self.inputs["input_ids"]: np.asarray(ids, np.int64),
            self.inputs["attention_mask"]: np.asarray(mask, np.int64),
            self.inputs["position_ids"]: np.asarray(positions, np.int64),
        }
        names = []
        for layer in range(self.layers):
            feed[self.inputs["past_key_names"] % layer] = cache[2 * layer]
            feed[self.inputs["past_value_names"] % layer] = cache[2 * layer + 1]
            names += [
                self.outputs["present_key_names"] % layer,
                self.outputs["present_value_names"] % layer,
            ]
        logits, *present = self.session.run([self.outputs["logits"], *names], feed)
        return logits, present


def numpy_greedy(folder, prompts, max_new_tokens: int) -> list[list[int]]:
    """Greedy new tokens per row from ``onnxruntime.InferenceSession`` alone, one row at a time
    with no padding and no cache: every step recomputes the whole sequence (an empty past,
    ``attention_mask`` all ones, ``position_ids`` ``0 .. n - 1``) and takes the argmax of the
    last position's logits (first maximum on ties, as ``np.argmax``)."""
    rows = _check(prompts, max_new_tokens)
    model = _Session(folder)
    out = []
    for row in rows:
        sequence, new = list(row), []
        while len(new) < max_new_tokens:
            n = len(sequence)
            logits, _ = model.run(
                [sequence], np.ones((1, n)), np.arange(n)[None], model.empty_cache(1)
            )
            token = int(np.argmax(logits[0, -1]))
            new.append(token)
            sequence.append(token)
            if token in model.stops:
                break
        out.append(new)
    return out


def session_greedy_batch(folder, prompts, max_new_tokens: int, padding: str) -> list[list[int]]:
    """Greedy new tokens of a ragged batch in one ``InferenceSession`` loop with a KV cache.

    ``padding="left"``: prompts are left-padded with ``pad_token_id``; ``attention_mask`` is 0
    at pads; ``position_ids`` count each row's real tokens (``cumsum(mask) - 1``, 0 at pads);
    the cache grows by one slot per step and the mask by a 1 per step.
    ``padding="right"``: onnxruntime-genai's engine layout: right pads, mask of each row's
    length in ones then zeros, pad positions 0; each step the cache grows by one slot while the
    mask marks ``length + 1`` ones (new entries go right after the row's valid slots).
    Finished rows keep running (rows are independent); their extra tokens are dropped.
    """
    if padding not in ("left", "right"):
        raise ValueError(f"padding must be 'left' or 'right', not {padding!r}")
    rows = _check(prompts, max_new_tokens)
    model = _Session(folder)
    pad = int(model.config["model"].get("pad_token_id", 0))
    batch, width = len(rows), max(len(r) for r in rows)
    lengths = np.array([len(r) for r in rows])
    ids = np.full((batch, width), pad, np.int64)
    mask = np.zeros((batch, width), np.int64)
    for b, row in enumerate(rows):
        if padding == "left":
            ids[b, width - len(row) :] = row
            mask[b, width - len(row) :] = 1
        else:
            ids[b, : len(row)] = row
            mask[b, : len(row)] = 1
    positions = np.where(mask == 1, np.cumsum(mask, axis=1) - 1, 0)
    logits, cache = model.run(ids, mask, positions, model.empty_cache(batch))
    last = np.full(batch, width - 1) if padding == "left" else lengths - 1
    step_logits = logits[np.arange(batch), last]
    out: list[list[int]] = [[] for _ in rows]
    done = [False] * batch
    for step in range(max_new_tokens):
        tokens = step_logits.argmax(axis=-1)
        for b, token in enumerate(tokens.tolist()):
            if not done[b]:
                out[b].append(int(token))
                done[b] = token in model.stops or len(out[b]) >= max_new_tokens
        if all(done):
            break
        total = width + step + 1
        if padding == "left":
            mask = np.concatenate([mask, np.ones((batch, 1), np.int64)], axis=1)
        else:
            mask = (np.arange(total)[None] < (lengths + step + 1)[:, None]).astype(np.int64)
        positions = (lengths + step)[:, None]
        logits, cache = model.run(tokens[:, None], mask, positions, cache)
        step_logits = logits[:, -1]
    return out
