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

from fixtures.generators import RUN_CASES

from .. import goldens
from .mutations import Mutation, Set

FEATURE = "kv_admission"
OPTION = "kv_budget_bytes"


def arithmetic_bytes(rows: int, positions: int) -> int:
    """``arithmetic_decoder``'s KV: float32 ``[rows, 1, positions, 2]``."""
    return 4 * rows * 1 * positions * 2


def gqa_bytes(positions: int) -> int:
    """``genai_decoder_gqa``'s KV: four float32 cells ``[1, 2, positions, 8]``."""
    return 4 * (4 * 2 * positions * 8)


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


def _request(prompt, new, session=None) -> dict:
    out = {"prompt": prompt, "inputs": {}, "max_new_tokens": new}
    if session is not None:
        out["session_id"] = session
    return out


TWO_ROWS = [[3, 1, 4], [2, 7, 1]]

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
        ),
        refused=(1, 3),
        notes=f"budget {arithmetic_bytes(2, 9)} bytes: 2 rows x (3 + 6) positions x 8 bytes "
        "fit exactly; one more position or one more row does not",
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


def formula(package: str):
    """The results formula of one of ``package``'s run cases (it is a function of the
    request), or None."""
    return next((c.expected for c in RUN_CASES if c.package == package and c.expected), None)


def expected_results(case: AdmissionCase, requests) -> dict:
    """The formula's results for ``requests``, as a golden (``goldens.differences`` form)."""
    expected = formula(case.package)
    return {"results": [goldens.encode_result(expected(dict(r))) for r in requests]}
