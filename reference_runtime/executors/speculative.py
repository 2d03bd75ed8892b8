"""The executor of ``onnx-genai.speculative-block@1``: one speculative decoding step per call.

The package's ``speculative`` section names the proposer and the target (two ONNX components);
the contract's component carries every cell they read through service groups (its read-write
aliases), and the plan of ``package/speculative_block.py`` says which port is which. Both graphs
run beneath it through the ordinary component seam (ONNX Runtime or the native executor,
whichever the engine was built with); each run is counted under its own component.

**Prefill** (the call that receives ``tokens``): the target reads each prompt (rows left-padded
and masked, as ``onnx-genai.autoregressive-decode`` lays them out) and its greedy choice at the
last position is the first committed token. A chained proposal's recurrent cells are then
caught up on the prompt, one proposer call per position.

**A step** (every other call), for the active rows, with width ``K`` (the ``proposal_width``
input, 1 <= K <= ``max_proposal_width``):

1. propose ``K`` tokens: a ``block`` proposer is called once on the committed tokens it has not
   read (``pending``) and returns the block (the first ``K`` of its ``proposal_output``); a
   ``chained`` proposer is called ``K`` times, each call fed the embedding of the previous token
   (``token_embedding``, gathered from the target's table), followed by the folded carry when
   there is one (the target's ``folded_carry_seed`` output on the first call, the proposer's
   ``folded_carry_output`` after), and its ``recurrent`` cells threaded from call to call; a
   ``chained`` proposer that reads token ids (no ``token_embedding``, an integer
   ``token_embedding_input``: a draft decoder) is called ``K`` times through its own cache, like
   the target: first on ``pending``, then on each proposal;
2. verify: the target reads the last committed token and the ``K`` proposals in one call;
3. accept the longest prefix of proposals that equal the target's greedy choices, plus the
   target's choice after it (the correction); a chained proposal accepts at most ``K - 1``
   (its state has read only ``K - 1`` proposals), so its correction may equal the last proposal
   (a proposer that reads token ids accepts up to ``K``: it is rolled back instead);
4. commit those tokens, up to the stop conditions of ``onnx-genai.token-policy`` (an end id,
   ``max_new_tokens``, ``context_length``, ``max_length``), checked token by token;
5. roll back: every cell of the target's cache is truncated along its group's
   ``sequence_axis`` to what the committed tokens need (a row that committed fewer tokens than
   another has the slots between masked out), recurrent cells are restored to the state after
   the last accepted token, and the folded carry is recomputed from the target's output there;
   a proposer that reads token ids has its cache truncated likewise, to the committed tokens it
   has read.

Greedy decoding through this executor commits exactly the tokens the target alone would choose.
``engine.counters["speculative"]`` counts ``steps``, ``proposer_calls``, ``proposed`` and
``accepted`` tokens, ``rollbacks`` (rows whose target cache lost rejected positions) and
``committed`` tokens.
"""

from __future__ import annotations

import numpy as np

from ..arrays import numpy_dtype, to_host
from ..errors import RunError
from ..package.artifacts import load_model, signature
from ..package.runtime_contracts import SPECULATIVE_CONTRACT
from ..package.speculative_block import resolve
from .base import Session, current_run
from .decoding import FINISH_CONTEXT, FINISH_LENGTH, FINISH_STOP


class SpeculativeBlock(Session):
    """Propose, verify, accept, correct, commit and roll back; the proposer and target run in
    the sessions of their own components (``sessions``, the engine's)."""

    executor = "contract"
    contract = SPECULATIVE_CONTRACT
    host_only = True  # token ids, masks and choices are host values (device copies counted)

    def __init__(self, plan, sessions, counters, templates: dict, table, carry_width: int):
        self.component = plan.component
        self.plan = plan
        self.sessions = sessions  # component -> session; filled by the engine's loader
        self.counters = counters
        self.templates = templates  # cell -> (dims with None for symbolic, dtype)
        self.table = table  # the chained proposal's embedding table [vocab, width], or None
        self.carry_width = carry_width
        p = plan.parameters
        self.pad = int(p["pad_token_id"])
        self.context_length = int(p["context_length"])
        self.max_length = int(p.get("max_length", 0))
        self.names = {"target": plan.names("target")}
        # a proposer with its own cache, mask and chunks: a block one, or a decoder-shaped one
        self.cached_proposer = plan.chained is None or plan.decoder_shaped
        if self.cached_proposer:
            self.names["proposer"] = plan.names("proposer")

    # ------------------------------------------------------------------ the models

    def _cells(self, role: str):
        return [c for c in self.plan.cells if c.model == role]

    def _session(self, role: str):
        name = self.plan.target if role == "target" else self.plan.proposer
        return name, self.sessions[name]

    def _forward(self, role, chunks, past_mask, state, outputs):
        """Run the target (or a cached proposer) on each row's new tokens ``chunks`` (left-padded
        and masked), after its cache ``state`` (cell -> value) whose real slots ``past_mask``
        marks. Returns the graph's ``outputs`` and present values (by cell) and the new mask;
        nothing runs (and nothing changes) when no row has a token."""
        batch = len(chunks)
        width = max((len(c) for c in chunks), default=0)
        if width == 0:
            return None, dict(state), past_mask
        tokens = np.full((batch, width), self.pad, dtype=np.int64)
        new_mask = np.zeros((batch, width), dtype=np.int64)
        for r, chunk in enumerate(chunks):
            if chunk:
                tokens[r, width - len(chunk) :] = chunk
                new_mask[r, width - len(chunk) :] = 1
        mask = np.concatenate([past_mask, new_mask], axis=1)
        names = self.names[role]
        feed = {names["tokens_input"]: tokens, names["mask_input"]: mask}
        if names["positions_input"]:
            positions = np.clip(np.cumsum(mask, axis=1) - 1, 0, None)[:, -width:]
            feed[names["positions_input"]] = positions.astype(np.int64)
        cells = self._cells(role)
        for c in cells:
            feed[c.model_input] = state[c.cell]
        name, session = self._session(role)
        results = session.run(feed, [*outputs, *(c.model_output for c in cells)])
        self.counters.invoked(name, session.executor)
        present = {c.cell: results[c.model_output] for c in cells}
        return results, present, mask

    def _shaped(self, value, leading: tuple, role: str, port: str) -> np.ndarray:
        """A model output read on the host, checked to lead with ``leading`` (rank 3)."""
        value = np.asarray(to_host(value, self.counters))
        if value.ndim != 3 or value.shape[:2] != tuple(leading):
            name = self.plan.target if role == "target" else self.plan.proposer
            raise RunError(
                "C86",
                f"component {self.component!r}: {name!r} returned {port!r} of shape "
                f"{list(value.shape)}, not [{leading[0]}, {leading[1]}, ...] (one entry per row "
                "and position it read)",
                hint="The target returns its outputs at every position of its input.",
            )
        return value

    def _empty(self, cell: str, batch: int):
        dims, dtype = self.templates[cell]
        shape = [batch if i == 0 else 0 if d is None else d for i, d in enumerate(dims)]
        return np.zeros(shape, dtype=dtype)

    def _embed(self, tokens, carry):
        if (tokens < 0).any() or (tokens >= self.table.shape[0]).any():
            raise RunError(
                "C86",
                f"component {self.component!r}: token {int(tokens.max())} is outside the "
                f"{self.table.shape[0]} rows of the token_embedding table",
                hint="The proposer's vocabulary must fit the target's embedding table.",
            )
        embedded = self.table[tokens]  # [batch, width]
        if carry is None:
            return embedded.astype(self.table.dtype)
        carry = np.asarray(to_host(carry, self.counters))
        if carry.shape != (len(tokens), self.carry_width):
            raise RunError(
                "C86",
                f"component {self.component!r}: the folded carry has shape {list(carry.shape)}, "
                f"not [{len(tokens)}, {self.carry_width}] (the proposer's "
                f"{self.plan.chained.token_embedding_input!r} width less the embedding's)",
                hint="The seed, the carry output and the fused input must agree in width.",
            )
        return np.concatenate([embedded, np.asarray(carry, dtype=self.table.dtype)], axis=1)

    def _chained_call(self, tokens, carry, recurrent: dict):
        """One chained proposer call: ``(logits [batch, vocab], next recurrent values, next
        carry)``."""
        chained = self.plan.chained
        feed = {chained.token_embedding_input: self._embed(tokens, carry)}
        cells = self._cells("proposer")
        for c in cells:
            feed[c.model_input] = recurrent[c.cell]
        outputs = [chained.logits_output, *(c.model_output for c in cells)]
        if chained.folded_carry_output is not None:
            outputs.append(chained.folded_carry_output)
        name, session = self._session("proposer")
        results = session.run(feed, outputs)
        self.counters.invoked(name, session.executor)
        self.counters.add("speculative", "proposer_calls")
        logits = np.asarray(to_host(results[chained.logits_output], self.counters))
        if logits.ndim != 2 or logits.shape[0] != len(tokens):
            raise RunError(
                "C86",
                f"component {self.component!r}: the proposer's {chained.logits_output!r} has "
                f"shape {list(logits.shape)}, not [batch {len(tokens)}, vocab]",
                hint="A chained proposer returns one distribution per call.",
            )
        following = {c.cell: results[c.model_output] for c in cells}
        carry_out = results.get(chained.folded_carry_output) if carry is not None else None
        return logits, following, carry_out

    # ------------------------------------------------------------------ one call

    def run(self, inputs, outputs):
        limit = int(np.asarray(inputs["max_new_tokens"]).reshape(-1)[0])
        ends = inputs.get("eos_token_ids")
        eos = {int(t) for t in np.asarray(ends if ends is not None else ()).reshape(-1)}
        eos = eos if current_run().stop_on_eos else set()
        stop = Stops(limit, eos, self.context_length, self.max_length)
        if inputs.get("proposal_width") is not None:
            self._width(inputs)  # refused before the proposer or the target runs
        if inputs.get("tokens") is not None:
            out = self._prefill(inputs, stop)
        else:
            out = self._step(inputs, stop)
        missing = [port for port in outputs if port not in out]
        if missing:
            raise RunError(
                "H84",
                f"component {self.component!r}: {SPECULATIVE_CONTRACT} does not produce "
                f"{', '.join(map(repr, missing))} for this package's proposal",
                hint="Read only the ports docs/speculative.md lists for this proposal execution.",
            )
        return {port: out[port] for port in outputs}

    def _width(self, inputs) -> int:
        width = np.asarray(inputs["proposal_width"]).reshape(-1)
        value = int(width[0]) if width.size == 1 and width.dtype.kind in "iu" else None
        if value is None or not 1 <= value <= self.plan.max_width:
            shown = width.tolist() if value is None else value
            raise RunError(
                "F118",
                f"component {self.component!r}: proposal width {shown} is not one integer from "
                f"1 to {self.plan.max_width} (speculative.max_proposal_width)",
                hint=f"Ask for a width from 1 to {self.plan.max_width}.",
            )
        return value

    def _prefill(self, inputs, stop):
        tokens = np.asarray(inputs["tokens"], dtype=np.int64)
        batch, step = tokens.shape
        lengths = inputs.get("lengths")
        lengths = np.full(batch, -1) if lengths is None else np.asarray(lengths).reshape(-1)
        lengths = np.where(lengths < 0, step, lengths).astype(np.int64)
        if lengths.shape[0] != batch or (lengths > step).any() or (lengths < 1).any():
            raise RunError(
                "H75",
                f"component {self.component!r}: prompt lengths {lengths.tolist()} do not fit "
                f"{step} token column(s) per row (each row needs at least one token)",
                hint="Pass each row's true prompt length, from 1 to the padded width.",
            )
        prompts = [tokens[r, : lengths[r]].tolist() for r in range(batch)]
        state = {}
        for c in self.plan.cells:
            if c.sequence_axis is not None:
                state[c.cell] = self._empty(c.cell, batch)
            elif inputs.get(c.own_input) is None:
                raise RunError(
                    "H84",
                    f"component {self.component!r}: the prefill needs the start value of "
                    f"recurrent cell {c.cell!r} at port {c.own_input!r}",
                    hint="Bind the cell's initial value to that port in the prefill invoke.",
                )
            else:
                state[c.cell] = inputs[c.own_input]
        chained = self.plan.chained
        seed = chained.folded_carry_seed.output if chained and chained.folded_carry_seed else None
        wanted = [self.plan.parameters["target_logits_output"], *([seed] if seed else [])]
        empty_mask = np.zeros((batch, 0), dtype=np.int64)
        results, present, target_mask = self._forward("target", prompts, empty_mask, state, wanted)
        state.update(present)
        logits = self._shaped(results[wanted[0]], (batch, max(lengths)), "target", wanted[0])
        choices = np.argmax(logits[:, -1, :], axis=-1)
        committed, finish, active = [], np.zeros(batch, dtype=np.int64), np.ones(batch, bool)
        generated = np.zeros(batch, dtype=np.int64)
        for r in range(batch):
            row, finish[r] = stop.commit([int(choices[r])], 0, len(prompts[r]))
            committed.append(row)
            generated[r] = len(row)
            active[r] = finish[r] == 0 and len(row) > 0
        # every extent a request reaches: its prompt, then at most max_proposal_width + 1 cache
        # slots (and pending tokens) per step, one step per new token at most
        bound = step + 1 + (self.plan.max_width + 1) * max(stop.limit, 0)
        out = {"target_mask": target_mask, "capacity": np.array([bound], dtype=np.int64)}
        carry = None
        if seed:
            hidden = self._shaped(results[seed], (batch, max(lengths)), "target", seed)
            carry = hidden[:, -1].reshape(batch, -1)
            out["carry"] = carry
        if self.cached_proposer:  # it reads the prompt on the first step, with its cache
            pending = [p + c for p, c in zip(prompts, committed, strict=True)]
            out["proposer_mask"] = empty_mask
        else:
            pending = [c[-1:] or p[-1:] for p, c in zip(prompts, committed, strict=True)]
            if self._cells("proposer"):
                hidden = np.asarray(to_host(results[seed], self.counters)) if seed else None
                self._catch_up(prompts, state, hidden, max(len(p) for p in prompts))
        self._finish(out, state, committed, pending, active, generated, finish, width=1)
        return out

    def _catch_up(self, prompts, state, hidden, step):
        """Feed each prompt through a chained proposer, one position per call, so its recurrent
        cells have read the prompt (rows with shorter prompts keep their state); a folded carry
        is the target's seed output at the previous position (zeros before the first)."""
        batch = len(prompts)
        longest = max(len(p) for p in prompts)
        for j in range(longest):
            rows = np.array([j < len(p) for p in prompts])
            tokens = np.array([p[j] if j < len(p) else self.pad for p in prompts], dtype=np.int64)
            carry = None
            if hidden is not None:
                carry = np.zeros((batch, self.carry_width), dtype=self.table.dtype)
                for r, p in enumerate(prompts):
                    if 1 <= j < len(p):
                        carry[r] = hidden[r, step - len(p) + j - 1].reshape(-1)
            _, following, _ = self._chained_call(tokens, carry, state)
            for c in self._cells("proposer"):
                state[c.cell] = _select_rows(rows, following[c.cell], state[c.cell])

    def _step(self, inputs, stop):
        needed = ["pending", "pending_lengths", "target_mask", "active", "generated",
                  "proposal_width", *(c.own_input for c in self.plan.cells)]  # fmt: skip
        if self.cached_proposer:
            needed.append("proposer_mask")
        elif self.plan.chained.folded_carry_output is not None:
            needed.append("carry")
        missing = [port for port in needed if inputs.get(port) is None]
        if missing:
            raise RunError(
                "H84",
                f"component {self.component!r}: a speculative step (a call without 'tokens') "
                f"needs input port(s) {', '.join(map(repr, missing))}",
                hint="Bind what the previous call returned (docs/speculative.md lists the ports).",
            )
        active = np.asarray(inputs["active"], dtype=bool).reshape(-1).copy()
        batch = active.shape[0]
        generated = np.asarray(inputs["generated"], dtype=np.int64).reshape(-1).copy()
        finish = inputs.get("finish_reason")
        finish = np.zeros(batch, np.int64) if finish is None else np.asarray(finish, np.int64)
        finish = finish.reshape(-1).copy()
        width = self._width(inputs)
        pending_in = np.asarray(inputs["pending"], dtype=np.int64)
        lengths = np.asarray(inputs["pending_lengths"], dtype=np.int64).reshape(-1)
        if (
            pending_in.ndim != 2
            or pending_in.shape[0] != batch
            or lengths.shape[0] != batch
            or (active & ((lengths < 1) | (lengths > pending_in.shape[1]))).any()
        ):
            raise RunError(
                "H84",
                f"component {self.component!r}: pending {list(pending_in.shape)} with lengths "
                f"{lengths.tolist()} does not give every active row of {batch} its last "
                "committed token",
                hint="Bind the pending tokens and lengths the previous call returned.",
            )
        pending = [pending_in[r, : lengths[r]].tolist() for r in range(batch)]
        target_mask = np.asarray(inputs["target_mask"], dtype=np.int64)
        if self.context_length and active.any():
            # no graph reads a position at or past the context bound: near it, a step proposes
            # fewer tokens (the committed tokens are the same for every width)
            read = target_mask[active].sum(axis=1) + 1  # with the last committed token
            width = max(1, min(width, self.context_length - int(read.max())))
        state = {c.cell: inputs[c.own_input] for c in self.plan.cells}
        chained = self.plan.chained
        out: dict = {}
        self.counters.add("speculative", "steps")
        # 1. propose
        if chained is None:
            proposals, history = self._propose_block(inputs, pending, active, width, state, out)
        elif self.plan.decoder_shaped:
            proposals, history = self._propose_decoder(inputs, pending, active, width, state)
        else:
            proposals, history = self._propose_chained(inputs, pending, active, width, state)
        # 2. verify
        chunks = [[p[-1], *proposals[r]] if active[r] else [] for r, p in enumerate(pending)]
        seed = chained.folded_carry_seed.output if chained and chained.folded_carry_seed else None
        wanted = [self.plan.parameters["target_logits_output"], *([seed] if seed else [])]
        target_state = {c.cell: state[c.cell] for c in self._cells("target")}
        results, present, full_mask = self._forward(
            "target", chunks, target_mask, target_state, wanted
        )
        logits = self._shaped(results[wanted[0]], (batch, width + 1), "target", wanted[0])
        choices = np.argmax(logits, axis=-1)  # [batch, width + 1]
        # 3-4. accept, correct, commit
        past = target_mask.shape[1]
        keep = np.zeros(batch, dtype=np.int64)
        committed: list[list[int]] = [[] for _ in range(batch)]
        accepted_at = np.zeros(batch, dtype=np.int64)
        for r in np.flatnonzero(active):
            row = proposals[r]
            accepted = 0
            while accepted < width and row[accepted] == int(choices[r, accepted]):
                accepted += 1
            self.counters.add("speculative", "proposed", width)
            self.counters.add("speculative", "accepted", accepted)
            if chained is not None and not self.plan.decoder_shaped:
                accepted = min(accepted, width - 1)
            accepted_at[r] = accepted
            block = [*row[:accepted], int(choices[r, accepted])]
            length = int(target_mask[r].sum()) + 1
            committed[r], finish[r] = stop.commit(block, int(generated[r]), length)
            generated[r] += len(committed[r])
            keep[r] = accepted + 1
            if keep[r] < width + 1:
                self.counters.add("speculative", "rollbacks")
            active[r] = finish[r] == 0
        # 5. roll back: truncate the target's cache, restore recurrent cells, recompute the carry
        out["target_mask"] = self._truncate("target", present, full_mask, past, keep, state)
        was_active = np.asarray(inputs["active"], dtype=bool).reshape(-1)
        if self.plan.decoder_shaped:
            # the proposer keeps what it read of committed tokens: its pending chunk and the
            # accepted proposals it was fed (at most width - 1), and reads the rest next step
            before, first, present, full = history
            read = np.minimum(accepted_at, width - 1)
            kept = np.where(was_active, first + read, 0)
            out["proposer_mask"] = self._truncate("proposer", present, full, before, kept, state)
            pending = [
                committed[r][read[r] :] if was_active[r] else pending[r] for r in range(batch)
            ]
        elif chained is not None:
            for c in self._cells("proposer"):
                chosen = [
                    history[int(accepted_at[r])][c.cell][r] if was_active[r] else state[c.cell][r]
                    for r in range(batch)
                ]
                state[c.cell] = np.stack([np.asarray(to_host(v)) for v in chosen])
            if seed:
                hidden = self._shaped(results[seed], (batch, width + 1), "target", seed)
                carry = np.asarray(inputs["carry"]).copy()
                for r in np.flatnonzero(was_active):
                    carry[r] = hidden[r, accepted_at[r]].reshape(-1)
                out["carry"] = carry
            pending = [
                committed[r][-1:] if was_active[r] and committed[r] else pending[r]
                for r in range(batch)
            ]
        else:
            pending = [committed[r] if was_active[r] else pending[r] for r in range(batch)]
        self._finish(out, state, committed, pending, active, generated, finish, width + 1)
        return out

    def _truncate(self, role, present, full_mask, past, keep, state):
        """Roll a cache back: each of ``role``'s cells (``present``, by cell) is cut along its
        group's sequence axis to the ``past`` slots before this call plus the widest row's
        ``keep``; a row that keeps fewer has the slots between masked out (one tensor). Updates
        ``state``; returns the mask."""
        extent = past + int(np.max(keep, initial=0))
        mask = full_mask[:, :extent].copy()
        for r in range(mask.shape[0]):
            mask[r, past + keep[r] :] = 0
        for c in self._cells(role):
            value = present[c.cell]
            index = [slice(None)] * value.ndim
            index[c.sequence_axis] = slice(0, extent)
            state[c.cell] = value[tuple(index)]
        return mask

    def _propose_block(self, inputs, pending, active, width, state, out):
        proposer_state = {c.cell: state[c.cell] for c in self._cells("proposer")}
        chunks = [p if active[r] else [] for r, p in enumerate(pending)]
        key = self.plan.parameters["proposal_output"]
        results, present, mask = self._forward(
            "proposer", chunks, np.asarray(inputs["proposer_mask"], dtype=np.int64),
            proposer_state, [key],
        )  # fmt: skip
        self.counters.add("speculative", "proposer_calls")
        state.update(present)
        out["proposer_mask"] = mask
        block = np.asarray(to_host(results[key], self.counters))
        if block.ndim != 2 or block.shape[0] != len(pending) or block.dtype.kind not in "iu":
            raise RunError(
                "C86",
                f"component {self.component!r}: the proposer's {key!r} is {block.dtype} of shape "
                f"{list(block.shape)}, not integer token ids [batch, width]",
                hint="The block proposer's output must hold the proposed token ids.",
            )
        block = block.astype(np.int64)
        if block.shape[1] < width:
            raise RunError(
                "F118",
                f"component {self.component!r}: proposal width {width} is wider than the "
                f"{block.shape[1]} token(s) the proposer {self.plan.proposer!r} returns",
                hint=f"Ask for a width from 1 to {block.shape[1]}.",
            )
        return [block[r, :width].tolist() for r in range(len(pending))], None

    def _propose_decoder(self, inputs, pending, active, width, state):
        """A decoder-shaped chained proposer: ``width`` calls through its own cache, the first
        reading each row's pending tokens, each later one the previous proposal; each call's
        greedy choice at its last position is the next proposal. Returns the proposals and
        ``(mask width before, first chunk width, present values, mask after)``."""
        batch = len(pending)
        key = self.plan.chained.logits_output
        mask = np.asarray(inputs["proposer_mask"], dtype=np.int64)
        before = mask.shape[1]
        present = {c.cell: state[c.cell] for c in self._cells("proposer")}
        chunks = [p if active[r] else [] for r, p in enumerate(pending)]
        first = max((len(c) for c in chunks), default=0)
        proposals = np.zeros((batch, width), dtype=np.int64)
        for j in range(width):
            step = max((len(c) for c in chunks), default=0)
            results, present, mask = self._forward("proposer", chunks, mask, present, [key])
            if results is None:  # no active row
                break
            self.counters.add("speculative", "proposer_calls")
            logits = self._shaped(results[key], (batch, step), "proposer", key)
            proposals[:, j] = np.argmax(logits[:, -1, :], axis=-1)
            chunks = [[int(proposals[r, j])] if active[r] else [] for r in range(batch)]
        return [proposals[r].tolist() for r in range(batch)], (before, first, present, mask)

    def _propose_chained(self, inputs, pending, active, width, state):
        batch = len(pending)
        chained = self.plan.chained
        tokens = np.array([p[-1] for p in pending], dtype=np.int64)
        carry = None
        if chained.folded_carry_output is not None:
            carry = np.asarray(inputs["carry"])
        recurrent = {c.cell: state[c.cell] for c in self._cells("proposer")}
        proposals = np.zeros((batch, width), dtype=np.int64)
        history = []  # the recurrent values after each call
        for j in range(width):
            logits, recurrent, carry = self._chained_call(tokens, carry, recurrent)
            history.append(recurrent)
            tokens = np.argmax(logits, axis=-1).astype(np.int64)
            proposals[:, j] = tokens
        return [proposals[r].tolist() for r in range(batch)], history

    def _finish(self, out, state, committed, pending, active, generated, finish, width):
        batch = len(committed)
        block = np.full((batch, width), self.pad, dtype=np.int64)
        for r, row in enumerate(committed):
            block[r, : len(row)] = row
            self.counters.add("speculative", "committed", len(row))
        widest = max(max(len(p) for p in pending), 1)
        pend = np.full((batch, widest), self.pad, dtype=np.int64)
        for r, p in enumerate(pending):
            pend[r, : len(p)] = p
        out.update(
            {
                "tokens": block,
                "accepted_len": np.array([len(c) for c in committed], dtype=np.int64),
                "pending": pend,
                "pending_lengths": np.array([len(p) for p in pending], dtype=np.int64),
                "next_active": active,
                "running": np.array([bool(active.any())]),
                "done": ~active,
                "generated": generated,
                "finish_reason": finish,
            }
        )
        for c in self.plan.cells:
            out[c.own_output] = state[c.cell]


def _select_rows(rows, new, old):
    """``new`` where ``rows`` is true, else ``old`` (row by row along axis 0)."""
    shape = (len(rows),) + (1,) * (np.ndim(new) - 1)
    return np.where(np.asarray(rows).reshape(shape), new, old)


class Stops:
    """The stop conditions of ``onnx-genai.token-policy``, applied to committed tokens in
    order: an end id (``stop``), ``max_new_tokens`` (``length``), the context bound
    (``context_length``)."""

    def __init__(self, limit: int, eos: set, context_length: int, max_length: int = 0):
        self.limit, self.eos, self.context = limit, eos, context_length
        self.max_length = max_length

    def commit(self, tokens: list[int], generated: int, length: int) -> tuple[list[int], int]:
        """The tokens a row commits (``generated`` new tokens so far, ``length`` tokens in its
        sequence) and its finish code (0: it goes on)."""
        if generated >= self.limit:
            return [], FINISH_LENGTH
        if self.context and length >= self.context:  # a prompt that fills the context
            return [], FINISH_CONTEXT
        kept = []
        for token in tokens:
            kept.append(token)
            generated, length = generated + 1, length + 1
            if token in self.eos:
                return kept, FINISH_STOP
            if generated >= self.limit:
                return kept, FINISH_LENGTH
            if self.context and length >= self.context:
                return kept, FINISH_CONTEXT
            if self.max_length and length >= self.max_length:
                return kept, FINISH_LENGTH
        return kept, 0


# ------------------------------------------------------------------ construction


def build_speculative_session(package, name: str, sessions, counters) -> SpeculativeBlock:
    """The session of a speculative-block component (resolved at load, rules F115-F117)."""
    wf = package.metadata.workflow
    spec = package.metadata.speculative
    graphs = {}
    for role in ("target", "proposer"):
        comp = wf.components[getattr(spec, role)]
        path = package.resolve(comp.implementation.artifact)
        model = load_model(path)
        graphs[role] = (model, signature(model, path))

    def port_names(component, direction):
        comp = wf.components.get(component)
        if comp is not None and comp.ports is not None:
            declared = comp.ports.inputs if direction == "inputs" else comp.ports.outputs
            if declared:
                return list(declared)
        for role in ("target", "proposer"):
            if getattr(spec, role) == component:
                sig = graphs[role][1]
                return list(sig.inputs if direction == "inputs" else sig.outputs)
        return None

    def port_dtype(component, port):
        for role in ("target", "proposer"):
            if getattr(spec, role) == component:
                value = graphs[role][1].inputs.get(port)
                return value.dtype if value is not None else None
        return None

    plan, problems = resolve(wf, spec, name, port_names, port_dtype)
    if plan is None:  # validated at load: unreachable for a loaded package
        code, _, message = problems[0]
        raise RunError(code, message)
    templates = {}
    for c in plan.cells:
        value = graphs[c.model][1].inputs.get(c.model_input)
        if value is None or value.dims is None:
            continue  # a recurrent cell starts from the value the prefill is given
        dims = tuple(d if isinstance(d, int) else None for d in value.dims)
        templates[c.cell] = (dims, numpy_dtype(value.dtype))
    table, carry_width = None, 0
    chained = plan.chained
    if chained is not None and not plan.decoder_shaped:  # a decoder-shaped one embeds itself
        from onnx import numpy_helper

        model = load_model(package.artifact_path(spec.target), external_data=True)
        found = [t for t in model.graph.initializer if t.name == chained.token_embedding.table]
        table = numpy_helper.to_array(found[0])
        if table.ndim != 2:
            raise RunError(
                "F116",
                f"token_embedding table {chained.token_embedding.table!r} is "
                f"{table.ndim}-dimensional, not [vocab, width]",
            )
        if chained.folded_carry_output is not None:
            sig = graphs["proposer"][1]
            dims = sig.inputs[chained.token_embedding_input].dims or ()
            total = dims[-1] if dims and isinstance(dims[-1], int) else None
            carry_width = (total - table.shape[1]) if total else 0
    return SpeculativeBlock(plan, sessions, counters, templates, table, carry_width)
