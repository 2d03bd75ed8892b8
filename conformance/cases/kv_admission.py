"""KV admission cases: a runtime declaring ``kv_admission`` takes a KV byte budget as a ``load``
option (``{"kv_budget_bytes": N}``) and refuses, before running anything, a request whose KV
does not fit (``H113``); a budget it cannot take is refused at load (``H114``).

The budgets follow from how the fixtures are built (docs/runtime.md, "KV admission", defines
the bytes): ``arithmetic_decoder`` holds one float32 KV cell ``[batch, 1, S, 2]``, 8 bytes per
row and token position; ``genai_decoder_gqa`` holds four float32 cells ``[batch, 2, S, 8]``,
256 bytes per token position of its one-row conversation. ``S`` is the prompt's width (a
session turn's prompt is the whole conversation) plus ``max_new_tokens``.

Suite ``kv_admission`` (``kv_admission/<case>``): the case's requests run on a package loaded
with the budget, and again, without the refused ones, on one loaded without it. Each request
over the budget is refused (naming ``H113`` where the runtime declares ``rule_codes``) and
publishes nothing; every other request gives what it gives unbudgeted (so a refused session
turn changed nothing the later turns see), and where the package's results have a formula
(``arithmetic_decoder``), also the formula's. Suite ``fail_closed``
(``fail_closed/kv_admission/<case>``): a load with a budget that is not bytes, or on a package
whose KV cannot be bounded, is refused at load with ``H114``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fixtures.generators import RUN_CASES

from .. import goldens
from .mutations import Delete, Mutation, Set

FEATURE = "kv_admission"
OPTION = "kv_budget_bytes"


def arithmetic_bytes(rows: int, positions: int) -> int:
    """``arithmetic_decoder``'s KV: float32 ``[rows, 1, positions, 2]``."""
    return 4 * rows * 1 * positions * 2


def gqa_bytes(positions: int) -> int:
    """``genai_decoder_gqa``'s KV: four float32 cells ``[1, 2, positions, 8]``."""
    return 4 * (4 * 2 * positions * 8)


def speculative_bytes(rows: int, width: int, new: int) -> int:
    """``speculative_block``'s and ``speculative_lowered``'s KV: two float32 cells ``[rows, 1, S, 1]`` that the speculative
    block verifies into and rolls back, so ``S = width + 1 + (K + 1) * new`` with ``K``, the
    package's ``max_proposal_width``, 4 (docs/speculative.md)."""
    return 2 * 4 * rows * (width + 1 + 5 * new)


@dataclass(frozen=True)
class AdmissionCase:
    id: str
    package: str
    budget: int
    requests: tuple[dict, ...]  # in the run-case form (session_id "new" / "same")
    refused: tuple[int, ...]  # the requests over the budget
    notes: str
    formula: bool = False  # the package's run cases give a formula for its results
    tags: tuple[str, ...] = field(default_factory=tuple)
    # A valid variant of the package to load instead of the package itself (its mutation).
    variant: Mutation | None = None


def _request(prompt, new, session=None) -> dict:
    out = {"prompt": prompt, "inputs": {}, "max_new_tokens": new}
    if session is not None:
        out["session_id"] = session
    return out


TWO_ROWS = [[3, 1, 4], [2, 7, 1]]
NINE_TOKENS = [[3, 1, 4, 1, 5, 9, 2, 6, 5], [2, 7, 1, 8, 2, 8, 1, 8, 2]]

# arithmetic_decoder with its KV cell's axis 1 the symbol `num_end`, which the application
# input `end_ids` ([num_end]) binds: the cell is declared to hold one [S, 2] plane per end id
# a request passes (one by default), so the KV it needs grows with the request's end ids.
KV_AXIS_BOUND_BY_AN_INPUT = Mutation(
    "",
    "arithmetic_decoder",
    (Set(("pipeline", "workflow", "state", "cache", "contract", "shape", 1), "num_end"),),
    "pipeline.workflow.state.cache",
    "kv_axis_bound_by_end_ids",
)
# arithmetic_decoder with its KV cell's request axis the symbol `slots`, which no input
# declares: the request axis is sized by the request's rows (docs/runtime.md, "KV admission").
KV_REQUEST_AXIS_OF_ITS_OWN = Mutation(
    "",
    "arithmetic_decoder",
    (Set(("pipeline", "workflow", "state", "cache", "contract", "shape", 0), "slots"),),
    "pipeline.workflow.state.cache",
    "kv_request_axis_of_its_own",
)
TWO_END_IDS = {"end_ids": np.array([15, 14], dtype=np.int64)}

CASES = (
    AdmissionCase(
        id="arithmetic_decoder/fits_and_overflows",
        package="arithmetic_decoder",
        budget=arithmetic_bytes(2, 3 + 6),
        requests=(
            _request(TWO_ROWS, 6),  # exactly the budget
            _request(TWO_ROWS, 7),  # one position too many
            _request([[3, 1, 4]], 10),  # one row, more tokens: fits
            _request([*TWO_ROWS, [1, 1, 1]], 6),  # a third row does not
            _request(TWO_ROWS, 5),
            _request(NINE_TOKENS, 0),  # 9 prompt tokens and none new: exactly the budget
        ),
        refused=(1, 3),
        notes=f"budget {arithmetic_bytes(2, 9)} bytes: 2 rows x (3 + 6) positions x 8 bytes "
        "fit exactly; one more position or one more row does not; 2 rows of 9 prompt tokens "
        "and max_new_tokens 0 fit exactly (no new position is counted)",
        formula=True,
    ),
    AdmissionCase(
        id="arithmetic_decoder/kv_axis_bound_by_an_input",
        package="arithmetic_decoder",
        budget=arithmetic_bytes(2, 3 + 6),
        requests=(
            _request(TWO_ROWS, 6),  # one end id: [2, 1, 9, 2], exactly the budget
            {**_request(TWO_ROWS, 6), "inputs": TWO_END_IDS},  # two: [2, 2, 9, 2]
            _request(TWO_ROWS, 7),
            _request([[3, 1, 4]], 10),
        ),
        refused=(1, 2),
        notes=f"the KV cell is [batch, num_end, S, 2], num_end bound by the input end_ids: "
        f"budget {arithmetic_bytes(2, 9)} bytes holds 2 rows x 1 end id x 9 positions; 2 "
        "end ids double it (refused before anything runs: the graph's cache has one plane, "
        "so such a request could not run either), as 10 positions overflow it",
        variant=KV_AXIS_BOUND_BY_AN_INPUT,
    ),
    AdmissionCase(
        id="arithmetic_decoder/request_axis_no_input_declares",
        package="arithmetic_decoder",
        budget=arithmetic_bytes(2, 3 + 6),
        requests=(
            _request(TWO_ROWS, 6),  # [2, 1, 9, 2]: exactly the budget
            _request([*TWO_ROWS, [1, 1, 1]], 6),  # a third row does not fit
            _request([[3, 1, 4]], 10),
            _request(TWO_ROWS, 7),
        ),
        refused=(1, 3),
        notes="the KV cell is [slots, 1, S, 2], `slots` a symbol no input declares on the "
        "cell's request axis: it counts the request's rows, as `batch` does",
        formula=True,
        variant=KV_REQUEST_AXIS_OF_ITS_OWN,
    ),
    AdmissionCase(
        id="counting_loop/zero_budget_without_kv",
        package="counting_loop",
        budget=0,
        requests=tuple(
            request
            for case in RUN_CASES
            if case.id == "counting_loop/rows_finish_at_different_times"
            for request in case.requests
        ),
        refused=(),
        notes="the package has no service-group state: every request needs 0 bytes of KV, "
        "which a budget of 0 admits",
        formula=True,
    ),
    AdmissionCase(
        id="genai_decoder_gqa/session_overflow",
        package="genai_decoder_gqa",
        budget=gqa_bytes(18),
        requests=(
            _request([[5, 6, 7]], 4, "new"),  # 3 + 4 = 7 positions
            _request([[9, 10]], 10, "same"),  # 7 stored + 2 + 10 = 19: refused
            _request([[9, 10]], 4, "same"),  # 7 + 2 + 4 = 13
            _request([[11]], 4, "same"),  # 13 + 1 + 4 = 18: exactly the budget
            _request([[12]], 4, "same"),  # 18 + 1 + 4 = 23: refused
        ),
        refused=(1, 4),
        notes=f"budget {gqa_bytes(18)} bytes (18 positions): a turn whose stored conversation, "
        "new tokens and max_new_tokens overflow it is refused, and the next turn continues the "
        "session as if the refused one had never been sent",
        tags=("session",),
    ),
    *(
        AdmissionCase(
            id=f"{package}/verification_capacity",
            package=package,
            budget=speculative_bytes(1, 3, 4),
            requests=(
                _request([[3, 1, 4]], 4),  # 8 x (3 + 1 + 5 x 4) = 192: exactly the budget
                _request([[3, 1, 4]], 5),  # 232: one new token more is 5 positions more
                _request([[3, 1, 4], [2, 7, 1]], 4),  # 384: a second row
                _request([[3, 1, 4, 1, 5, 9, 2, 6]], 3),  # 8 x (8 + 1 + 5 x 3) = 192: exactly
                _request([[3, 1, 4, 1, 5, 9, 2, 6, 5]], 3),  # one prompt token more
            ),
            refused=(1, 2, 4),
            formula=True,
            notes=f"budget {speculative_bytes(1, 3, 4)} bytes: the target's and the draft's "
            "caches (float32 [batch, 1, S, 1] each) are rolled back by the speculative block "
            f"({rollback}), so each holds W + 1 + (K + 1) x max_new_tokens positions (K = "
            "max_proposal_width 4), not W + max_new_tokens: one row of 3 prompt tokens and 4 "
            "new ones, or of 8 and 3, fit exactly",
            tags=("speculative",),
        )
        for package, rollback in (
            ("speculative_block", "rollback_state names both cells"),
            (
                "speculative_lowered",
                "rollback_state names the target's service group and the draft's cell",
            ),
        )
    ),
)

# Budgets a runtime must refuse at load (H114), on arithmetic_decoder.
BAD_BUDGETS = {"negative_budget": -1, "non_integer_budget": 1.5}

# A valid package whose KV has an extent no input bounds (a symbol only the decoder's own
# output binds): it runs without a budget, and refuses one (H114).
UNBOUNDED_KV = Mutation(
    "H114",
    "arithmetic_decoder",
    (Set(("pipeline", "workflow", "state", "cache", "contract", "shape", 1), "heads"),),
    "pipeline.workflow.state.cache",
    "unbounded_kv",
)


# A valid package whose KV cell declares a rank but no shape: it runs without a budget, and
# refuses one (H114).
SHAPELESS_KV = Mutation(
    "H114",
    "arithmetic_decoder",
    (Delete(("pipeline", "workflow", "state", "cache", "contract", "shape")),),
    "pipeline.workflow.state.cache",
    "kv_cell_without_shape",
)
# A valid package whose KV grows up to a value the run computes (the prefill's capacity) with
# no input bounding the new tokens (its max_new_tokens input made opaque): it runs without a
# budget, and refuses one (H114).
UNBOUNDED_GROWTH = Mutation(
    "H114",
    "lowered_decoder",
    (
        Set(
            ("pipeline", "workflow", "inputs", "request.max_new_tokens", "role"), {"kind": "opaque"}
        ),
        Set(
            ("pipeline", "workflow", "inputs", "request.max_new_tokens", "source"),
            {"kind": "application", "name": "max_new_tokens"},
        ),
    ),
    "pipeline.workflow.state.kv_0",
    "kv_growth_no_input_bounds",
)
# Every package whose KV cannot be bounded, each a fail-closed case.
UNBOUNDABLE = (UNBOUNDED_KV, SHAPELESS_KV, UNBOUNDED_GROWTH)


def formula(package: str):
    """The results formula of one of ``package``'s run cases (it is a function of the
    request), or None."""
    return next((c.expected for c in RUN_CASES if c.package == package and c.expected), None)


def expected_results(case: AdmissionCase, requests) -> dict:
    """The formula's results for ``requests``, as a golden (``goldens.differences`` form)."""
    expected = formula(case.package)
    return {"results": [goldens.encode_result(expected(dict(r))) for r in requests]}
