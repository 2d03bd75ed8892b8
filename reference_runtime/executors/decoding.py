"""Runtime executors for the decoding contracts a lowered bare decoder uses.

``onnx-genai.autoregressive-decode@1`` runs one forward pass of a decoder graph. Its ports:

- ``tokens`` int64 ``[batch, step]``: the new tokens of each row, left-aligned (a row's valid
  tokens come first);
- ``lengths`` int64 ``[batch]``: how many of them are valid per row (``-1``: all; ``0``: the row
  sits this step out, and its new position is masked);
- ``attention_mask`` int64 ``[batch, past]`` (optional: absent at prefill): 1 where the past KV
  holds a real token;
- ``max_new_tokens`` int64 ``[1]`` (optional): the request's token bound, read only to report
  ``capacity``;
- every other input port is a past-KV input of the graph under the same name (optional: absent
  at prefill, where it starts empty); the KV input ports pair up, in declaration order, with
  the output ports that are not the contract's own (the graph's present-KV outputs).

It lays the tokens out as the graph expects (``padding: left`` or ``right``, filled with
``pad_token_id``), derives the attention mask and the position ids (the count of real tokens
before each position), runs the graph beneath it through the ordinary component seam (ONNX
Runtime or the native executor: whichever the engine was built with), and returns ``logits`` at
each row's last valid position ``[batch, vocab]``, the extended ``attention_mask``,
``sequence_lengths`` (real tokens per row), ``capacity`` int64 ``[1]`` (the cache extent this
request can reach: the mask's width plus ``max_new_tokens``) and the graph's present-KV outputs.
Its parameters are scalars: the graph (``artifact``), the graph's token, logits, mask and
position names, ``padding`` and ``pad_token_id``.

``onnx-genai.token-policy@1`` selects the next token per row and decides whether the row stops:
greedy (``temperature`` 0 or ``top_k`` 1; ties go to the lowest id) or seeded sampling
(temperature, then top-k, top-p and min-p filters; the random draw of row ``r`` at generated
position ``n`` depends only on ``(seed[r], n)``, so it is reproducible and independent of the
batch). A row stops with ``stop`` on an end id (when the request stops on end ids),
``length`` at ``max_new_tokens`` (int64 ``[1]`` for every row, or ``[batch]``, one per row;
or the search ``max_length`` bound on prompt plus generated tokens) and ``context_length`` when the model's context is full. The end ids are the optional
input port ``eos_token_ids`` (int64 ``[n]``); without it no token ends a row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..arrays import numpy_dtype, to_host
from ..errors import RunError
from ..package.artifacts import load_model, signature
from ..package.runtime_contracts import (
    DECODE_CONTRACT,
    POLICY_CONTRACT,
    SPECULATIVE_CONTRACT,
    kv_ports,
)
from .base import Session, current_run

FINISH_STOP, FINISH_LENGTH, FINISH_CONTEXT = 1, 2, 3  # the codes of results.FINISH_CODES
SAMPLING = ("temperature", "top_k", "top_p", "min_p", "seed")  # the policy's sampling ports


class AutoregressiveDecode(Session):
    """One decoder forward pass; the graph runs in ``graph`` (an executor's session)."""

    contract = DECODE_CONTRACT

    def __init__(
        self, component: str, parameters: dict, kv: tuple, graph, templates: dict, counters
    ):
        self.component = component
        self.counters = counters
        # Per conversation session: the tokens its KV holds, that KV and its mask (the last
        # state in which every fed token was real), reused by the next turn's prefill. The
        # engine runs one turn of a session at a time; what a run has fed so far is kept in
        # its own context (``current_run().state``), never here.
        self.prefixes: dict[str, _Prefix] = {}
        self.graph = graph
        self.executor = graph.executor  # invocations are counted under the graph's executor
        self.templates = templates  # past-KV input -> (dims with None for symbolic, dtype)
        p = dict(parameters)
        self.token_input = p["token_input"]
        self.logits_output = p["logits_output"]
        self.mask_input = p["attention_mask_input"] or None
        self.position_input = p["position_ids_input"] or None
        self.kv_inputs, self.kv_outputs = (list(names) for names in kv)
        self.padding = p["padding"]
        self.pad = int(p["pad_token_id"])

    def run(self, inputs, outputs):
        # Token ids, lengths and the mask are host values; the KV stays where the graph put it.
        counters = self.counters
        tokens = np.asarray(to_host(inputs["tokens"], counters), dtype=np.int64)
        batch, step = tokens.shape
        given = np.asarray(to_host(inputs["lengths"], counters), dtype=np.int64).reshape(-1)
        counts = [step if n < 0 else n for n in given.tolist()]  # -1: every column is real
        if len(counts) != batch or max(counts, default=0) > step:
            raise RunError(
                "H75",
                f"component {self.component!r}: lengths {counts} do not fit "
                f"{step} token column(s) per row",
                hint="Pass each row's true prompt length (at most the padded width).",
            )
        lengths = np.asarray(counts, dtype=np.int64)
        past = {name: inputs.get(name) for name in self.kv_inputs}
        past_mask = inputs.get("attention_mask")
        prefill = past_mask is None
        if not prefill:
            past_mask = to_host(past_mask, counters)
        context = current_run()
        run_state = context.state.get(id(self))
        if run_state is None:
            run_state = context.state[id(self)] = {"fed": None}
        fed = () if prefill else run_state["fed"]
        if prefill:
            past_mask = np.zeros((batch, 0), dtype=np.int64)
            reused = self._reusable_prefix(context.session_id, tokens, lengths)
            if reused is not None:
                n = len(reused.tokens)
                tokens, lengths, step = (
                    tokens[:, n : int(lengths[0])],
                    lengths - n,
                    int(lengths[0]) - n,
                )
                counts = lengths.tolist()
                past_mask, past, fed = reused.mask, dict(reused.kv), reused.tokens
                self.counters.add("prefix_reuse", "hits")
                self.counters.add("prefix_reuse", "tokens", n)
        past_mask = np.asarray(past_mask, dtype=np.int64)
        # a position counts the real tokens before it (a padded slot takes position 0)
        before = np.add.reduce(past_mask, axis=1, keepdims=True)
        if min(counts, default=step) == step:  # every token is real: laid out as given
            new_mask = np.ones((batch, step), dtype=np.int64)
            laid = tokens
            positions = before + np.arange(step)
            real = step
        else:
            columns = np.arange(step)[None, :]
            if self.padding == "left":
                new_mask = (columns >= (step - lengths)[:, None]).astype(np.int64)
                source = columns - (step - lengths)[:, None]
            else:
                new_mask = (columns < lengths[:, None]).astype(np.int64)
                source = columns
            picked = np.take_along_axis(tokens, np.clip(source, 0, step - 1), 1)
            laid = np.where(new_mask == 1, picked, self.pad).astype(np.int64)
            if self.mask_input is None:
                raise RunError(
                    "H75",
                    f"component {self.component!r}: rows of different lengths need an "
                    "attention mask, and this decoder graph takes none",
                    hint="Run the rows one at a time, or all with the same length.",
                )
            positions = np.maximum(before + np.cumsum(new_mask, axis=1) - 1, 0)
            real = new_mask.sum(axis=1)
        mask = np.concatenate([past_mask, new_mask], axis=1)
        feed = {self.token_input: laid}
        if self.mask_input is not None:
            feed[self.mask_input] = mask
        if self.position_input is not None:
            feed[self.position_input] = positions
        for name in self.kv_inputs:
            value = past[name]
            if value is None:
                dims, dtype = self.templates[name]
                shape = [batch if i == 0 else 0 if d is None else d for i, d in enumerate(dims)]
                value = np.zeros(shape, dtype=dtype)
            feed[name] = value
        results = self.graph.run(feed, [self.logits_output, *self.kv_outputs])
        logits = results[self.logits_output]  # stays on the device under CUDA
        if logits.ndim == 3:  # the logits of each row's last valid position
            if step == 1:
                logits = logits[:, 0]
            elif self.padding == "left":
                logits = logits[:, step - 1]
            else:
                logits = logits[list(range(batch)), np.maximum(lengths - 1, 0).tolist()]
        out = {
            "logits": logits,
            "attention_mask": mask,
            "sequence_lengths": before[:, 0] + real,
        }
        if "capacity" in outputs:
            limit = inputs.get("max_new_tokens")
            if limit is None:
                raise RunError(
                    "H75",
                    f"component {self.component!r}: 'capacity' needs the input 'max_new_tokens'",
                    hint="Bind max_new_tokens wherever capacity is read.",
                )
            limit = int(np.asarray(to_host(limit, self.counters)).reshape(-1)[0])
            out["capacity"] = np.asarray([mask.shape[1] + max(limit, 0)], dtype=np.int64)
        for name in self.kv_outputs:
            out[name] = results[name]
        run_state["fed"] = self._remember(context.session_id, fed, tokens, lengths, out)
        return {port: out[port] for port in outputs}

    # ------------------------------------------------------------------ kept KV

    def forget(self, session_id: str) -> None:
        self.prefixes.pop(session_id, None)

    def _reusable_prefix(self, session, tokens, lengths):
        """The session's kept KV, when it holds a strict prefix of this one-row prompt."""
        record = self.prefixes.get(session) if session is not None else None
        if record is None or tokens.shape[0] != 1:
            return None
        row = tokens[0, : int(lengths[0])].tolist()
        n = len(record.tokens)
        return record if n < len(row) and tuple(row[:n]) == record.tokens else None

    def _remember(self, session, fed, tokens, lengths, out) -> tuple[int, ...] | None:
        """Keep this state for the session's next turn; the tokens the KV now holds (None when
        nothing is kept)."""
        if session is None or tokens.shape[0] != 1 or fed is None:
            return None
        valid = int(lengths[0])
        if valid == 0:  # the row sat this step out: keep the last state of real tokens only
            return None
        start = tokens.shape[1] - valid if self.padding == "left" else 0
        fed = (*fed, *(int(t) for t in tokens[0, start : start + valid]))
        kv = {inp: out[o] for inp, o in zip(self.kv_inputs, self.kv_outputs, strict=True)}
        self.prefixes[session] = _Prefix(fed, kv, out["attention_mask"])
        return fed


@dataclass(frozen=True)
class _Prefix:
    tokens: tuple[int, ...]
    kv: dict  # past-KV input name -> the present value that continues it
    mask: np.ndarray


class TokenPolicy(Session):
    """Next-token selection and stop detection, per row."""

    executor = "contract"  # runs in this runtime, not in a graph executor
    contract = POLICY_CONTRACT
    host_only = True  # selection runs on the host: device logits are copied back (counted)

    def __init__(self, component: str, parameters: dict):
        p = dict(parameters)
        self.component = component
        self.context_length = int(p["context_length"])
        self.max_length = int(p["max_length"])
        self.pad = int(p["pad_token_id"])

    def run(self, inputs, outputs):
        logits = np.asarray(inputs["logits"])
        batch = logits.shape[0]
        active = np.asarray(inputs["active"], dtype=bool).reshape(-1)
        generated = np.asarray(inputs["generated"], dtype=np.int64).reshape(-1)
        lengths = np.asarray(inputs["sequence_lengths"], dtype=np.int64).reshape(-1).tolist()
        limits = self._per_row(inputs, "max_new_tokens", batch)
        ends = inputs.get("eos_token_ids")
        eos = set(np.asarray(ends if ends is not None else (), dtype=np.int64).ravel().tolist())
        temperature = self._per_row(inputs, "temperature", batch)
        top_k = self._per_row(inputs, "top_k", batch)
        greedy = [t <= 0.0 or k == 1 for t, k in zip(temperature, top_k, strict=True)]
        # a greedy row takes its first highest logit
        best = np.argmax(logits.reshape(batch, -1), axis=-1).tolist() if any(greedy) else None
        params = None
        token, finish = [self.pad] * batch, [0] * batch
        emitted = active.copy()
        stop_on_eos = current_run().stop_on_eos
        counts = generated.tolist()
        for r, running in enumerate(active.tolist()):
            if not running:
                continue
            if self.context_length and lengths[r] >= self.context_length:
                # a prompt (with a session's conversation) that fills the context: no token
                finish[r], emitted[r] = FINISH_CONTEXT, False
                continue
            if greedy[r]:
                chosen = token[r] = best[r]
            else:
                if params is None:
                    params = {key: self._per_row(inputs, key, batch) for key in SAMPLING}
                chosen = token[r] = self._sample(logits[r], r, counts[r], params)
            count, total = counts[r] + 1, lengths[r] + 1
            if stop_on_eos and chosen in eos:
                finish[r] = FINISH_STOP
            elif count >= limits[r]:
                finish[r] = FINISH_LENGTH
            elif self.context_length and total >= self.context_length:
                finish[r] = FINISH_CONTEXT
            elif self.max_length and total >= self.max_length:
                finish[r] = FINISH_LENGTH
        finish = np.array(finish, dtype=np.int64)
        next_active = active & (finish == 0)
        out = {
            "token": np.array(token, dtype=np.int64).reshape(batch, 1),
            "next_active": next_active,
            "done": ~next_active,
            "generated": generated + emitted,
            "finish_reason": finish,
            "step_lengths": next_active.astype(np.int64),
            "emitted": emitted,
        }
        return {port: out[port] for port in outputs}

    def _per_row(self, inputs, port: str, batch: int) -> list:
        """Port ``port``'s values, one per row: it holds one for every row, or one per row."""
        values = np.asarray(inputs[port]).ravel().tolist()
        if len(values) == batch:
            return values
        if len(values) != 1:
            raise RunError(
                "H84",
                f"component {self.component!r}: {port} holds {len(values)} values for "
                f"{batch} rows (give one, or one per row)",
            )
        return values * batch

    @staticmethod
    def _sample(row: np.ndarray, r: int, position: int, params: dict) -> int:
        """Row ``r``'s seeded draw at generated position ``position`` (a sampling row: its
        temperature is above 0 and its top_k is not 1)."""
        temperature = float(params["temperature"][r])
        top_k = int(params["top_k"][r])
        scores = np.asarray(row, dtype=np.float64) / temperature
        order = np.argsort(-scores, kind="stable")
        keep = np.ones(scores.size, dtype=bool)
        if 0 < top_k < scores.size:
            keep[order[top_k:]] = False
        probs = np.exp(scores - scores.max()) * keep
        probs /= probs.sum()
        top_p = float(params["top_p"][r])
        if top_p < 1.0:
            sorted_probs = probs[order]
            cumulative = np.cumsum(sorted_probs)
            cut = int(np.searchsorted(cumulative, top_p)) + 1
            keep[order[cut:]] = False
        min_p = float(params["min_p"][r])
        if min_p > 0.0:
            keep &= probs >= min_p * probs.max()
        probs = probs * keep
        probs /= probs.sum()
        seed = int(params["seed"][r]) % (1 << 63)
        rng = np.random.default_rng([seed, position])
        return int(rng.choice(scores.size, p=probs))


# ------------------------------------------------------------------ construction


def build_contract_session(package, name: str, comp, onnx_executor, sessions):
    """The session of a ``binding`` component keyed to a runtime contract (its parameters and
    ports were checked at load, rule C92). ``sessions`` are the engine's (component -> session,
    still being filled): a contract that runs other components finds theirs there."""

    contract = comp.contract
    parameters = dict(contract.parameters)
    if contract.id == TokenPolicy.contract:
        return TokenPolicy(name, parameters)
    if contract.id == SPECULATIVE_CONTRACT:
        from .speculative import build_speculative_session

        return build_speculative_session(package, name, sessions, onnx_executor.counters)
    path = package.root / str(parameters["artifact"])
    sig = signature(load_model(path), path)
    kv = kv_ports(comp.ports)
    templates = {}
    for port in kv[0]:
        value = sig.inputs[port]
        dims = tuple(d if isinstance(d, int) else None for d in value.dims or ())
        templates[port] = (dims, numpy_dtype(value.dtype))
    graph = onnx_executor.load(name, path)
    return AutoregressiveDecode(name, parameters, kv, graph, templates, onnx_executor.counters)
