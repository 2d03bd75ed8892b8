"""The compiled contract checks of an invoke accept exactly what the general checks accept.

Invokes run unrolled checks generated from their ports' contracts (dtype, rank, fixed extents,
shape symbols bound by the first port that has them, request-expanded factors). Here random
contracts and random values go through both, port after port in one component scope, and the
verdicts must agree. Likewise a carried cell's next value is stored at once only when the
recurrence check would pass it.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from reference_runtime import RunError
from reference_runtime.package.model import (
    BoundedRecurrence,
    GrowingRecurrence,
    InvariantRecurrence,
    RequestAlignedLayout,
    RequestExpandedLayout,
    SharedLayout,
    TensorContract,
)
from reference_runtime.workflow.cells import check_recurrence
from reference_runtime.workflow.compiled import _contract_lines, _keeps_recurrence
from reference_runtime.workflow.tensors import Symbols, checker

DIMS = st.sampled_from([1, 2, 4, "a", "a", "b"])
DTYPES = ["int64", "float32"]


@st.composite
def contracts(draw):
    rank = draw(st.integers(0, 3))
    shape = tuple(draw(DIMS) for _ in range(rank)) if draw(st.booleans()) else None
    layout = SharedLayout(kind="shared")
    if rank and draw(st.booleans()):
        axis = draw(st.integers(0, rank - 1))
        factor = draw(st.sampled_from([1, 2]))
        layout = (
            RequestExpandedLayout(kind="request_expanded", axis=axis, factor=factor)
            if factor > 1
            else RequestAlignedLayout(kind="request_aligned", axis=axis)
        )
    return TensorContract(dtype=draw(st.sampled_from(DTYPES)), rank=rank, shape=shape,
                          batch_layout=layout)  # fmt: skip


@st.composite
def ports(draw):
    """A contract and a value that mostly has its dtype and rank (so extents get compared)."""
    contract = draw(contracts())
    rank = contract.rank if draw(st.integers(0, 9)) else draw(st.integers(0, 3))
    dtype = contract.dtype if draw(st.integers(0, 9)) else draw(st.sampled_from(DTYPES))
    shape = tuple(draw(st.sampled_from([1, 2, 3, 4])) for _ in range(rank))
    return contract, np.zeros(shape, dtype)


def general(ports) -> bool:
    scope = Symbols()
    try:
        for contract, value in ports:
            checker(contract)("v", value, scope, "here")
    except RunError as err:
        assert err.code == "H84"
        return False
    return True


def compiled(ports) -> bool:
    names = [f"a{i}" for i in range(len(ports))]
    namespace: dict = {}
    symbols: dict = {}
    lines = [f"def check({', '.join(names)}):"]
    for name, (contract, _) in zip(names, ports, strict=True):
        lines += _contract_lines(name, contract, symbols, namespace, "return False")
    lines.append("    return True")
    exec("\n".join(lines), namespace)
    return namespace["check"](*(value for _, value in ports))


@settings(max_examples=600, deadline=None)
@given(st.lists(ports(), min_size=1, max_size=3))
def test_compiled_checks_agree_with_the_general_checks(ports):
    assert compiled(ports) == general(ports)


def test_the_agreement_is_not_vacuous():
    """Both verdicts occur among simple cases, and a symbol shared by two ports is compared."""
    c = TensorContract(dtype="int64", rank=1, shape=("a",))
    same = [(c, np.zeros(2, np.int64)), (c, np.zeros(2, np.int64))]
    different = [(c, np.zeros(2, np.int64)), (c, np.zeros(3, np.int64))]
    assert compiled(same) is general(same) is True
    assert compiled(different) is general(different) is False
    expanded = TensorContract(
        dtype="int64", rank=1, shape=("a",),
        batch_layout=RequestExpandedLayout(kind="request_expanded", axis=0, factor=2),
    )  # fmt: skip
    odd = [(expanded, np.zeros(3, np.int64))]
    assert compiled(odd) is general(odd) is False
    # A symbol bound by an earlier port, met again on a request-expanded axis: rows of 2.
    for extent, verdict in [(4, True), (2, False), (5, False)]:
        ports = [(c, np.zeros(2, np.int64)), (expanded, np.zeros(extent, np.int64))]
        assert compiled(ports) is general(ports) is verdict


@st.composite
def carried_updates(draw):
    """A cell (recurrence, contract rank), its old and next values, and its loop-entry bounds
    (``cells.recurrence_bounds``: increment, max, largest max, the one increment or None)."""
    rank = draw(st.integers(1, 3))
    axis = draw(st.integers(0, rank))  # rank itself: an axis the contract does not have
    kind = draw(st.sampled_from(["invariant", "growing", "bounded"]))
    if kind == "invariant":
        recurrence = InvariantRecurrence(kind="invariant")
    elif kind == "growing":
        recurrence = GrowingRecurrence(kind="growing", axis=axis, increment="i", max="m")
    else:
        recurrence = BoundedRecurrence(kind="bounded", axis=axis, max="m")
    contract = TensorContract(dtype="int64", rank=rank)
    extents = st.integers(0, 4)
    old = tuple(draw(extents) for _ in range(rank))
    new_rank = rank if draw(st.integers(0, 9)) else draw(st.integers(1, 3))
    new = tuple(
        old[d] + draw(st.sampled_from([0, 0, 1, 2, -1])) if d < rank else draw(extents)
        for d in range(new_rank)
    )
    new = tuple(max(0, e) for e in new)
    dtype = "int64" if draw(st.integers(0, 9)) else "int32"
    step = draw(st.sampled_from([None, 0, 1, 2]))  # None: per-row increments
    largest = draw(st.sampled_from([2, 3, 5]))  # every growing or bounded cell has a max
    increment = np.array([1, 2] if step is None else [step], np.int64)
    bounds = (increment, np.array([largest], np.int64), largest, step)
    return recurrence, contract, np.zeros(old, np.int64), np.zeros(new, dtype), bounds


@settings(max_examples=800, deadline=None)
@given(carried_updates(), st.booleans())
def test_a_carried_value_is_stored_at_once_only_when_the_recurrence_check_passes(update, grouped):
    from types import SimpleNamespace

    recurrence, contract, old, new, bounds = update
    cell = SimpleNamespace(recurrence=recurrence, contract=contract)
    condition = _keeps_recurrence("c", cell)
    if condition is None:
        return
    same_dtype = new.dtype is old.dtype or new.dtype == old.dtype
    fast = same_dtype and eval(condition, {}, {"old": old, "new": new, "bounds": {"c": bounds}})
    try:
        check_recurrence("c", cell, old, new, bounds, grouped, "loop")
    except RunError as err:
        assert err.code == "E57"
        assert not fast, f"stored at once but the check says: {err.message}"
    else:
        if isinstance(recurrence, InvariantRecurrence | BoundedRecurrence) and same_dtype:
            assert fast  # the common case is not sent to the plain update
