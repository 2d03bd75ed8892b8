"""Continuous batching cases: a runtime declaring ``continuous_batching`` serves several
one-row requests, each with an arrival step, in one continuous batch (the protocol's ``serve``
method; docs/conformance.md).

Each case takes rows of the requests of run cases of one package (a batched request's row is a
request of its own), gives each an arrival step and serves them over a number of slots. The
formula of every case: **each request's results are its solo run's**, which the run case's
golden holds (a row of a golden equals its solo run: the ``rows`` suite holds it). Suites:

- ``continuous_batching/<case>``: every request is served once; its tokens and finish reason
  equal the golden's row; it is admitted no earlier than it arrived (and, without a KV
  budget, at its arrival where a slot is free then) and finishes no earlier than it was
  admitted; no more requests overlap than there are slots, and no two overlap in
  one slot; where there are more requests than slots, a freed slot is reused;
- ``determinism/continuous_batching/<case>``: serving twice gives identical results;
- ``rows/continuous_batching/<case>``: each served request equals the runtime's own ``run`` of
  it alone (whatever shared the batch, whenever it was admitted): its tokens and finish
  reason, and its outputs and events exactly;
- ``parity/continuous_batching/<case>``: every pair of the runtime's executors serves the same
  results (with fewer than two executors: against the goldens);
- ``batch_counters/<case>`` (a runtime that also declares ``batch_counters``): the counters
  the serve reports agree with its schedule (admissions, reused slots, steps and rows), and the
  requests decoding at one step share one run of the loop body, unless the case says why they
  may run apart (``apart``: what the body reads as one value differs between them);
- ``batch_trace/<case>`` (a runtime that also declares ``batch_trace``): the per-step record
  the serve reports agrees with its schedule: the slots that ran the body, each slot's
  accepted_len (1 or, sitting the step out, 0), the liveness bit (on while a later step runs
  the body) and the runs of the body at each step;
- a case served under a KV budget (``kv_budget``, for a runtime that also declares
  ``kv_admission``) runs at most ``holds`` requests at once, and at some step that many, and
  admits each request of ``fit_at_arrival`` (those that fit at once) at its arrival;
- ``fail_closed/continuous_batching/<case>``: serving a package whose
  ``model.runtime_configurable.continuous_batching`` is false, or over slots that are not a
  whole number from 1 (H124), or a request arriving at a step that is not a whole number
  from 0 (H75), is refused before anything is served; and a serve whose shared body makes a
  request-aligned value without one row per request (``UNCUT``: four rows for two, or no
  request axis) is refused (D85 published, E57 carried: no row can be cut for each request),
  unless the runtime runs those requests apart, each equal to its solo run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from onnx import helper

from fixtures.generators import RUN_CASES
from fixtures.generators.cases import RunCase
from fixtures.generators.common import contract_graph

from .. import goldens
from .mutations import Delete, Insert, Move, Mutation, Set, Variant, WriteFile
from .run_cases import solo_request

FEATURE = "continuous_batching"


@dataclass(frozen=True)
class Source:
    """Row ``row`` of request ``request`` of run case ``run``, arriving at step ``arrival``
    (None: the served request gives no ``arrival``, so it arrives at step 0)."""

    run: str
    request: int
    row: int
    arrival: int | None

    @property
    def step(self) -> int:
        """The step it arrives at."""
        return 0 if self.arrival is None else self.arrival


@dataclass(frozen=True)
class BatchCase:
    id: str
    package: str
    slots: int
    sources: tuple[Source, ...]
    notes: str
    tags: tuple[str, ...] = field(default_factory=tuple)
    # Served under this KV budget (the load option of a runtime declaring kv_admission)...
    kv_budget: int | None = None
    # ...which holds exactly this many of the requests at once: admission takes a request as
    # soon as its KV fits, so some step runs this many, and none more...
    holds: int | None = None
    # ...and these requests (indices) fit at once: each is admitted at its arrival step.
    fit_at_arrival: tuple[int, ...] = ()
    # A valid edit of the package to serve instead of the package itself (its results are
    # still its sources' goldens: the edit changes none of their tokens).
    variant: Variant | None = None
    # Why requests decoding at one step may run the loop body apart (None: they share one run
    # per step): what the body reads as one value differs between them.
    apart: str | None = None
    # Whether the body binds the batch component's accepted_len (each decoder here accepts one
    # token per step: 1 for a slot that ran the body, 0 for one that sat the step out).
    accepted_len: bool = True
    # The code a serve that shares the body refuses with (the body makes a request-aligned
    # value with no row for each request); None: it serves.
    refused: str | None = None


def _rows(run: str, request: int, arrivals) -> tuple[Source, ...]:
    return tuple(Source(run, request, row, at) for row, at in enumerate(arrivals))


_WF = ("pipeline", "workflow")
_LOOP = (*_WF, "steps", 0)  # the lowered decode loop
_ROWS = {"kind": "request_aligned", "axis": 0}
_LENGTHS = {"dtype": "int64", "rank": 1, "shape": ["batch"], "batch_layout": _ROWS}


def _cell(name: str, contract: dict, initializer: str) -> Set:
    """A workflow cell of the invocation, semantic and invariant."""
    return Set(
        (*_WF, "state", name),
        {
            "contract": contract,
            "scope": "invocation",
            "class": "semantic",
            "initializer": initializer,
            "recurrence": {"kind": "invariant"},
        },
    )


def _output(name: str, contract: dict) -> Set:
    """A workflow output published as a tensor, before any adapter."""
    return Set(
        (*_WF, "outputs", name), {"contract": contract, "role": "tensor", "stage": "pre_adapter"}
    )


# lowered_decoder (model_io_decoder lowered to its workflow: the same tokens) edited as an
# author might write its decode loop: the loop numbers its iterations (`step.index`, int64
# [batch]: one per row, each row its own count); two branches on a value without a request
# axis (`package.one`, always 1), one taking its case `1`, the other its default, each emit
# that number to an output `steps` (the first when `package.active`: every row), and pass on
# values from before the loop (`package.one_row`, each row's accepted tokens for the batch
# component; `request.prompt_lengths`, read by nothing); the batch component's accepted_len
# is optional, and left unbound; and the workflow declares no finish_reasons output (a row's
# finish reason follows from the loop: `length` when it ran max_iterations bodies).
_EMIT_INDEX = {"kind": "emit", "value": "step.index", "output": "steps", "mode": "replace"}
AUTHORED_LOOP = Variant(
    "lowered_decoder",
    (
        Set((*_WF, "manifest", "capabilities", 10), "loop_induction_values"),
        Set(
            (*_LOOP, "iteration"),
            {
                "value": "step.index",
                "contract": {
                    "dtype": "int64",
                    "rank": 1,
                    "shape": ["batch"],
                    "batch_layout": _ROWS,
                },
            },
        ),
        Delete((*_WF, "outputs", "finish_reasons")),
        _output(
            "steps",
            {
                "dtype": "int64",
                "rank": 1,
                "shape": ["batch"],
                "batch_layout": _ROWS,
            },
        ),
        Delete((*_WF, "steps", 1)),
        Insert(
            (*_LOOP, "steps"),
            2,
            {
                "kind": "branch",
                "predicate": "package.one",
                "cases": {
                    "1": {
                        "kind": "emit",
                        "value": "step.index",
                        "output": "steps",
                        "mode": "replace",
                        "when": "package.active",
                    }
                },
                "outputs": {"step.accepted": {"cases": {"1": "package.one_row"}}},
            },
        ),
        Insert(
            (*_LOOP, "steps"),
            3,
            {
                "kind": "branch",
                "predicate": "package.one",
                "cases": {"0": _EMIT_INDEX},
                "default": _EMIT_INDEX,
                "outputs": {
                    "step.prompt_lengths": {
                        "cases": {"0": "package.zero"},
                        "default": "request.prompt_lengths",
                    }
                },
            },
        ),
        Set((*_LOOP, "steps", 5, "inputs", "accepted"), "step.accepted"),
        Set((*_WF, "components", "batch", "ports", "outputs", "accepted_len", "optional"), True),
        Delete((*_LOOP, "steps", 5, "outputs", "accepted_len")),
    ),
    "authored_loop",
)


# lowered_decoder whose decode loop numbers its iterations with one value for the batch
# (`step.index`, int64 [], no request axis): requests at different iterations cannot share a
# body, which has one iteration number.
SHARED_ITERATION = Variant(
    "lowered_decoder",
    (
        Set((*_WF, "manifest", "capabilities", 10), "loop_induction_values"),
        Set(
            (*_LOOP, "iteration"),
            {"value": "step.index", "contract": {"dtype": "int64", "rank": 0}},
        ),
    ),
    "shared_iteration",
)


# lowered_decoder whose decode loop also carries a cell `lengths` (int64 [batch], from 0) whose
# next value is one from before the body (`prefill.sequence_lengths`, each row's prompt length,
# from the loop's setup), published after the loop as an output `lengths`.
NEXT_FROM_BEFORE = Variant(
    "lowered_decoder",
    (
        _cell("lengths", _LENGTHS, "package.zero"),
        _output("lengths", _LENGTHS),
        Insert((*_LOOP, "carried"), 0, {"cell": "lengths", "next": "prefill.sequence_lengths"}),
        Insert(
            (*_WF, "steps"),
            1,
            {"kind": "emit", "value": "lengths", "output": "lengths", "mode": "replace"},
        ),
    ),
    "next_from_before",
)


# lowered_decoder whose prefill (the loop's `setup`) is a step before the loop instead: the
# loop's cells start from values the steps before it computed, which each request computes
# for itself when it is admitted (the same tokens). The body also publishes one of them, each
# row's prompt length (`prefill.sequence_lengths`, int64 [batch], a component's output): a
# value of one row per request, stacked like a cell, which requests share a body with.
PREFILL_BEFORE_THE_LOOP = Variant(
    "lowered_decoder",
    (
        Move((*_LOOP, "setup", 0), (*_WF, "steps"), 0),
        Delete((*_WF, "steps", 1, "setup")),
        _output(
            "prompt_lengths",
            {
                "dtype": "int64",
                "rank": 1,
                "shape": ["batch"],
                "batch_layout": _ROWS,
            },
        ),
        Insert(
            (*_WF, "steps", 1, "steps"),
            2,
            {
                "kind": "emit",
                "value": "prefill.sequence_lengths",
                "output": "prompt_lengths",
                "mode": "replace",
            },
        ),
    ),
    "prefill_before_the_loop",
)

# lowered_decoder whose body also feeds its max_new_tokens (int64 [1], no request axis) to a
# `binding` component: read there as one value, not only by the policy (which takes one value
# or one per row), so requests of different budgets cannot share a body.
_BUDGET = {"dtype": "int64", "rank": 1, "shape": [1]}
BUDGET_READ_AS_ONE = Variant(
    "lowered_decoder",
    (
        Set(
            (*_WF, "components", "budget"),
            {
                "implementation": {"kind": "binding"},
                "ports": {"inputs": {"n": _BUDGET}, "outputs": {"n": _BUDGET}},
            },
        ),
        Insert(
            (*_LOOP, "steps"),
            0,
            {
                "kind": "invoke",
                "component": "budget",
                "inputs": {"n": "request.max_new_tokens"},
                "outputs": {"n": "step.budget"},
            },
        ),
    ),
    "budget_read_as_one",
)

# lowered_decoder whose body publishes each token from a loop nested in it: one pass
# (`package.one`) while `package.active` (every row) holds. The nested loop reads values from
# before the decode loop (its bound and its predicate) that the body as written does not.
NESTED_EMIT = Variant(
    "lowered_decoder",
    (
        Set(
            (*_LOOP, "steps", 1),
            {
                "kind": "loop",
                "steps": [
                    {
                        "kind": "emit",
                        "value": "step.token",
                        "output": "tokens",
                        "mode": "append",
                        "when": "step.emitted",
                    }
                ],
                "continue_when": "package.active",
                "max_iterations": "package.one",
                "carried": [],
            },
        ),
    ),
    "nested_emit",
)

# lowered_decoder whose decode body also runs a loop of one pass that carries a cell `lengths`
# (int64 [batch]) starting from a value from before the decode loop (its carried `initial`:
# `prefill.sequence_lengths`, each row's prompt length) and publishes it to an output `lengths`
# (replaced at each step): the start value of a nested loop's cell is read by the body too.
NESTED_CARRIED = Variant(
    "lowered_decoder",
    (
        _cell("lengths", _LENGTHS, "package.zero"),
        _output("lengths", _LENGTHS),
        Insert(
            (*_LOOP, "steps"),
            0,
            {
                "kind": "loop",
                "steps": [
                    {"kind": "emit", "value": "lengths", "output": "lengths", "mode": "replace"}
                ],
                "continue_when": "package.active",
                "max_iterations": "package.one",
                "carried": [
                    {
                        "cell": "lengths",
                        "next": "lengths",
                        "initial": "prefill.sequence_lengths",
                    }
                ],
            },
        ),
    ),
    "nested_carried",
)

# lowered_decoder whose body also publishes each token to an output `continuing` from a loop
# of one pass nested in it, which a row enters only while it goes on (`step.active`): a row
# publishes there every token but the one it stops at. Rows that stop at different steps share
# a body, so at one row's last step the nested loop runs for the others and not for it.
CONTINUING = Variant(
    "lowered_decoder",
    (
        _output(
            "continuing",
            {
                "dtype": "int64",
                "rank": 2,
                "shape": ["batch", "continuing_sequence"],
                "batch_layout": _ROWS,
            },
        ),
        Insert(
            (*_LOOP, "steps"),
            2,
            {
                "kind": "loop",
                "steps": [
                    {
                        "kind": "emit",
                        "value": "step.token",
                        "output": "continuing",
                        "mode": "append",
                        "when": "package.active",
                    }
                ],
                "continue_when": "step.active",
                "max_iterations": "package.one",
                "carried": [],
            },
        ),
    ),
    "continuing",
)

# lowered_decoder whose decode loop also carries a cell of two rows per request row (a
# `request_expanded` layout, factor 2): the loop's setup makes each row's pair (its prompt
# length, and that plus 100) with a graph `pairs`, the body adds one to both with a graph
# `bump`, and publishes the pair to an output `pairs` of the same layout (replaced at each
# step). Requests of different prompt lengths share a body, each keeping its own two rows.
_PAIR = {
    "dtype": "int64",
    "rank": 1,
    "shape": ["batch"],
    "batch_layout": {"kind": "request_expanded", "axis": 0, "factor": 2},
}


def _pair_graphs() -> tuple[bytes, bytes]:
    """``pairs``: ``lengths`` [B] to ``pair`` [2B], rows ``2r, 2r + 1`` = ``lengths[r]``,
    ``lengths[r] + 100``; ``bump``: ``pair`` + 1."""
    node = helper.make_node
    pairs = contract_graph(
        "pairs",
        {"lengths": _LENGTHS},
        {"pair": _PAIR},
        [
            node("Add", ["lengths", "hundred"], ["more"]),
            node("Unsqueeze", ["lengths", "last"], ["a"]),
            node("Unsqueeze", ["more", "last"], ["b"]),
            node("Concat", ["a", "b"], ["both"], axis=1),
            node("Reshape", ["both", "flat"], ["pair"]),
        ],
        {
            "hundred": np.array(100, np.int64),
            "last": np.array([1], np.int64),
            "flat": np.array([-1], np.int64),
        },
    )
    bump = contract_graph(
        "bump",
        {"pair": _PAIR},
        {"next": _PAIR},
        [node("Add", ["pair", "one"], ["next"])],
        {"one": np.array(1, np.int64)},
    )
    return pairs.SerializeToString(), bump.SerializeToString()


_PAIRS_ONNX, _BUMP_ONNX = _pair_graphs()
EXPANDED_CELL = Variant(
    "lowered_decoder",
    (
        WriteFile("pairs.onnx", _PAIRS_ONNX),
        WriteFile("bump.onnx", _BUMP_ONNX),
        Set(
            (*_WF, "components", "pairs"),
            {
                "implementation": {"kind": "onnx", "artifact": "pairs.onnx"},
                "ports": {"inputs": {"lengths": _LENGTHS}, "outputs": {"pair": _PAIR}},
            },
        ),
        Set(
            (*_WF, "components", "bump"),
            {
                "implementation": {"kind": "onnx", "artifact": "bump.onnx"},
                "ports": {"inputs": {"pair": _PAIR}, "outputs": {"next": _PAIR}},
            },
        ),
        _cell("pair", _PAIR, "prefill.pair"),
        _output("pairs", _PAIR),
        Insert(
            (*_LOOP, "setup"),
            1,
            {
                "kind": "invoke",
                "component": "pairs",
                "inputs": {"lengths": "prefill.sequence_lengths"},
                "outputs": {"pair": "prefill.pair"},
            },
        ),
        Insert(
            (*_LOOP, "steps"),
            0,
            {
                "kind": "invoke",
                "component": "bump",
                "inputs": {"pair": "pair"},
                "outputs": {"next": "step.pair"},
            },
        ),
        Insert(
            (*_LOOP, "steps"),
            1,
            {
                "kind": "emit",
                "value": "step.pair",
                "output": "pairs",
                "mode": "replace",
            },
        ),
        Insert((*_LOOP, "carried"), 0, {"cell": "pair", "next": "step.pair"}),
    ),
    "expanded_cell",
)

# lowered_decoder whose decode loop also publishes each row's prompt (an output `prompt`, int64
# [batch, prompt_sequence]) in every body: the body reads a value from before the loop whose
# extent outside the request axis differs between prompts of different lengths, so such
# requests cannot share a body.
PROMPT_IN_THE_BODY = Variant(
    "lowered_decoder",
    (
        _output(
            "prompt",
            {
                "dtype": "int64",
                "rank": 2,
                "shape": ["batch", "prompt_sequence"],
                "batch_layout": _ROWS,
            },
        ),
        Insert(
            (*_LOOP, "steps"),
            2,
            {
                "kind": "emit",
                "value": "request.prompt_tokens",
                "output": "prompt",
                "mode": "replace",
            },
        ),
    ),
    "prompt_in_the_body",
)

# lowered_decoder whose decode loop also carries each row's prompt as a cell `prompt` (int64
# [batch, prompt_sequence], invariant: its next value is itself): requests whose prompts differ
# in length hold cells of different extents outside the request axis, so they cannot share a
# body.
PROMPT_CARRIED = Variant(
    "lowered_decoder",
    (
        _cell(
            "prompt",
            {
                "dtype": "int64",
                "rank": 2,
                "shape": ["batch", "prompt_sequence"],
                "batch_layout": _ROWS,
            },
            "request.prompt_tokens",
        ),
        Insert((*_LOOP, "carried"), 0, {"cell": "prompt", "next": "prompt"}),
    ),
    "prompt_carried",
)

# lowered_decoder whose decode body also runs a graph `repeat` that reads each row's prompt
# length (`prefill.sequence_lengths`, int64 [batch]) and repeats each row once per row of the
# batch (B rows become B * B, request-aligned: rows 0..B-1 hold row 0's length). Alone, a
# request's one row is its own; two requests sharing the body get four rows, and no two can be
# cut for them (cutting one row each would give the second request the first's length): a
# serve must refuse it (upstream, continuous_batching: "reject if this cannot be guaranteed")
# or run the requests apart. `REPEATED_PUBLISHED` publishes the value to a per-row output
# `repeated` (D85); `REPEATED_CARRIED` carries it as the next value of a cell `repeated`,
# published after the loop (E57).
_REPEATED = {"dtype": "int64", "rank": 1, "shape": ["rows"], "batch_layout": _ROWS}


def _repeat_graph() -> bytes:
    """``repeat``: ``lengths`` [B] to ``repeated`` [B * B], each row B times in turn."""
    node = helper.make_node
    model = contract_graph(
        "repeat",
        {"lengths": _LENGTHS},
        {"repeated": _REPEATED},
        [
            node("Shape", ["lengths"], ["b"]),
            node("Concat", ["b", "b"], ["square"], axis=0),
            node("Unsqueeze", ["lengths", "last"], ["column"]),
            node("Expand", ["column", "square"], ["spread"]),
            node("Reshape", ["spread", "flat"], ["repeated"]),
        ],
        {"last": np.array([1], np.int64), "flat": np.array([-1], np.int64)},
    )
    return model.SerializeToString()


_REPEAT = (
    WriteFile("repeat.onnx", _repeat_graph()),
    Set(
        (*_WF, "components", "repeat"),
        {
            "implementation": {"kind": "onnx", "artifact": "repeat.onnx"},
            "ports": {"inputs": {"lengths": _LENGTHS}, "outputs": {"repeated": _REPEATED}},
        },
    ),
    _output("repeated", _LENGTHS),
    Insert(
        (*_LOOP, "steps"),
        0,
        {
            "kind": "invoke",
            "component": "repeat",
            "inputs": {"lengths": "prefill.sequence_lengths"},
            "outputs": {"repeated": "step.repeated"},
        },
    ),
)
REPEATED_PUBLISHED = Variant(
    "lowered_decoder",
    (
        *_REPEAT,
        Insert(
            (*_LOOP, "steps"),
            1,
            {"kind": "emit", "value": "step.repeated", "output": "repeated", "mode": "replace"},
        ),
    ),
    "repeated_published",
)
REPEATED_CARRIED = Variant(
    "lowered_decoder",
    (
        *_REPEAT,
        _cell("repeated", _LENGTHS, "package.zero"),
        Insert((*_LOOP, "carried"), 0, {"cell": "repeated", "next": "step.repeated"}),
        Insert(
            (*_WF, "steps"),
            1,
            {"kind": "emit", "value": "repeated", "output": "repeated", "mode": "replace"},
        ),
    ),
    "repeated_carried",
)
# SHARED_ITERATION whose body also publishes its iteration number (a value of no request axis)
# to an output `index` (int64 []): served, no request can take a row of its own (D85).
SCALAR_PUBLISHED = Variant(
    "lowered_decoder",
    (
        *SHARED_ITERATION.ops,
        _output("index", {"dtype": "int64", "rank": 0}),
        Insert(
            (*_LOOP, "steps"),
            0,
            {"kind": "emit", "value": "step.index", "output": "index", "mode": "replace"},
        ),
    ),
    "scalar_published",
)

CASES = (
    BatchCase(
        "genai_decoder/staggered_ragged",
        "genai_decoder",
        2,
        _rows("genai_decoder/greedy_ragged_batch", 0, (0, 2, 5)),
        "three prompts of different lengths arriving at steps 0, 2 and 5 into two slots: the "
        "third waits for a freed slot",
    ),
    BatchCase(
        "genai_decoder/mixed_requests",
        "genai_decoder",
        3,
        (
            *_rows("genai_decoder/greedy_equal_rows", 0, (1, 0, 4)),
            *_rows("genai_decoder/greedy_ragged_batch", 0, (0, 3, 3)),
        ),
        "rows of two run cases interleaved over three slots, two arriving at once",
    ),
    BatchCase(
        "genai_decoder/one_slot",
        "genai_decoder",
        1,
        _rows("genai_decoder/greedy_ragged_batch", 0, (2, 0, 0)),
        "one slot: the requests run one after another, the slot reused by each",
    ),
    BatchCase(
        "genai_decoder/seeded_sampling",
        "genai_decoder",
        3,
        _rows("genai_decoder/seeded_sampling", 0, (0, 1, 1)),
        "seeded sampled rows: a row's draws depend on its seed and position only",
        ("sampled",),
    ),
    BatchCase(
        "genai_decoder_multi_eos/end_ids_free_slots",
        "genai_decoder_multi_eos",
        2,
        _rows("genai_decoder_multi_eos/either_end_id_stops", 0, (0, 0, 1, 3)),
        "rows stopping on either end id free their slots at different steps",
    ),
    BatchCase(
        "genai_decoder/mixed_policies",
        "genai_decoder",
        3,
        (
            Source("genai_decoder/seeded_sampling", 0, 0, 0),
            Source("genai_decoder/greedy_ragged_batch", 0, 1, 0),
            Source("genai_decoder/zero_new_tokens", 0, 0, 1),
            Source("genai_decoder/search_max_length", 0, 0, 1),
            Source("genai_decoder/seeded_sampling", 0, 2, 2),
        ),
        "sampled and greedy rows in one batch, beside a row allowed no new token (it leaves at "
        "once, `length`) and one that ignores end ids and runs to the search's max_length: "
        "each row keeps its own policy, budget and stop_on_eos",
        ("sampled",),
        apart="rows with and without stop_on_eos (one flag of the body) run apart",
    ),
    BatchCase(
        "genai_decoder/different_budgets",
        "genai_decoder",
        3,
        (
            Source("genai_decoder/prompt_as_token_input", 2, 0, 0),
            Source("genai_decoder/greedy_ragged_batch", 0, 2, 0),
            Source("genai_decoder/greedy_equal_rows", 0, 1, 5),
        ),
        "greedy rows with max_new_tokens 4 and 8 in one body (the first in the lowest slot), "
        "then the second beside a third of 8 arriving at step 5: each row stops at its own "
        "budget",
    ),
    BatchCase(
        "lowered_decoder/authored_loop",
        "lowered_decoder",
        3,
        _rows("model_io_decoder/greedy_ragged_batch", 0, (0, 0, 2)),
        "a decode loop written by hand (numbered iterations, a branch, finish reasons from "
        "the loop): two rows start together (at one iteration), the third at step 2 (each row "
        "at its own)",
        variant=AUTHORED_LOOP,
        accepted_len=False,
    ),
    BatchCase(
        "genai_decoder/no_new_tokens_alone",
        "genai_decoder",
        2,
        (
            Source("genai_decoder/zero_new_tokens", 0, 0, 0),
            Source("genai_decoder/greedy_ragged_batch", 0, 1, 3),
            Source("genai_decoder/zero_new_tokens", 0, 0, 3),
        ),
        "a request allowed no new token arrives into an empty batch: it leaves at its "
        "admission, served once, and the batch waits for the next arrival (step 3), where "
        "another such request is admitted beside a decoding one",
    ),
    BatchCase(
        "lowered_decoder/prompt_in_the_body",
        "lowered_decoder",
        3,
        _rows("model_io_decoder/greedy_ragged_batch", 0, (0, 0, 1)),
        "a decode loop whose body reads the prompt (int64 [batch, prompt_sequence]): prompts "
        "of different lengths cannot be stacked into one body",
        variant=PROMPT_IN_THE_BODY,
        apart="prompts of different lengths cannot be stacked into one body",
    ),
    BatchCase(
        "lowered_decoder/prefill_before_the_loop",
        "lowered_decoder",
        2,
        _rows("model_io_decoder/greedy_ragged_batch", 0, (0, 1, 1)),
        "the prefill is a step before the decode loop, not its setup: each request runs it "
        "when admitted, and the loop's cells start from what it computed; the body publishes "
        "each row's prompt length, a value of one row per request, so requests of different "
        "prompt lengths still share a body",
        variant=PREFILL_BEFORE_THE_LOOP,
    ),
    BatchCase(
        "lowered_decoder/budget_read_as_one",
        "lowered_decoder",
        2,
        (
            Source("model_io_decoder/vocabulary_edges", 0, 0, 0),
            Source("model_io_decoder/greedy_ragged_batch", 0, 0, 0),
            Source("model_io_decoder/greedy_ragged_batch", 0, 1, 1),
        ),
        "the body reads max_new_tokens as one value (a binding component's port): requests of "
        "budgets 4 and 8 run their bodies apart, each stopping at its own budget, while the "
        "two of budget 8 share one",
        variant=BUDGET_READ_AS_ONE,
        apart="max_new_tokens, read by the body as one value, differs between requests",
    ),
    BatchCase(
        "lowered_decoder/nested_emit",
        "lowered_decoder",
        2,
        _rows("model_io_decoder/greedy_ragged_batch", 0, (0, 0, 2)),
        "each token is published from a loop of one pass nested in the decode body, which "
        "reads its bound and predicate from before the decode loop",
        variant=NESTED_EMIT,
    ),
    BatchCase(
        "lowered_decoder/nested_rows_stop_apart",
        "lowered_decoder",
        3,
        _rows("model_io_decoder/greedy_ragged_batch", 0, (0, 0, 2)),
        "a loop nested in the decode body, entered only by the rows that go on, publishes "
        "their tokens: the first two rows stop two steps before the third, so at their last "
        "step the nested loop runs for the third row alone, and they publish nothing there",
        variant=CONTINUING,
    ),
    BatchCase(
        "lowered_decoder/nested_carried",
        "lowered_decoder",
        2,
        _rows("model_io_decoder/greedy_ragged_batch", 0, (0, 1, 1)),
        "a loop nested in the decode body carries a cell starting from each row's prompt "
        "length (a value from before the decode loop) and publishes it: requests sharing a "
        "body each publish their own",
        variant=NESTED_CARRIED,
    ),
    BatchCase(
        "lowered_decoder/expanded_cell",
        "lowered_decoder",
        3,
        _rows("model_io_decoder/greedy_ragged_batch", 0, (0, 1, 1)),
        "the decode loop carries a cell of two rows per request row (request_expanded, "
        "factor 2) and publishes it at each step: requests of different prompt lengths share "
        "a body, each keeping and publishing its own two rows",
        variant=EXPANDED_CELL,
    ),
    BatchCase(
        "lowered_decoder/shared_iteration",
        "lowered_decoder",
        3,
        _rows("model_io_decoder/greedy_ragged_batch", 0, (0, 0, 2)),
        "the decode loop's iteration number has no request axis (one for the body): the two "
        "rows admitted at step 0 share a body, the third, two iterations behind, runs its own",
        variant=SHARED_ITERATION,
        apart="requests at different iterations cannot share the body's one iteration number",
    ),
    BatchCase(
        "lowered_decoder/next_from_before",
        "lowered_decoder",
        2,
        _rows("model_io_decoder/greedy_ragged_batch", 0, (0, 1, 1)),
        "a carried cell's next value is one from before the body (each row's prompt length, "
        "from the loop's setup): requests sharing a body each take their own",
        variant=NEXT_FROM_BEFORE,
    ),
    BatchCase(
        "lowered_decoder/prompt_carried",
        "lowered_decoder",
        3,
        _rows("model_io_decoder/greedy_ragged_batch", 0, (0, 0, 1)),
        "the decode loop carries each row's prompt as a cell: cells of prompts of different "
        "lengths cannot be stacked into one body",
        variant=PROMPT_CARRIED,
        apart="cells of prompts of different lengths cannot be stacked into one body",
    ),
    BatchCase(
        "genai_decoder/arrival_left_out",
        "genai_decoder",
        1,
        (
            Source("genai_decoder/greedy_ragged_batch", 0, 1, 2),
            Source("genai_decoder/greedy_ragged_batch", 0, 0, None),
        ),
        "the second request gives no arrival, so it arrives at step 0: admitted into the one "
        "slot at once, before the first, which arrives at step 2 and waits for the slot",
    ),
    BatchCase(
        "genai_decoder/empty_before_arrival",
        "genai_decoder",
        2,
        (
            Source("genai_decoder/greedy_ragged_batch", 0, 1, 0),
            Source("genai_decoder/greedy_ragged_batch", 0, 0, 40),
            Source("genai_decoder/greedy_equal_rows", 0, 2, 41),
        ),
        "the first request finishes long before the others arrive: the batch runs empty "
        "until step 40, then admits them",
    ),
    BatchCase(
        "genai_decoder_multi_eos/context_length_beside_end_ids",
        "genai_decoder_multi_eos",
        2,
        (
            Source("genai_decoder_multi_eos/context_length", 0, 0, 0),
            Source("genai_decoder_multi_eos/either_end_id_stops", 0, 1, 0),
            Source("genai_decoder_multi_eos/either_end_id_stops", 0, 3, 2),
        ),
        "a row that ignores end ids until its context is full (`context_length`) beside rows "
        "that stop on either end id and free their slot",
        apart="rows with and without stop_on_eos (one flag of the body) run apart",
    ),
    BatchCase(
        "model_io_decoder/staggered_ragged",
        "model_io_decoder",
        2,
        _rows("model_io_decoder/greedy_ragged_batch", 0, (1, 0, 2)),
        "the same decoder described by legacy model.io",
    ),
    BatchCase(
        "genai_decoder_gqa/kv_budget_holds_two",
        "genai_decoder_gqa",
        3,
        (
            Source("genai_decoder_gqa/greedy_single", 0, 0, 0),
            Source("genai_decoder_gqa/greedy_single", 0, 0, 0),
            Source("genai_decoder_gqa/session_turns", 0, 0, 0),
        ),
        "three slots under a KV budget of exactly two 2560-byte requests (4-token prompts, "
        "6 new tokens), all arriving at step 0: both are admitted at once (their KV fills the "
        "budget exactly), and the 1792-byte request waits for their KV to be freed though a "
        "slot is free",
        kv_budget=2 * 2560,
        holds=2,
        fit_at_arrival=(0, 1),
    ),
)


# Refused before anything is served (H124): a package that says continuous batching may not be
# enabled (upstream's `model.runtime_configurable.continuous_batching: false`), and a batch of
# no slots. Suite `fail_closed` (`fail_closed/continuous_batching/<case>`).
NOT_SERVABLE = Mutation(
    "H124",
    "model_io_decoder",
    (Set(("model", "runtime_configurable"), {"continuous_batching": False}),),
    "model.runtime_configurable",
    "not_servable",
)
# Serves refused before anything is served, on genai_decoder: (name, package, slots, the one
# request's arrival, code, what). Slots are a whole number from 1 to the batch component's
# max_slots (H124); an arrival is a whole number of steps from 0 (H75).
SERVED_REFUSALS = (
    ("no_slots", "genai_decoder", 0, 0, "H124", "serving over 0 slots"),
    ("fractional_slots", "genai_decoder", 1.5, 0, "H124", "serving over 1.5 slots"),
    ("negative_arrival", "genai_decoder", 1, -1, "H75", "a request arriving at step -1"),
    ("fractional_arrival", "genai_decoder", 1, 0.5, "H75", "a request arriving at step 0.5"),
)


# Refused while serving, unless run apart: requests that share the body get a value of one row
# for all of them, published (D85) or carried (E57). Alone, each request runs; a serve that runs
# them apart passes when each equals its solo run. Suite `fail_closed`
# (`fail_closed/continuous_batching/<case>`).
def _uncut(name: str, variant: Variant, code: str, notes: str) -> BatchCase:
    """Two requests of different prompts sharing one body over two slots, then a third."""
    return BatchCase(
        f"lowered_decoder/{name}",
        "lowered_decoder",
        2,
        _rows("model_io_decoder/greedy_ragged_batch", 0, (0, 0, 1)),
        notes,
        variant=variant,
        refused=code,
    )


UNCUT = (
    _uncut(
        "repeated_published",
        REPEATED_PUBLISHED,
        "D85",
        "the body publishes a value of B * B rows (each row's prompt length, once per row of "
        "the batch) to a per-row output: two requests sharing the body get four rows",
    ),
    _uncut(
        "repeated_carried",
        REPEATED_CARRIED,
        "E57",
        "the body carries a value of B * B rows (each row's prompt length, once per row of "
        "the batch) as a per-row cell's next value: two requests sharing the body get four rows",
    ),
    _uncut(
        "scalar_published",
        SCALAR_PUBLISHED,
        "D85",
        "the body publishes its iteration number, a value of no request axis: no request "
        "can take a row of its own",
    ),
)


def run_case(run_id: str) -> RunCase:
    return next(r for r in RUN_CASES if r.id == run_id)


def requests(case: BatchCase) -> list[dict]:
    """The served requests, in the protocol's form (one prompt row each, plus ``arrival``)."""
    out = []
    for source in case.sources:
        run = run_case(source.run)
        solo = solo_request(run, dict(run.requests[source.request]), source.row)
        solo.pop("session_id", None)
        if source.arrival is not None:
            solo["arrival"] = source.arrival
        out.append(solo)
    return out


def solo_run(case: BatchCase) -> RunCase:
    """Each served request alone, without its arrival: what the rows suite runs."""
    alone = [{k: v for k, v in r.items() if k != "arrival"} for r in requests(case)]
    return RunCase(case.id, case.package, tuple(alone))


def expected(case: BatchCase) -> list[dict] | None:
    """Each request's tokens and finish reason, from its run case's golden (None when a golden
    is missing or was made from another fixture)."""
    out = []
    for source in case.sources:
        golden = goldens.load(source.run)
        if golden is None:
            return None
        if golden["provenance"]["fixture_sha256"] != goldens.fixture_hash(
            run_case(source.run).package
        ):
            return None
        result = golden["results"][source.request]
        out.append(
            {
                "tokens": result["tokens"][source.row],
                "finish_reason": result["finish_reasons"][source.row],
            }
        )
    return out


def schedule_problems(case: BatchCase, served: list[dict]) -> list[str]:
    """What the reported schedule breaks: each request served once, admitted no earlier than
    it arrived, and at its arrival where a slot is free then (without a KV budget, nothing else
    holds it back), slots within range and never shared at once, at most ``slots`` at a time,
    and a freed slot reused where there are more requests than slots."""
    problems = []
    indices = sorted(s.get("index") for s in served)
    if indices != list(range(len(case.sources))):
        return [f"served indices {indices}, expected each of 0..{len(case.sources) - 1} once"]
    spans = []
    for s in served:
        i, arrival = s["index"], case.sources[s["index"]].step
        admitted, finished, slot = s.get("admitted"), s.get("finished"), s.get("slot")
        if not all(isinstance(v, int) for v in (admitted, finished, slot)):
            problems.append(f"request {i}: admitted/finished/slot are not integers")
            continue
        if admitted < arrival:
            problems.append(
                f"request {i} admitted at step {admitted}, before it arrived ({arrival})"
            )
        if finished < admitted:
            problems.append(f"request {i} finished at step {finished}, before its admission")
        if not 0 <= slot < case.slots:
            problems.append(f"request {i} in slot {slot}, outside 0..{case.slots - 1}")
        spans.append((admitted, finished, slot, i))
    if problems:
        return problems
    for step in range(max(f for _, f, _, _ in spans) + 1):
        here = [(slot, i) for a, f, slot, i in spans if a <= step <= f]
        if len(here) > case.slots:
            problems.append(f"step {step}: {len(here)} requests in {case.slots} slots")
        slots = [slot for slot, _ in here]
        if len(set(slots)) != len(slots):
            problems.append(f"step {step}: two requests share a slot ({sorted(here)})")
    if len(spans) > case.slots and len({slot for _, _, slot, _ in spans}) == len(spans):
        problems.append("more requests than slots, yet no slot was reused")
    if case.holds is not None:
        most = max(
            sum(a <= step <= f for a, f, _, _ in spans)
            for step in range(max(f for _, f, _, _ in spans) + 1)
        )
        if most != case.holds:
            problems.append(
                f"at most {most} requests ran at once; the KV budget holds exactly {case.holds}"
            )
    if case.kv_budget is None:
        for a, _, _, i in spans:
            arrival = case.sources[i].step
            held = sum(a2 <= arrival <= f2 for a2, f2, _, j in spans if j != i)
            if a > arrival and held < case.slots:
                problems.append(
                    f"request {i} admitted at step {a}: at its arrival ({arrival}) only {held} "
                    f"of the {case.slots} slots were held, so it is admitted then"
                )
    for s in served:
        i = s["index"]
        if i in case.fit_at_arrival and s["admitted"] != case.sources[i].step:
            problems.append(
                f"request {i} admitted at step {s['admitted']}: its KV fits the budget beside "
                f"the others admitted before it, so it is admitted at its arrival "
                f"({case.sources[i].step})"
            )
    return problems


COUNTERS = ("admitted", "slots_reused", "steps", "bodies", "rows")


def counter_problems(case: BatchCase, served: list[dict]) -> list[str]:
    """What the ``batch_counters`` a serve reports (its totals after the serve, on a freshly
    loaded package) break: every request admitted once; a reused slot for each admission into
    a slot an earlier request held; one run of the loop body per batch step (the requests
    decoding at one step advance together), or, where the case says why they may run apart
    (``apart``), at least one per step and at most one per row; and the steps and rows the
    schedule allows. A request spans the steps from its admission to its finish and runs the
    body at each, except at the last when it ends at its admission, so a count lies between
    the spans without their last step and the spans whole."""
    reports = [((s.get("diagnostics") or {}).get("counters") or {}).get("batching") for s in served]
    if not reports or any(r is None for r in reports):
        return ["a served entry reports no diagnostics.counters.batching"]
    got = reports[-1]
    if any(r != got for r in reports):
        return ["the served entries report different batching counters (totals after the serve)"]
    missing = [k for k in COUNTERS if not isinstance(got.get(k), int)]
    if missing:
        return [f"batching counters lack {', '.join(missing)} (integers)"]
    spans = [(s["admitted"], s["finished"], s["slot"]) for s in served]
    reused = len(spans) - len({slot for _, _, slot in spans})
    whole = {step for a, f, _ in spans for step in range(a, f + 1)}
    cut = {step for a, f, _ in spans for step in range(a, f)}
    problems = []
    if got["admitted"] != len(spans):
        problems.append(f"{got['admitted']} admissions counted for {len(spans)} requests")
    if got["slots_reused"] != reused:
        problems.append(
            f"{got['slots_reused']} slot reuses counted; the schedule reuses slots {reused} times"
        )
    if case.apart is not None:
        if not got["steps"] <= got["bodies"] <= got["rows"]:
            problems.append(
                f"{got['bodies']} runs of the loop body: fewer than the {got['steps']} batch "
                f"steps, or more than the {got['rows']} rows they advanced"
            )
    elif got["bodies"] != got["steps"]:
        problems.append(
            f"{got['bodies']} runs of the loop body in {got['steps']} batch steps: the requests "
            "decoding at one step must share its run (one per step), not run one by one"
        )
    if not len(cut) <= got["steps"] <= len(whole):
        problems.append(
            f"{got['steps']} batch steps counted; the schedule has between {len(cut)} and "
            f"{len(whole)} steps with a request in the body"
        )
    low = sum(f - a for a, f, _ in spans)
    if not low <= got["rows"] <= low + len(spans):
        problems.append(
            f"{got['rows']} rows advanced counted; the schedule allows {low} to {low + len(spans)}"
        )
    return problems


TRACE_KEYS = ("step", "slots", "accepted_len", "live", "bodies")


def trace_problems(case: BatchCase, served: list[dict]) -> list[str]:
    """What the ``batch_trace`` a serve reports breaks, read against its schedule: one record
    per step that ran the loop body, in step order; at each, the slot of every request whose
    span covers the step holds it (a request whose span is one step, which it may end at its
    admission, either holds it or no slot names it) and no other slot holds a request; each
    slot's accepted_len is 1 where it ran the body and 0 where it sat the step out (where the
    body binds it); the liveness bit is on exactly when a later step runs the body; and the
    step ran one body (or, where the case says why its requests may run apart, at least one
    and at most one per request it ran)."""
    traces = [(s.get("diagnostics") or {}).get("batch_trace") for s in served]
    if not traces or any(not isinstance(t, list) for t in traces):
        return ["a served entry reports no diagnostics.batch_trace"]
    trace = traces[-1]
    if any(t != trace for t in traces):
        return ["the served entries report different batch traces (the whole serve's)"]
    if any(not isinstance(r, dict) or sorted(r) != sorted(TRACE_KEYS) for r in trace):
        return [f"a batch_trace record is not {{{', '.join(TRACE_KEYS)}}}"]
    steps = [r["step"] for r in trace]
    if steps != sorted(set(steps)):
        return [f"batch_trace steps {steps} are not increasing"]
    if any(len(r["slots"]) != case.slots or len(r["accepted_len"]) != case.slots for r in trace):
        return [f"a batch_trace record does not list {case.slots} slots"]
    at = {r["step"]: r for r in trace}
    ran: dict[int, list[int]] = {}
    for r in trace:
        for index in r["slots"]:
            if index is not None:
                ran.setdefault(index, []).append(r["step"])
    problems = []
    for s in served:
        i, admitted, finished, slot = s["index"], s["admitted"], s["finished"], s["slot"]
        span = list(range(admitted, finished + 1))
        if ran.get(i, []) != span and not (admitted == finished and i not in ran):
            problems.append(
                f"request {i} (steps {admitted} to {finished}) runs the body at steps "
                f"{ran.get(i, [])} of the trace"
            )
        for step in ran.get(i, []):
            if at[step]["slots"][slot] != i:
                problems.append(f"step {step}: request {i} is not in its slot {slot}")
                break
    for r in trace:
        held = [k for k, index in enumerate(r["slots"]) if index is not None]
        if not held:
            problems.append(f"step {r['step']}: no slot ran the body")
        if case.accepted_len:
            want = [1 if index is not None else 0 for index in r["slots"]]
            if list(r["accepted_len"]) != want:
                problems.append(
                    f"step {r['step']}: accepted_len {r['accepted_len']}, expected {want}"
                )
        later = any(step > r["step"] for step in steps)
        if r["live"] is not later:
            problems.append(
                f"step {r['step']}: liveness bit {r['live']!r}, but the batch "
                f"{'decodes' if later else 'never decodes'} again"
            )
        most = 1 if case.apart is None else max(len(held), 1)
        if not isinstance(r["bodies"], int) or not 1 <= r["bodies"] <= most:
            problems.append(
                f"step {r['step']}: {r['bodies']} runs of the body, expected "
                f"{'one' if most == 1 else f'1 to {most}'}"
            )
    return problems


def result_problems(want: list[dict], served: list[dict]) -> list[str]:
    """Where the served tokens or finish reasons differ from ``want`` (per request index)."""
    problems = []
    by_index = {s["index"]: s for s in served}
    for i, w in enumerate(want):
        got = by_index.get(i)
        if got is None:
            continue
        tokens = [int(t) for t in np.asarray(got.get("tokens") or []).reshape(-1)]
        if tokens != list(w["tokens"]):
            problems.append(f"request {i}: tokens {tokens}, expected {list(w['tokens'])}")
        if got.get("finish_reason") != w["finish_reason"]:
            problems.append(
                f"request {i}: finish reason {got.get('finish_reason')!r}, expected "
                f"{w['finish_reason']!r}"
            )
    return problems


def output_problems(solo: list[dict], served: list[dict]) -> list[str]:
    """Where a served request's outputs or events differ from ``solo[i]``, the run result of
    request ``i`` alone (per request index): the same outputs, each equal exactly (a per-row
    output row by row: one row, or None where it published nothing), and the same event
    outputs with the same emissions."""
    problems = []
    by_index = {s["index"]: s for s in served}
    for i, alone in enumerate(solo):
        got = by_index.get(i)
        if got is None:
            continue
        if not isinstance(got.get("outputs"), dict):
            problems.append(f"request {i}: the served result carries no outputs")
            continue
        mine, theirs = got["outputs"], alone.get("outputs") or {}
        if sorted(mine) != sorted(theirs):
            problems.append(f"request {i}: outputs {sorted(mine)}, expected {sorted(theirs)}")
            continue
        problems += [
            f"request {i}: output {name!r} differs from its solo run"
            for name in sorted(mine)
            if not _same(mine[name], theirs[name])
        ]
        events, alone_events = got.get("events") or {}, alone.get("events") or {}
        if sorted(events) != sorted(alone_events):
            problems.append(
                f"request {i}: event outputs {sorted(events)}, expected {sorted(alone_events)}"
            )
            continue
        problems += [
            f"request {i}: the events of {name!r} differ from its solo run"
            for name in sorted(events)
            if not _same(list(events[name]), list(alone_events[name]))
        ]
    return problems


def _same(a, b) -> bool:
    """Exactly equal: arrays of one dtype and shape, lists entry by entry (None only to None)."""
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b, strict=True))
        )
    if a is None or b is None:
        return a is None and b is None
    a, b = np.asarray(a), np.asarray(b)
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    )
