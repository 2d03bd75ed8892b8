"""Mutation testing of the reference runtime: does the conformance suite catch its bugs?

    python tools/mutation.py [--target PATH]... [--operator OP]... [--sample N --seed S]
                             [--no-coverage] [--max-cases N] [--hand-written | --no-hand-written]
                             [--mutant ID]... [--case PATTERN]... [--jobs N] [--cold]
                             [--report-dir DIR] [--list] [--pin] [--floor]

It generates *mutants* of ``reference_runtime/`` (one small change of its source each),
certifies each with ``conformance certify``'s API on the cases likely to notice it, and writes
``mutation.md`` and ``mutation.json`` into ``--report-dir`` (default ``mutation-report/``).
Nothing in the runtime knows it is being tested, and its files are never edited: the tool
copies the ``reference_runtime`` package into a temporary folder and imports that copy once
(with the conformance adapter over it, running no case, so no cache is warm); each mutant is
then certified in a child process, ``--jobs`` of them at a time (default: the CPU count). The
judge (``conformance/``) is always the repository's own. ``--target`` takes modules or folders
under ``reference_runtime/`` (default: the interpreter and the validator; ``--target ''``:
every module but those certification does not judge, ``EXCLUDED``).

A child applies its mutant one of two ways. *Warm* (a change inside a function body, nested
functions included): the child is forked from the tool, which compiled the mutated module and
found the new code of the outermost function holding the change; the child gives it (and the
functions nested in it) to the live function objects (``function.__code__``), so every
reference to them (imports by name, bound methods, decorators' wrappers, registries) runs the
mutant. *Cold* (everything else: module- or class-level code, decorators and default arguments
of those functions, code that ran while the runtime was imported, a live nested function whose
closure would change): the child is a fresh interpreter whose import path puts a copy holding
the mutated module first. ``--cold`` takes the cold path for every mutant (tests/
test_mutation.py checks that both give the same verdicts). The report names each mutant's path.

Mutants, by operator (``--operator``):

- ``arithmetic``: ``+`` and ``-`` swapped, ``*`` to ``/``, ``/`` and ``//`` to ``*``, ``%`` to
  ``//``, ``&`` and ``|`` swapped (also in augmented assignments), ``-x`` and ``~x`` to ``x``;
- ``comparison``: ``<`` and ``<=``, ``>`` and ``>=``, ``==`` and ``!=``, ``in`` and ``not in``,
  ``is`` and ``is not`` swapped;
- ``boolean``: ``and`` and ``or`` swapped, ``not x`` to ``x``;
- ``constant``: an integer ``n`` to ``n + 1``, ``True`` and ``False`` swapped (not a ``strict=``
  flag, which only checks lengths the code makes equal), a string compared
  with ``==`` / ``!=`` or searched for with ``in`` replaced by one nothing equals, a string
  searched in (``x in "iu"``) by the empty string (nothing but itself is in it);
- ``off_by_one``: a computed slice or ``range`` bound ``b`` to ``b + 1``;
- ``removed_statement``: a call statement, an augmented assignment, a store into an attribute or
  an item, a ``break`` or ``continue`` replaced by ``pass``;
- ``removed_check``: the condition of an ``if`` whose body raises, returns, breaks or continues
  replaced by ``False``;
- ``hand_written``: the faults of ``HAND_WRITTEN`` below (plausible bugs written by hand, each
  naming the case that must catch it).

Type annotations, docstrings and other strings are never mutated. A mutant's id is stable under
edits elsewhere: ``FILE::FUNCTION::OPERATOR#N`` (the N-th mutant of that operator in that
function or class body, in source order; ``hand:NAME`` for a hand-written one); the report also
gives its line.

Which cases certify a mutant: its module's group (``GROUPS``) names the runtime specs and suites
that can notice it (``--case`` keeps only the cases whose id matches one of its patterns). By
default a *control run* first certifies the unmutated copy on every one of them (over
``--jobs`` children), recording which lines of the runtime each case runs (a ``sys.settrace``
tracing only the runtime's frames; the runtime's caches but ``KEPT_CACHES`` are cleared before
each case, so each records the cached computations it needs); a mutant then runs only the
cases that run one of its lines (all of them for code run at import or while a runtime opens),
the cheapest and those running the rare lines near the change (``NEAR``) in turn, and stops at
the first failing case (``certify(..., fail_fast=True)``); no case at all when none runs them.
The cases that killed earlier mutants of the same function, then of the same module, are tried
first (at most ``HINTS``): the verdict is the same in any order, only sooner. A case that fails
in the control run is never used. The control run is cached in ``--report-dir``
(``control-KEY.json.gz``, KEY a hash of the runtime's sources, conformance/, fixtures/,
goldens/, the versions of Python, numpy, onnx and ONNX Runtime, and ``CONTROL_FORMAT``): a run
with the same KEY reuses the cases it holds and runs only those it lacks (the progress says
which). ``--no-coverage`` skips the control run: the group's suites
run in order (a validator module's own rule families first among the fail-closed cases), at
most ``--max-cases`` of them, and a kill counts once the killing case passes on the unmutated
copy.

Verdicts: ``killed`` (a case failed, or the runtime no longer imports); ``timeout`` (the mutant
used more than 30 CPU seconds plus 5 times what its cases took in the control run, or by a
fixed estimate per suite without one, or 10 times that in wall-clock time): counted as killed,
as mutation testing does, but reported apart; ``survived`` (every case passed; ``no case
executes it`` when no case of the control run reached it); ``equivalent`` (listed in
``tools/mutation_equivalent.yaml`` with the reason it cannot change behaviour and the change it
was judged on; not run; an entry whose id now names another change, the code having moved under
it, stops the tool until it is judged again: ``--pin`` prints an entry). The kill rate is
(killed + timeout) / (all - equivalent).

``--sample N --seed S`` certifies N generated mutants chosen by hashing their ids with the seed
(a change elsewhere leaves the choice of the others alone), and every hand-written one.
``--floor`` runs the CI sample pinned in ``tools/mutation_floor.yaml`` (every hand-written
mutant and the generated ones it lists by id) and fails when its kill rate is
below the committed floor (which may only rise). ``--list`` prints the mutants without running
them. Mutants run hand-written first, then in the order of the hash of (seed, id), so an
interrupted run (Ctrl-C, SIGTERM), which reports the mutants it certified, has a sample spread
over every module. Progress goes to stderr with the elapsed time (and each mutant's wall-clock
and CPU seconds); a summary ends the run. Exit status: 0 when the run completed (with
``--floor``: and the rate is not below the floor), 1 otherwise, 2 on a usage error. Needs
``os.fork`` (Linux, macOS); CPU-time limits read ``/proc`` (elsewhere, the wall-clock limit
alone applies).
"""

from __future__ import annotations

import argparse
import ast
import compileall
import contextlib
import copy
import difflib
import fnmatch
import functools
import gc
import gzip
import hashlib
import importlib
import inspect
import json
import os
import py_compile
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
import types
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy
import onnx
import onnxruntime
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repository: conformance/, fixtures/, goldens/

from conformance.cases.catalogue import catalogue  # noqa: E402
from conformance.certify import catalogue_size, certify, judge  # noqa: E402

PACKAGE = "reference_runtime"
EQUIVALENT_FILE = ROOT / "tools" / "mutation_equivalent.yaml"
FLOOR_FILE = ROOT / "tools" / "mutation_floor.yaml"
OPERATORS = (
    "arithmetic",
    "comparison",
    "boolean",
    "constant",
    "off_by_one",
    "removed_statement",
    "removed_check",
    "hand_written",
)
# Not what certification judges: the command line; the renderer of docs/rules.md and the finder
# of the sites enforcing each rule that it lists (only tools/generate_docs.py runs them;
# tests/test_generated_files.py and tests/test_rule_catalogue.py hold the document to them);
# and the generator of schema.json (only tools/generate_schema.py runs it: loading reads the
# committed schema.json, which tests/test_generated_files.py holds to the generator); and the
# writing of a run's outputs to files (``run --out``), which only the command line does.
EXCLUDED = (
    "cli.py",
    "__main__.py",
    "saving.py",
    "package/rules/catalogue_doc.py",
    "package/rules/enforcement.py",
    "package/schema.py",
)
# The interpreter and the validator: the scope, and the CI sample's.
DEFAULT_TARGETS = (
    "workflow/",
    "sessions.py",
    "results.py",
    "engine.py",
    "requests.py",
    "package/",
)

PLAIN, NATIVE, COMPILED = "reference:plain", "reference:native:plain", "reference"
COMPILED_NATIVE = "reference:native"
LOAD_SUITES = ("acceptance", "fail_closed")
# Every suite that runs requests (tests/test_mutation.py holds GROUPS to the catalogue's suites:
# each suite is tried for some group, and no group names a suite the catalogue lacks).
RUN_SUITES = (
    "golden",
    "fail_closed",
    "determinism",
    "rows",
    "parity",
    "sampling",
    "component_sessions",
    "contract_counters",
    "kv_admission",
    "continuous_batching",
    "batch_counters",
    "batch_trace",
    "drafted",
)
# The modules of package/ that the interpreter and the executors also use at run time (the
# data they share with the validator, the typed document and its defaults, what the runtime
# contracts resolve, the Package that resolves artifact paths): run suites judge them as well
# as load-time ones.
SHARED_WITH_RUN_TIME = (
    "package/abis.py",
    "package/artifacts.py",
    "package/load.py",
    "package/model.py",
    "package/preprocessing.py",
    "package/runtime_contracts.py",
    "package/speculative_block.py",
    "package/visit.py",
    "package/rules/batching.py",
)
# Module groups: (path prefixes under reference_runtime/, [(runtime spec, suites)]). The first
# group whose prefix matches a file decides; suites in the order they are tried without coverage.
GROUPS = (
    (
        "compiled interpreter",
        ("workflow/compiled.py", "codegen.py"),
        ((COMPILED, RUN_SUITES), (COMPILED_NATIVE, ("executor",))),
    ),
    (
        "native executor",
        ("executors/native/",),
        ((NATIVE, ("golden", "executor", "parity", "component_sessions")),),
    ),
    ("lowering", ("package/lowering/",), ((PLAIN, (*LOAD_SUITES, *RUN_SUITES)),)),
    ("shared with run time", SHARED_WITH_RUN_TIME, ((PLAIN, (*LOAD_SUITES, *RUN_SUITES)),)),
    ("validator", ("package/",), ((PLAIN, (*LOAD_SUITES, "golden")),)),
    (
        "executors",
        ("executors/",),
        ((PLAIN, (*LOAD_SUITES, *RUN_SUITES)), (NATIVE, ("executor",))),
    ),
    ("interpreter", ("",), ((PLAIN, (*RUN_SUITES, "acceptance")), (NATIVE, ("executor",)))),
)
# The rule families (the first letter of a rule code) each validator module enforces: without
# coverage, a mutant there tries the fail-closed cases of its families first.
STEP_RULES = ("steps", "scope", "invokes", "loops", "branches", "emits", "flow")
FAMILIES = {
    "package/parse.py": "A",
    "package/structure.py": "A",
    "package/revisions.py": "A",
    "package/rules/inputs.py": "B",
    "package/rules/components.py": "C",
    **{f"package/rules/{name}.py": "D" for name in STEP_RULES},
    "package/rules/state.py": "E",
    "package/rules/speculative.py": "F",
    "package/rules/adapters.py": "G",
    "package/rules/admission.py": "H",
    "package/rules/files.py": "H",
}
# Seconds a case of each suite takes, roughly (the order and time limits without coverage).
SUITE_SECONDS = {
    "acceptance": 0.1,
    "golden": 0.1,
    "fail_closed": 0.1,
    "executor": 0.1,
    "determinism": 0.2,
    "parity": 0.2,
    "rows": 0.3,
    "sampling": 1.0,
    "component_sessions": 0.3,
    "contract_counters": 0.3,
    "kv_admission": 0.3,
    "continuous_batching": 1.0,
    "batch_counters": 1.0,
    "batch_trace": 1.0,
    "drafted": 0.5,
}
# A mutant's limit in CPU seconds: BASE_TIMEOUT plus TIMEOUT_FACTOR times what its cases took
# (in the control run, or by SUITE_SECONDS); and WALL_FACTOR times that in wall-clock time
# (a mutant that hangs without computing).
BASE_TIMEOUT, TIMEOUT_FACTOR, WALL_FACTOR = 30.0, 5.0, 10.0
# A mutant tries first at most HINTS of the cases that killed mutants of its function or module
# (killers cluster: the checks of one function are mostly caught by the same few cases).
HINTS = 3
# A mutant's cases are taken in turn cheapest first and by how rarely cases run the lines from
# its change to NEAR lines past it (1/n for a line n cases run, summed).
NEAR = 12
# What the control run records and how (part of its cache key): change it with either.
CONTROL_FORMAT = "lines-2"
# The runtime's cached functions (functools.cache / lru_cache) whose results the control run
# keeps from one case to the next: compiling the document schema costs about 0.3 s, and its
# few lines run in every load. Every other cache is cleared before each case, so that each
# case records the lines of the cached computations it needs, not only the first case to
# need them in its process (which alone would then be a candidate for their mutants).
KEPT_CACHES = ("package/structure.py::_validator",)


@dataclass(frozen=True)
class HandWritten:
    """A fault written by hand: ``old`` (exactly once in ``file``) becomes ``new``."""

    name: str
    file: str
    old: str
    new: str
    description: str
    caught_by: tuple[str, str]  # (runtime spec, a case that must fail)


HAND_WRITTEN = (
    HandWritten(
        "emit_off_by_one",
        "workflow/outputs.py",
        '            if step.mode == "append":\n                streams[r] = _append(',
        "            cut = chunk_axis if chunk_axis is not None else chunk.ndim - 1\n"
        "            chunk = np.take(chunk, np.arange(max(0, chunk.shape[cut] - 1)), axis=cut)\n"
        '            if step.mode == "append":\n                streams[r] = _append(',
        "per-row emits drop the last entry of every chunk they publish",
        (PLAIN, "golden/counting_loop/rows_finish_at_different_times"),
    ),
    HandWritten(
        "skip_inactive_merge",
        "workflow/cells.py",
        "values[name] = merge_inactive(name, cell, old, new, merge, where)",
        "values[name] = new",
        "inactive rows are not merged back after a loop body",
        (PLAIN, "golden/counting_loop/rows_finish_at_different_times"),
    ),
    HandWritten(
        "predicate_after_body",
        "workflow/interpreter.py",
        "mask = self.predicate(step, frame, where, index)",
        "mask = None if index == 0 else self.predicate(step, frame, where, index)",
        "the loop predicate is tested after the body instead of before",
        (PLAIN, "golden/counting_loop/predicate_false_at_entry"),
    ),
    HandWritten(
        "session_not_saved",
        "sessions.py",
        "self._get(session_id).update(values)",
        "self._get(session_id)",
        "session-scoped cells are not stored after a run",
        (PLAIN, "golden/session_counter/three_runs"),
    ),
    HandWritten(
        "native_falls_back_to_ort",
        "executors/__init__.py",
        'ONNX_EXECUTORS = {"ort": OrtExecutor, "native": NativeExecutor}',
        'ONNX_EXECUTORS = {"ort": OrtExecutor, "native": OrtExecutor}',
        "executor='native' silently runs ONNX Runtime",
        (NATIVE, "executor/counting_loop/rows_finish_at_different_times"),
    ),
    HandWritten(
        "wrong_default_broadcast",
        "workflow/inputs.py",
        "return tuple(1 if extent is None else extent for extent in resolved)",
        "return tuple(d if isinstance(d, int) else 1 for d in contract.shape)",
        "literal defaults are not broadcast to the bound batch",
        (PLAIN, "golden/counting_loop/rows_finish_at_different_times"),
    ),
    HandWritten(
        "speculative_rollback_keeps_rejected",
        "executors/speculative.py",
        "mask[r, past + keep[r] :] = 0",
        "mask[r, past + keep[r] : past + keep[r]] = 0",
        "a speculative step leaves the target's rejected positions attended (no rollback)",
        (PLAIN, "golden/speculative_block/greedy_ragged_batch"),
    ),
    HandWritten(
        "serve_pads_right",
        "workflow/batching.py",
        "    return xp.concatenate((xp.zeros(shape, dtype=value.dtype), value), axis=axis)",
        "    return xp.concatenate((value, xp.zeros(shape, dtype=value.dtype)), axis=axis)",
        "a served batch pads shorter rows' KV on the right instead of the left",
        (PLAIN, "rows/continuous_batching/genai_decoder/staggered_ragged"),
    ),
)


class MutationError(Exception):
    """A problem with the tool's inputs (a target, the equivalents file, a hand-written mutant):
    reported in one line, exit status 2."""


@dataclass
class Mutant:
    id: str
    file: str  # relative to reference_runtime/
    line: int
    col: int
    end_line: int
    operator: str
    description: str
    source: str  # the mutated module
    import_time: bool  # the change runs when the module is imported
    function: int | None  # the first line of the function holding it (with its decorators)
    caught_by: tuple[str, str] | None = None
    codes: frozenset[str] = frozenset()  # the rule codes its function names
    # The lines whose execution runs the changed code (the changed node's; a hand-written
    # mutant's: its whole function's), and the outermost function holding the change, (name,
    # first line) as its code object has them (None at module or class level): the warm path
    # patches that function's code.
    span: tuple[int, int] = (0, 0)
    top: tuple[str, int] | None = None


@dataclass
class Outcome:
    id: str
    file: str
    line: int
    operator: str
    description: str
    status: str  # killed | timeout | survived | equivalent
    case: str = ""  # the case that killed it
    spec: str = ""
    got: str = ""
    note: str = ""
    cases_run: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # the CPU time of its children
    diff: str = ""
    path: str = ""  # warm (its function's code patched) or cold: why (its module imported)


# ---------------------------------------------------------------- generating mutants

BINOP_SWAPS = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
}
CMP_SWAPS = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
SYMBOLS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
}
NOTHING_EQUALS = "<mutant: equal to nothing>"
# The keywords of a model field declaration (``fld(...)``, package/docmodel.py) that hold JSON
# Schema keywords: only package/schema.py reads them (the generator of schema.json).
SCHEMA_KEYWORDS = ("schema", "any_schema")


def _field_declaration(node) -> bool:
    """Whether ``node`` is a call ``fld(...)`` declaring a model field."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "fld"
        and any(k.arg in SCHEMA_KEYWORDS for k in node.keywords)
    )


class _Finder:
    """Walks a module and lists (node, replacement source, operator, description, scope,
    import_time) for every mutation point."""

    def __init__(self, text: str):
        self.points: list[tuple] = []
        self.scope: list[str] = []
        self.in_function = False
        self.function: int | None = None
        self.top: tuple[str, int] | None = None  # the outermost function: (name, first line)
        self.visit(ast.parse(text))

    def add(self, node, replacement: str, operator: str, description: str) -> None:
        scope = ".".join(self.scope) or "<module>"
        self.points.append(
            (node, replacement, operator, description, scope, not self.in_function,
             self.function, self.top)
        )  # fmt: skip

    # -- the walk: annotations and docstrings are skipped, scopes tracked
    def visit(self, node) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for child in node.decorator_list:
                self.visit(child)
            if not isinstance(node, ast.ClassDef):
                for default in (*node.args.defaults, *node.args.kw_defaults):
                    if default is not None:
                        self.visit(default)
            else:
                for child in (*node.bases, *node.keywords):
                    self.visit(child)
            self.scope.append(node.name)
            outer, self.in_function = (
                self.in_function,
                (self.in_function or not isinstance(node, ast.ClassDef)),
            )
            outer_function, outer_top = self.function, self.top
            if not isinstance(node, ast.ClassDef):
                self.function = _first_line(node)
                if not outer:
                    self.top = (node.name, self.function)
            self.body(node.body)
            self.scope.pop()
            self.in_function, self.function, self.top = outer, outer_function, outer_top
            return
        if isinstance(node, ast.Lambda):
            for default in (*node.args.defaults, *node.args.kw_defaults):
                if default is not None:
                    self.visit(default)
            outer, self.in_function = self.in_function, True
            outer_top = self.top
            if not outer:
                self.top = ("<lambda>", node.lineno)
            self.visit(node.body)
            self.in_function, self.top = outer, outer_top
            return
        if isinstance(node, ast.Module):
            self.body(node.body)
            return
        if _field_declaration(node):
            # A model field's schema keywords are read only by the generator of schema.json:
            # loading validates against the committed file, so changing them is never behaviour.
            self.expression(node)
            self.visit(node.func)
            for child in node.args:
                self.visit(child)
            for keyword in node.keywords:
                if keyword.arg not in SCHEMA_KEYWORDS:
                    self.visit(keyword.value)
            return
        if isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.visit(node.value)
            self.statement(node)
            return
        if isinstance(node, ast.keyword) and node.arg == "strict":
            return  # zip's self-check of lengths equal by construction: never a result
        if isinstance(node, ast.stmt):
            self.statement(node)
        if isinstance(node, ast.expr):
            self.expression(node)
        if isinstance(node, ast.JoinedStr):
            return  # f-strings: messages
        for child in ast.iter_child_nodes(node):
            self.visit(child)

    def body(self, statements) -> None:
        for i, statement in enumerate(statements):
            docstring = (
                i == 0
                and isinstance(statement, ast.Expr)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
            )
            if not docstring:
                self.visit(statement)

    # -- statements
    def statement(self, node) -> None:
        if not self.in_function:
            return
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            self.add(node, "pass", "removed_statement", f"`{_short(node)}` removed")
        elif isinstance(node, ast.AugAssign):
            self.add(node, "pass", "removed_statement", f"`{_short(node)}` removed")
            swapped = BINOP_SWAPS.get(type(node.op))
            if swapped is not None:
                mutated = copy.deepcopy(node)
                mutated.op = swapped()
                self.add(node, ast.unparse(mutated), "arithmetic",
                         f"`{SYMBOLS[type(node.op)]}=` to `{SYMBOLS[swapped]}=`")  # fmt: skip
        elif (
            isinstance(node, ast.Assign)
            and all(isinstance(t, ast.Attribute | ast.Subscript) for t in node.targets)
            or isinstance(node, ast.Break | ast.Continue)
        ):
            self.add(node, "pass", "removed_statement", f"`{_short(node)}` removed")
        if isinstance(node, ast.If) and any(
            isinstance(s, ast.Raise | ast.Return | ast.Break | ast.Continue) for s in node.body
        ):
            self.add(node.test, "False", "removed_check",
                     f"check `if {_short(node.test)}` never taken")  # fmt: skip

    # -- expressions
    def expression(self, node) -> None:
        if isinstance(node, ast.BinOp):
            swapped = BINOP_SWAPS.get(type(node.op))
            if swapped is not None:
                mutated = copy.deepcopy(node)
                mutated.op = swapped()
                self.add(node, f"({ast.unparse(mutated)})", "arithmetic",
                         f"`{SYMBOLS[type(node.op)]}` to `{SYMBOLS[swapped]}`")  # fmt: skip
        elif isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub | ast.Invert) and not isinstance(
                node.operand, ast.Constant
            ):
                sign = "-" if isinstance(node.op, ast.USub) else "~"
                self.add(node, f"({ast.unparse(node.operand)})", "arithmetic",
                         f"`{sign}x` to `x` in `{_short(node)}`")  # fmt: skip
            elif isinstance(node.op, ast.Not):
                self.add(node, f"({ast.unparse(node.operand)})", "boolean",
                         f"`not` dropped from `{_short(node)}`")  # fmt: skip
        elif isinstance(node, ast.BoolOp):
            other = ast.Or if isinstance(node.op, ast.And) else ast.And
            mutated = copy.deepcopy(node)
            mutated.op = other()
            names = ("and", "or") if other is ast.Or else ("or", "and")
            self.add(node, f"({ast.unparse(mutated)})", "boolean",
                     f"`{names[0]}` to `{names[1]}` in `{_short(node)}`")  # fmt: skip
        elif isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                swapped = CMP_SWAPS[type(op)]
                mutated = copy.deepcopy(node)
                mutated.ops[i] = swapped()
                self.add(node, f"({ast.unparse(mutated)})", "comparison",
                         f"`{SYMBOLS[type(op)]}` to `{SYMBOLS[swapped]}` in `{_short(node)}`")  # fmt: skip
            if any(isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn) for op in node.ops):
                # each operand with the operator on its left (None for the leftmost): a string
                # right of `in` / `not in` is searched in, any other is compared or searched for
                sides = zip((node.left, *node.comparators), (None, *node.ops), strict=True)
                for operand, before in sides:
                    if not (isinstance(operand, ast.Constant) and isinstance(operand.value, str)):
                        continue
                    if isinstance(before, ast.In | ast.NotIn):  # a container: `x in "iu"`
                        self.add(operand, "''", "constant",
                                 f"{operand.value!r} searched replaced by a string nothing "
                                 "is in")  # fmt: skip
                    else:
                        self.add(operand, repr(NOTHING_EQUALS), "constant",
                                 f"{operand.value!r} compared replaced by a string nothing "
                                 "equals")  # fmt: skip
        elif isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool):
                self.add(node, repr(not value), "constant", f"`{value}` to `{not value}`")
            elif isinstance(value, int):
                self.add(node, repr(value + 1), "constant", f"`{value}` to `{value + 1}`")
        elif isinstance(node, ast.Slice):
            for bound in (node.lower, node.upper):
                if bound is not None and not _constant(bound):
                    self.add(bound, f"({ast.unparse(bound)} + 1)", "off_by_one",
                             f"slice bound `{_short(bound)}` to `{_short(bound)} + 1`")  # fmt: skip
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "range"
            and node.args
            and not _constant(node.args[min(1, len(node.args) - 1)])
        ):
            bound = node.args[min(1, len(node.args) - 1)]
            self.add(bound, f"({ast.unparse(bound)} + 1)", "off_by_one",
                     f"range bound `{_short(bound)}` to `{_short(bound)} + 1`")  # fmt: skip


def _first_line(node) -> int:
    """A function's first line as its code object has it (its first decorator's)."""
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def _enclosing_function(text: str, line: int) -> tuple[int | None, tuple[int, int], tuple | None]:
    """The innermost function holding ``line``: (its first line, the span of its body's lines,
    the outermost function holding it as (name, first line)); (None, every line, None) at
    module level."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (
            node.lineno <= line <= node.end_lineno
        ):
            found.append(node)
    if not found:
        return None, (1, text.count("\n") + 1), None
    inner = max(found, key=lambda n: n.lineno)
    outer = min(found, key=lambda n: n.lineno)
    return (
        _first_line(inner),
        (inner.body[0].lineno, inner.end_lineno),  # its body: the def line runs at import
        (outer.name, _first_line(outer)),
    )


RULE_CODE = re.compile(r"[A-H][0-9]{2}")


def _rule_codes(text: str) -> dict[int | None, frozenset[str]]:
    """The rule codes (string constants like ``"D36"``) each function of a module names, by the
    function's first line (None: the whole module); a function naming none (a helper) takes
    those of the functions of the module that call it by name."""
    tree = ast.parse(text)
    out = {}
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for node in [tree, *functions]:
        key = None if isinstance(node, ast.Module) else _first_line(node)
        out[key] = frozenset(
            c.value
            for c in ast.walk(node)
            if isinstance(c, ast.Constant)
            and isinstance(c.value, str)
            and RULE_CODE.fullmatch(c.value)
        )
    named = {
        node: {
            n.id if isinstance(n, ast.Name) else n.attr
            for n in ast.walk(node)
            if isinstance(n, ast.Name | ast.Attribute)
        }
        for node in functions
    }
    for node in functions:
        if not out[_first_line(node)]:
            callers = [g for g in functions if g is not node and node.name in named[g]]
            out[_first_line(node)] = frozenset().union(*(out[_first_line(g)] for g in callers))
    return out


def _constant(node) -> bool:
    return isinstance(node, ast.Constant) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant)
    )


def _short(node, limit: int = 60) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _replace(text: str, node, replacement: str) -> str:
    """``text`` with ``node``'s source segment replaced (offsets are UTF-8 byte columns)."""
    lines = text.encode().splitlines(keepends=True)
    start = sum(len(x) for x in lines[: node.lineno - 1]) + node.col_offset
    end = sum(len(x) for x in lines[: node.end_lineno - 1]) + node.end_col_offset
    data = text.encode()
    return (data[:start] + replacement.encode() + data[end:]).decode()


def target_files(package_dir: Path, targets) -> list[str]:
    """The runtime's modules under ``targets`` (prefixes relative to reference_runtime/)."""
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir).as_posix()
        if rel in EXCLUDED or "__pycache__" in rel:
            continue
        if any(rel.startswith(t) for t in targets):
            found.append(rel)
    for t in targets:
        if not any(rel.startswith(t) for rel in found):
            raise MutationError(f"--target {t!r} names no module of {PACKAGE}/ (a path under it)")
    return found


def generate(package_dir: Path, targets, operators, hand_written: bool) -> list[Mutant]:
    """Every mutant of the target modules, in a stable order."""
    mutants: list[Mutant] = []
    files = target_files(package_dir, targets)
    for rel in files:
        text = (package_dir / rel).read_text()
        codes = _rule_codes(text)
        seen = {text}
        ordinal: Counter = Counter()
        for point in _Finder(text).points:
            node, replacement, operator, description, scope, import_time, function, top = point
            key = (scope, operator)
            index = ordinal[key]
            ordinal[key] += 1
            if operator not in operators:
                continue
            source = _replace(text, node, replacement)
            if source in seen:
                continue  # the same program as the original or an earlier mutant
            seen.add(source)
            mutants.append(
                Mutant(
                    f"{rel}::{scope}::{operator}#{index}",
                    rel,
                    node.lineno,
                    node.col_offset,
                    node.end_lineno,
                    operator,
                    description,
                    source,
                    import_time,
                    function,
                    None,
                    codes.get(function, codes[None]),
                    (node.lineno, node.end_lineno),
                    top,
                )
            )
    if hand_written and "hand_written" in operators:
        for fault in HAND_WRITTEN:  # always all of them, whatever the targets
            text = (package_dir / fault.file).read_text()
            if text.count(fault.old) != 1:
                raise MutationError(
                    f"hand-written mutant {fault.name}: the text it replaces occurs "
                    f"{text.count(fault.old)} times in {PACKAGE}/{fault.file} (it must occur "
                    "once); update HAND_WRITTEN in tools/mutation.py to the code as it is now"
                )
            offset = text.index(fault.old)
            line = text.count("\n", 0, offset) + 1
            source = text.replace(fault.old, fault.new)
            function, span, top = _enclosing_function(text, line)
            mutants.append(
                Mutant(
                    f"hand:{fault.name}",
                    fault.file,
                    line,
                    0,
                    line + fault.old.count("\n"),
                    "hand_written",
                    fault.description,
                    source,
                    function is None,
                    function,
                    fault.caught_by,
                    span=span,
                    top=top,
                )
            )
    return mutants


def _rank(seed: int, m: Mutant) -> str:
    return hashlib.sha256(f"{seed}:{m.id}".encode()).hexdigest()


def in_run_order(mutants: list[Mutant], seed: int) -> list[Mutant]:
    """The order mutants are certified in: hand-written first, then by the hash of (seed, id),
    so that an interrupted run has certified a sample spread over every module."""
    return sorted(mutants, key=lambda m: (m.operator != "hand_written", _rank(seed, m)))


def sample(mutants: list[Mutant], n: int | None, seed: int) -> list[Mutant]:
    """``n`` generated mutants chosen by the hash of (seed, id), so a change to other mutants
    leaves the choice alone; and every hand-written one."""
    generated = [m for m in mutants if m.operator != "hand_written"]
    if n is None or n >= len(generated):
        return mutants

    chosen = {m.id for m in sorted(generated, key=lambda m: _rank(seed, m))[:n]}
    return [m for m in mutants if m.id in chosen or m.operator == "hand_written"]


@dataclass(frozen=True)
class Equivalent:
    """An entry of ``tools/mutation_equivalent.yaml``: why the mutant cannot change what the
    runtime does, and the change it was judged on (:func:`judged_text`)."""

    why: str
    judged_on: tuple[str, ...]


def read_equivalent(path: Path) -> dict[str, Equivalent]:
    """The equivalents file: mutant id -> {why, judged_on}."""
    try:
        data = yaml.safe_load(path.read_text()) if path.exists() else {}
    except (OSError, yaml.YAMLError) as exc:
        raise MutationError(f"{path.name}: {exc}") from None
    data = data or {}
    out = {}
    for key, entry in data.items() if isinstance(data, dict) else [(None, None)]:
        if not (
            isinstance(key, str)
            and isinstance(entry, dict)
            and set(entry) == {"why", "judged_on"}
            and isinstance(entry["why"], str)
            and entry["why"].strip()
            and isinstance(entry["judged_on"], list)
            and entry["judged_on"]
            and all(isinstance(line, str) for line in entry["judged_on"])
        ):
            where = f" (entry {key!r})" if isinstance(key, str) else ""
            raise MutationError(
                f"{path.name}{where}: map each mutant id to `why` (the reason it is equivalent) "
                "and `judged_on` (the lines of the change it was judged on: python "
                "tools/mutation.py --mutant ID --pin prints them)"
            )
        out[key] = Equivalent(entry["why"], tuple(entry["judged_on"]))
    return out


def judged_text(original: str, mutant: Mutant) -> tuple[str, ...]:
    """The change a mutant makes, as an equivalent is judged on it: the lines it replaces
    (``-``), their replacement (``+``), and one unchanged line before and after (`` ``); no
    line numbers, so code added elsewhere leaves it alone. Mutant ids are positional (the N-th
    mutant of an operator in a function): when code changes, an id can name another mutant, and
    its entry's text then differs."""
    if mutant.operator == "hand_written":
        return ()
    a, b = original.splitlines(), mutant.source.splitlines()
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    return (
        *(" " + line for line in a[max(0, start - 1) : start]),
        *("-" + line for line in a[start : len(a) - end]),
        *("+" + line for line in b[start : len(b) - end]),
        *(" " + line for line in a[len(a) - end : len(a) - end + 1]),
    )


def drifted_equivalents(equivalent: dict[str, Equivalent], mutants, originals) -> list[str]:
    """A problem for each entry of ``equivalent`` whose id names one of ``mutants`` with another
    change than the one it was judged on (``originals``: file -> its source)."""
    problems = []
    for m in mutants:
        entry = equivalent.get(m.id)
        if entry is None:
            continue
        now = judged_text(originals[m.file], m)
        if now != entry.judged_on:
            problems.append(
                f"{EQUIVALENT_FILE.name}: the entry {m.id!r} was judged on the change\n"
                + "".join(f"    {line}\n" for line in entry.judged_on)
                + "but that id now names the change\n"
                + "".join(f"    {line}\n" for line in now)
                + "(the code changed, and mutant ids are positional): re-judge it: if the new "
                "mutant is equivalent too, give the entry its why and judged_on (python "
                f"tools/mutation.py --mutant '{m.id}' --pin prints them), else remove the entry"
            )
    return problems


def pin(mutant: Mutant, original: str, why: str) -> str:
    """An entry of the equivalents file for ``mutant`` (YAML)."""
    lines = [f"{json.dumps(mutant.id)}:", f"  why: {json.dumps(why)}", "  judged_on:"]
    lines += [f"    - {_yaml_string(line)}" for line in judged_text(original, mutant)]
    return "\n".join(lines)


def _yaml_string(text: str) -> str:
    """``text`` as a YAML scalar: single-quoted (only ``'`` is escaped, doubled) when it is
    printable, else double-quoted."""
    if text.isprintable():
        return "'" + text.replace("'", "''") + "'"
    return json.dumps(text)


def diff(original: str, mutant: Mutant) -> str:
    lines = difflib.unified_diff(
        original.splitlines(keepends=True), mutant.source.splitlines(keepends=True),
        f"a/{PACKAGE}/{mutant.file}", f"b/{PACKAGE}/{mutant.file}", n=1,
    )  # fmt: skip
    return "".join(lines)


# ---------------------------------------------------------------- running mutants


def group_of(rel: str) -> tuple[str, tuple]:
    for name, prefixes, runs in GROUPS:
        if any(rel.startswith(p) for p in prefixes):
            return name, runs
    raise AssertionError(rel)


def _relevance(rel: str, case) -> int:
    """0 for a fail-closed case likely to notice a change to ``rel`` (one of its rule families;
    a run-time refusal for a module outside the validator), 1 for the others."""
    if case.suite != "fail_closed":
        return 0
    if not rel.startswith("package/"):
        return 0 if case.run is not None else 1
    families = FAMILIES.get(rel)
    return 0 if families is None or (case.rule or "")[:1] in families else 1


def candidates(rel: str, cases: dict, codes=frozenset()) -> list[tuple[str, str]]:
    """(spec, case id) pairs that may notice a change to ``rel``: its group's suites in order,
    the likeliest fail-closed cases first (those breaking a rule of ``codes``, the codes the
    function holding the change names, before all others)."""
    _, runs = group_of(rel)
    out = []
    for spec, suites in runs:
        for suite in suites:
            chosen = [cid for cid, case in cases.items() if case.suite == suite]
            # Breadth first: the first case of every package (fail-closed: of every rule), then
            # the second of each, and so on.
            position: dict[str, int] = {}
            nth = {}
            for cid in chosen:
                case = cases[cid]
                group = case.run.package if case.run is not None else (case.rule or "")
                nth[cid] = position[group] = position.get(group, -1) + 1
            chosen.sort(key=lambda cid: (_relevance(rel, cases[cid]), nth[cid]))
            out += [(spec, cid) for cid in chosen]
    named = {(spec, cid) for spec, cid in out if set((cases[cid].rule or "").split(", ")) & codes}
    return sorted(dict.fromkeys(out), key=lambda pair: pair not in named)


class LineTracer:
    """A ``sys.settrace`` function recording which lines of the files under ``prefix`` run: it
    gives a local tracer only to their frames (every other frame runs untraced). ``with
    tracer:`` traces this thread and the threads it starts."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.files: dict[str, set[int]] = {}
        self.local: dict[str, object] = {}

    def __call__(self, frame, event, arg):
        name = frame.f_code.co_filename
        try:
            return self.local[name]
        except KeyError:
            pass
        local = None
        if name.startswith(self.prefix):
            add = self.files.setdefault(name[len(self.prefix) :], set()).add

            def local(frame, event, arg):
                if event == "line":
                    add(frame.f_lineno)
                return local

        self.local[name] = local
        return local

    def __enter__(self):
        threading.settrace(self)
        sys.settrace(self)
        return self

    def __exit__(self, *exc):
        sys.settrace(None)
        threading.settrace(None)

    def take(self) -> dict[str, list[int]]:
        """The lines run since the last ``take`` (file relative to the prefix: sorted lines)."""
        out = {name: sorted(lines) for name, lines in self.files.items() if lines}
        for lines in self.files.values():
            lines.clear()
        return out


def _ranges(lines) -> str:
    """``[1, 2, 3, 7]`` as ``"1-3,7"``."""
    out, lines = [], sorted(lines)
    i = 0
    while i < len(lines):
        j = i
        while j + 1 < len(lines) and lines[j + 1] == lines[j] + 1:
            j += 1
        out.append(str(lines[i]) if i == j else f"{lines[i]}-{lines[j]}")
        i = j + 1
    return ",".join(out)


def _lines(ranges: str) -> list[int]:
    out = []
    for part in filter(None, ranges.split(",")):
        first, _, last = part.partition("-")
        out += range(int(first), int(last or first) + 1)
    return out


def _top_codes(code):
    """The code objects of the functions defined at module or class level in a module's code."""
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_flags & inspect.CO_OPTIMIZED:
                yield const
            else:  # a class body
                yield from _top_codes(const)


def _nested(code) -> list:
    """Every code object nested in ``code`` (its nested functions, lambdas, comprehensions)."""
    out = []
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out += [const, *_nested(const)]
    return out


def _pairs(old, new) -> list | None:
    """(old code, new code) for ``old`` and every code nested in it, matched in order; None
    when the two nest different functions."""
    a = [c for c in old.co_consts if isinstance(c, types.CodeType)]
    b = [c for c in new.co_consts if isinstance(c, types.CodeType)]
    if [c.co_name for c in a] != [c.co_name for c in b]:
        return None
    out = [(old, new)]
    for x, y in zip(a, b, strict=True):
        inner = _pairs(x, y)
        if inner is None:
            return None
        out += inner
    return out


@dataclass
class Fork:
    """A child to run: ``work()`` (returning JSON data) with ``mutant`` applied (warm: its
    function's code patched into the live runtime, or cold: its module imported afresh)."""

    work: object
    timeout: float  # CPU seconds; WALL_FACTOR times that in wall-clock time
    mutant: Mutant | None = None
    cold: bool = False


@dataclass
class Child:
    pid: int
    out: Path
    timeout: float
    deadline: float
    path: str  # "warm", "cold: why", or "" (no mutant)
    cold: Path | None = None  # a cold child's copy of the runtime


class Workspace:
    """A copy of reference_runtime/, imported once into this process (the *warm parent*: no
    case has run, so no cache is warm); each mutant is certified in a child forked from it
    (warm) or in a fresh interpreter importing a mutated copy (cold)."""

    def __init__(self, package_dir: Path):
        self.tmp = tempfile.TemporaryDirectory(prefix="mutation-")
        self.root = Path(self.tmp.name)
        self.package = self.root / PACKAGE
        self.prefix = str(self.package) + os.sep
        shutil.copytree(package_dir, self.package,
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
        # Bytecode checked against the source's hash: a mutated file is always recompiled.
        compileall.compile_dir(self.package, quiet=1,
                               invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)  # fmt: skip
        self.cases = {c.id: c for c in catalogue()}
        catalogue_size()  # built here once: each child's certify() calls read it
        self.spawned = 0
        self._warm_up()

    def _warm_up(self) -> None:
        """Import every module of the copy and the conformance adapter over it, recording the
        lines run at import; index the runtime's functions by their code."""
        sys.path.insert(0, str(self.root))
        importlib.invalidate_caches()
        tracer = LineTracer(self.prefix)
        try:
            with tracer:
                for path in sorted(self.package.rglob("*.py")):
                    module = path.relative_to(self.root).with_suffix("").as_posix()
                    module = module.replace("/", ".").removesuffix(".__init__")
                    if not module.endswith("__main__"):
                        importlib.import_module(module)
                importlib.import_module("conformance.runtimes.reference")
        except Exception as exc:
            raise MutationError(f"{PACKAGE} does not import: {type(exc).__name__}: {exc}") from None
        self.at_import = {name: set(lines) for name, lines in tracer.take().items()}
        if not sys.modules[PACKAGE].__file__.startswith(self.prefix):
            raise MutationError(f"{PACKAGE} was imported from {sys.modules[PACKAGE].__file__}, "
                                "not the copy")  # fmt: skip
        self.functions: dict[int, list] = defaultdict(list)  # id(code): the functions running it
        self.tops: dict[tuple, list] = defaultdict(list)  # (file, name, first line): codes
        for obj in gc.get_objects():
            if isinstance(obj, types.FunctionType):
                code = obj.__code__
                if code.co_filename.startswith(self.prefix):
                    if id(code) not in self.functions and "<locals>" not in code.co_qualname:
                        key = (code.co_filename[len(self.prefix) :], code.co_name,
                               code.co_firstlineno)  # fmt: skip
                        self.tops[key].append(code)
                    self.functions[id(code)].append(obj)

    def close(self) -> None:
        self.tmp.cleanup()

    def caches(self) -> list:
        """The runtime's cached functions but ``KEPT_CACHES``, as their cache wrappers."""
        found, kept = {}, set()
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None) or ""
            if not (name == PACKAGE or name.startswith(PACKAGE + ".")) or not path.startswith(
                self.prefix
            ):
                continue
            for obj in vars(module).values():
                code = getattr(getattr(obj, "__wrapped__", None), "__code__", None)
                if code is None or not callable(getattr(obj, "cache_clear", None)):
                    continue
                if not code.co_filename.startswith(self.prefix):
                    continue
                key = f"{code.co_filename[len(self.prefix) :]}::{code.co_qualname}"
                if key in KEPT_CACHES:
                    kept.add(key)
                else:
                    found[id(obj)] = obj
        missing = set(KEPT_CACHES) - kept
        if missing:
            raise MutationError(f"KEPT_CACHES names no cached function: {', '.join(missing)}")
        return list(found.values())

    def ran_at_import(self, mutant: Mutant) -> bool:
        lines = self.at_import.get(mutant.file, ())
        return any(line in lines for line in range(mutant.span[0], mutant.span[1] + 1))

    def spawn(self, request: Fork) -> Child:
        """Start a child running ``request``; its result is read with :meth:`poll`. A warm
        child is forked from this process, the mutant's function code patched in; a cold one
        is a fresh interpreter importing a copy of the runtime holding the mutated module."""
        self.spawned += 1
        out = self.root / f"child-{self.spawned}.json"
        patch, path, cold = [], "", None
        if request.mutant is not None:
            found = "--cold" if request.cold else self.patch(request.mutant)
            if isinstance(found, str):
                path, cold = f"cold: {found}", self.root / f"cold-{self.spawned}"
                shutil.copytree(self.package, cold / PACKAGE)  # with its bytecode
                (cold / PACKAGE / request.mutant.file).write_text(request.mutant.source)
                order = (cold / "request.json").as_posix()
                pairs = request.work.args[0]  # a mutant's work: _first_failure(pairs, cases)
                Path(order).write_text(json.dumps({"root": str(cold), "pairs": pairs,
                                                   "out": str(out)}))  # fmt: skip
            else:
                patch, path = found, "warm"
        sys.stdout.flush()
        sys.stderr.flush()
        stops = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, stops)  # no child escapes an interrupt
        try:
            pid = os.fork()
            if pid == 0:  # the child
                code = 0
                try:
                    signal.signal(signal.SIGTERM, signal.SIG_DFL)
                    os.setpgid(0, 0)
                    if cold is not None:
                        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
                        os.execv(sys.executable, [sys.executable, "-c", COLD_CHILD,
                                                  str(ROOT / "tools"), order])  # fmt: skip
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
                    sys.dont_write_bytecode = True
                    for function, new_code in patch:
                        function.__code__ = new_code
                    out.write_text(json.dumps(request.work()))
                except BaseException:
                    code = 3
                    out.write_text(json.dumps({"crash": traceback.format_exc(limit=3)}))
                finally:
                    os._exit(code)
            with contextlib.suppress(OSError):
                os.setpgid(pid, pid)  # also in the child: whichever runs first
            return Child(pid, out, request.timeout,
                         time.monotonic() + WALL_FACTOR * request.timeout, path, cold)  # fmt: skip
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)

    def poll(self, child: Child):
        """None while ``child`` runs; then (data, None, CPU seconds, path), or (None,
        "timeout" or why the child died, CPU seconds, path). A child stopped from outside
        (SIGTERM, SIGINT) stops the run."""
        done, status, usage = os.wait4(child.pid, os.WNOHANG)
        if not done:
            cpu = _cpu_seconds(child.pid)
            if cpu > child.timeout or time.monotonic() > child.deadline:
                self.end(child)
                return None, "timeout", cpu, child.path
            return None
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGTERM, signal.SIGINT):
            raise KeyboardInterrupt  # stopped from outside: not the mutant's doing
        cpu = usage.ru_utime + usage.ru_stime
        try:
            return json.loads(child.out.read_text()), None, cpu, child.path
        except (OSError, ValueError):
            why = f"the child ended with status {status} and no result"
            return None, why, cpu, child.path
        finally:
            self.end(child)

    def end(self, child: Child) -> None:
        """End ``child`` (if it still runs) and remove what it leaves."""
        _kill(child.pid)
        child.out.unlink(missing_ok=True)
        if child.cold is not None:
            shutil.rmtree(child.cold, ignore_errors=True)

    def patch(self, mutant: Mutant) -> list | str:
        """The warm path: compile the mutated module, and list (function, new code) for the
        live functions of the outermost function holding the change and of the functions
        nested in it (a child assigns each its new code, which every reference to it then
        runs); or why it cannot be done (the cold path is taken)."""
        if mutant.import_time or mutant.top is None:
            return "module or class level"
        if self.ran_at_import(mutant):
            return "it runs at import"
        olds = self.tops.get((mutant.file, *mutant.top), [])
        if len(olds) != 1:
            return f"{len(olds)} live functions {mutant.top[0]} at line {mutant.top[1]}"
        try:
            module = compile(mutant.source, str(self.package / mutant.file), "exec",
                             dont_inherit=True)  # fmt: skip
        except (SyntaxError, ValueError):
            return "the module does not compile"
        news = [c for c in _top_codes(module) if (c.co_name, c.co_firstlineno) == mutant.top]
        if len(news) != 1:
            return "the mutated function is not found"
        old, new = olds[0], news[0]
        pairs = _pairs(old, new)
        if pairs is None:  # nested functions added or removed: only fresh ones are affected
            if any(self.functions.get(id(c)) for c in _nested(old)):
                return "a live nested function changed"
            pairs = [(old, new)]
        live = [(o, n) for o, n in pairs if self.functions.get(id(o))]
        if any(o.co_freevars != n.co_freevars or o.co_flags != n.co_flags for o, n in live):
            return "a live function's closure or kind changed"
        return [(function, n) for o, n in live for function in self.functions[id(o)]]


# A cold child: a fresh interpreter (argv: tools/, its request) importing the mutated copy.
COLD_CHILD = "import sys; sys.path.insert(0, sys.argv[1]); import mutation; mutation.cold_child()"


def cold_child() -> None:
    """In a cold child: certify the request's pairs with the runtime imported from its copy
    (first on the import path), and write the result."""
    request = json.loads(Path(sys.argv[2]).read_text())
    out = Path(request["out"])
    try:
        sys.path.insert(0, request["root"])
        sys.dont_write_bytecode = True
        cases = {c.id: c for c in catalogue()}
        data = _first_failure([tuple(p) for p in request["pairs"]], cases)
        imported = getattr(sys.modules.get(PACKAGE), "__file__", None) or request["root"]
        if not imported.startswith(request["root"] + os.sep):
            raise MutationError(f"{PACKAGE} was imported from {imported}, not the copy")
    except BaseException:
        data = {"crash": traceback.format_exc(limit=3)}
    out.write_text(json.dumps(data))


def drive(ws: Workspace, tasks, jobs: int, done) -> None:
    """Run ``tasks`` ((key, generator) pairs; a generator yields :class:`Fork` requests, is
    sent each one's result, and returns its own), with at most ``jobs`` children at a time;
    ``done(key, result)`` as each ends. An interrupt (or an error) ends the running children
    and is re-raised."""
    tasks = iter(tasks)
    running: dict[int, tuple] = {}

    def advance(key, task, value) -> None:
        try:
            request = task.send(value)
        except StopIteration as stop:
            done(key, stop.value)
            return
        child = ws.spawn(request)
        running[child.pid] = (key, task, child)

    try:
        while True:
            while len(running) < jobs:
                nxt = next(tasks, None)
                if nxt is None:
                    break
                advance(*nxt, None)
            if not running:
                return
            for pid, (key, task, child) in list(running.items()):
                result = ws.poll(child)
                if result is not None:
                    del running[pid]
                    advance(key, task, result)
            time.sleep(0.02)
    except BaseException:
        for _, _, child in running.values():
            ws.end(child)
        raise


def _cpu_seconds(pid: int) -> float:
    """The CPU time a child has used (Linux: /proc; elsewhere 0, leaving the wall-clock
    limit): a limit on it holds however loaded the machine is."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _kill(pid: int) -> None:
    """End a child and everything it started (its process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):  # already reaped
        os.waitpid(pid, 0)


def _first_failure(pairs: list[tuple[str, str]], cases: dict) -> dict:
    """In a child: certify ``pairs`` in order (consecutive pairs of one spec together), stopping
    at the first failed case."""
    ran = 0
    i = 0
    while i < len(pairs):
        spec = pairs[i][0]
        j = i
        while j < len(pairs) and pairs[j][0] == spec:
            j += 1
        chunk = [cases[cid] for _, cid in pairs[i:j]]
        try:
            _, results = certify(spec, {}, 1, None, progress=False, cases=chunk, fail_fast=True)
        except Exception as exc:  # the runtime no longer imports, or its adapter cannot start
            got = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            return {"killed": True, "case": "(the runtime did not start)", "spec": spec,
                    "got": got, "ran": ran}  # fmt: skip
        ran += len(results)
        failed = [r for r in results if r.status == "failed"]
        if failed:
            r = failed[0]
            return {"killed": True, "case": r.case.id, "spec": spec, "got": r.got, "ran": ran}
        i = j
    return {"killed": False, "ran": ran}


def _control_work(ws: Workspace, pairs: list[tuple[str, str]], label: str) -> dict:
    """In a child of the warm parent: judge ``pairs`` on the unmutated runtime, recording the
    lines each case runs (and those opening each runtime spec runs)."""
    from conformance.runtimes import open_runtime

    tracer = LineTracer(ws.prefix)
    out: dict = {"cases": [], "open": {}}
    runtimes = {}
    caches = ws.caches()
    for n, (spec, cid) in enumerate(pairs, 1):
        for cached in caches:
            cached.cache_clear()
        if spec not in runtimes:
            with tracer:
                runtime = open_runtime(spec)
                runtimes[spec] = (runtime, set(runtime.describe().get("features", [])))
            out["open"][spec] = {f: _ranges(lines) for f, lines in tracer.take().items()}
        runtime, features = runtimes[spec]
        with tracer:
            result = judge(runtime, ws.cases[cid], features)
        lines = {f: _ranges(lines) for f, lines in tracer.take().items()}
        out["cases"].append([spec, cid, result.status, result.got, result.seconds, lines])
        if n % 100 == 0 or n == len(pairs):
            print(f"  control{label}: {n}/{len(pairs)} cases", file=sys.stderr, flush=True)
    return out


def control_key() -> str:
    """A hash of everything the control run depends on: the runtime's sources, conformance/,
    fixtures/, goldens/, the versions of Python and the libraries beneath, and the format of
    what it records (``CONTROL_FORMAT``)."""
    h = hashlib.sha256()
    versions = [CONTROL_FORMAT, sys.version, numpy.__version__, onnx.__version__,
                onnxruntime.__version__]  # fmt: skip
    h.update(repr(versions).encode())
    for top in (PACKAGE, "conformance", "fixtures", "goldens"):
        base = ROOT / top
        for path in sorted([base] if base.is_file() else base.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                h.update(path.relative_to(ROOT).as_posix().encode() + b"\0")
                h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


class Control:
    """The unmutated runtime certified on every candidate case, recording the lines of the
    runtime each case runs (coverage), or confirming kills one case at a time (no coverage)."""

    def __init__(self, ws: Workspace, log):
        self.ws = ws
        self.seconds: dict[tuple[str, str], float] = {}
        self.covers: dict[str, dict[int, list]] = defaultdict(lambda: defaultdict(list))
        self.at_open: dict[str, set[int]] = defaultdict(set)  # lines run opening a runtime
        self.failing: dict[tuple[str, str], str] = {}
        self.confirmed: dict[tuple[str, str], bool] = {}
        # the cases that killed mutants so far, latest last: by (file, function), by file
        self.killers: dict[tuple, list[tuple[str, str]]] = defaultdict(list)
        self.log = log
        self.note = ""

    def run(self, pairs: list[tuple[str, str]], jobs: int, cache_dir: Path) -> None:
        """Certify ``pairs`` with coverage (over ``jobs`` children), reusing the results the
        cache in ``cache_dir`` holds for the same inputs, and adding the new ones to it."""
        key = control_key()
        path = cache_dir / f"control-{key}.json.gz"
        cached = {"cases": [], "open": {}}
        with contextlib.suppress(OSError, ValueError, EOFError, gzip.BadGzipFile):
            cached = json.loads(gzip.decompress(path.read_bytes()))
        known = {(spec, cid): entry for spec, cid, *entry in cached["cases"]}
        missing = [p for p in pairs if p not in known]
        if not missing:
            self.note = f"reused {path} ({len(pairs)} cases)"
            self.log(f"control run: {self.note}")
        else:
            parts = [missing[k::jobs] for k in range(min(jobs, len(missing)))]
            reused = len(pairs) - len(missing)
            self.log(f"control run: {len(missing)} (runtime, case) pairs over {len(parts)} "
                     f"children, recording the lines each runs"
                     + (f" ({reused} reused from {path})" if reused else
                        f" (no cache {path.name})"))  # fmt: skip
            results = []

            def task(part, label):
                data, error, *_ = yield Fork(
                    functools.partial(_control_work, self.ws, part, label),
                    timeout=3600 + 60 * len(part),
                )
                if error or "crash" in data:
                    raise MutationError(f"the control run failed: {error or data['crash']}")
                return data

            labels = [f" {k + 1}/{len(parts)}" if len(parts) > 1 else "" for k in range(len(parts))]
            drive(self.ws, [(k, task(p, labels[k])) for k, p in enumerate(parts)], len(parts),
                  lambda k, data: results.append(data))  # fmt: skip
            for data in results:
                for spec, lines in data["open"].items():
                    merged = cached["open"].setdefault(spec, {})
                    for f, ranges in lines.items():
                        merged[f] = _ranges({*_lines(merged.get(f, "")), *_lines(ranges)})
                for spec, cid, *entry in data["cases"]:
                    known[spec, cid] = entry
            cached = {"key": key, "cases": [[*p, *e] for p, e in sorted(known.items())],
                      "open": cached["open"]}  # fmt: skip
            cache_dir.mkdir(parents=True, exist_ok=True)
            for stale in cache_dir.glob("control-*.json.gz"):
                if stale != path:
                    stale.unlink(missing_ok=True)
            partial = path.with_suffix(".partial")
            partial.write_bytes(gzip.compress(json.dumps(cached).encode(), mtime=0))
            partial.replace(path)
            self.note = f"ran {len(missing)} cases, reused {reused}; cached in {path}"
        for lines in cached["open"].values():
            for f, ranges in lines.items():
                self.at_open[f].update(_lines(ranges))
        for pair in pairs:
            status, got, seconds, lines = known[pair]
            if status == "not_applicable":
                continue
            if status != "passed":
                self.failing[pair] = got
                continue
            self.seconds[pair] = seconds
            for f, ranges in lines.items():
                by_line = self.covers[f]
                for line in _lines(ranges):
                    by_line[line].append(pair)

    def select(self, mutant: Mutant, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The candidate pairs that passed the control run and run one of the mutant's lines
        (all of them for code run at import or when a runtime opens): the cheapest and the
        rarest on its lines in turn."""
        span = range(mutant.span[0], mutant.span[1] + 1)
        opened = self.at_open.get(mutant.file, ())
        by_line = self.covers.get(mutant.file, {})
        if mutant.import_time or self.ws.ran_at_import(mutant) or any(i in opened for i in span):
            chosen = [p for p in pairs if p in self.seconds]
        else:
            hit = {p for line in span for p in by_line.get(line, ())}
            chosen = [p for p in pairs if p in hit]
        cheapest = sorted(chosen, key=lambda p: self.seconds[p])
        # The cases that run the lines at and after the change that few cases run (its rarer
        # branches), taken in turn with the cheapest: a change that matters only on a rare
        # path is found there, one that matters everywhere by the cheapest cases.
        rarity: dict[tuple[str, str], float] = defaultdict(float)
        for line in range(mutant.span[0], mutant.span[1] + NEAR):
            running = by_line.get(line, ())
            for pair in running:
                rarity[pair] += 1 / len(running)
        rarest = sorted(cheapest, key=lambda p: -rarity[p])  # stable: the cheapest first in a tie
        return list(dict.fromkeys(p for two in zip(cheapest, rarest, strict=True) for p in two))

    def hinted(self, mutant: Mutant, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """``pairs`` with up to ``HINTS`` of them first: those that killed a mutant of the same
        function, then of the same module, latest first. A mutant is killed when any of its
        cases fails, so the order changes only how soon (and which case is named)."""
        among = set(pairs)
        first: list[tuple[str, str]] = []
        for key in ((mutant.file, mutant.function), (mutant.file,)):
            for pair in reversed(self.killers.get(key, ())):
                if pair in among and pair not in first and len(first) < HINTS:
                    first.append(pair)
        return first + [p for p in pairs if p not in first]

    def killed(self, mutant: Mutant, pair: tuple[str, str]) -> None:
        for key in ((mutant.file, mutant.function), (mutant.file,)):
            seen = self.killers[key]
            if pair in seen:
                seen.remove(pair)
            seen.append(pair)

    def confirm(self, pair: tuple[str, str]):
        """Whether the case passes on the unmutated runtime (no coverage: checked on a kill); a
        generator, as :func:`run_mutant`."""
        if pair not in self.confirmed:
            cases = self.ws.cases
            data, error, *_ = yield Fork(functools.partial(_first_failure, [pair], cases), 600)
            self.confirmed[pair] = bool(data) and not error and not data.get("killed", True)
            if not self.confirmed[pair]:
                self.log(f"  control: {pair[1]} under {pair[0]} fails without a mutant; "
                         "it is not used")  # fmt: skip
        return self.confirmed[pair]


def run_mutant(ws: Workspace, control: Control, mutant: Mutant, pairs, coverage: bool,
               original: str, max_cases: int | None = None, cold: bool = False):  # fmt: skip
    """Certify ``mutant``: a generator yielding the children it needs (:class:`Fork`) and
    returning its :class:`Outcome` (run it with :func:`drive`)."""
    start = time.perf_counter()
    try:
        ast.parse(mutant.source)
    except SyntaxError as exc:  # a flaw of the generator: never reported as a kill
        raise MutationError(f"mutant {mutant.id} is not valid Python ({exc})") from None
    out = Outcome(mutant.id, mutant.file, mutant.line, mutant.operator, mutant.description,
                  "survived")  # fmt: skip
    if coverage:
        pairs = control.select(mutant, pairs)
        if not pairs:
            out.note = "no case executes it"
            out.diff = diff(original, mutant)
            return out
        estimate = sum(control.seconds[p] for p in pairs)
    else:
        pairs = [p for p in pairs if control.confirmed.get(p, True)]
    if mutant.caught_by and mutant.caught_by in pairs:
        pairs = [mutant.caught_by, *(p for p in pairs if p != mutant.caught_by)]
    if max_cases is not None and len(pairs) > max_cases:
        pairs = pairs[:max_cases]
        out.note = f"its first {max_cases} cases passed (--max-cases)"
    # within the cases chosen (which must not depend on what ran before): sooner, not other
    pairs = control.hinted(mutant, pairs)
    if not coverage:
        estimate = sum(SUITE_SECONDS.get(ws.cases[cid].suite, 0.3) for _, cid in pairs)
    timeout = BASE_TIMEOUT + TIMEOUT_FACTOR * estimate
    cases = ws.cases
    while True:
        request = Fork(functools.partial(_first_failure, pairs, cases), timeout, mutant, cold)
        data, error, cpu, out.path = yield request
        out.cpu_seconds += cpu
        if error == "timeout":
            out.status, out.note = "timeout", f"ran past {timeout:.0f} CPU seconds"
            break
        if error or "crash" in data:
            out.status, out.note = "killed", f"the certification crashed: {error or data['crash']}"
            break
        out.cases_run += data["ran"]
        if not data["killed"]:
            out.diff = diff(original, mutant)
            break
        pair = (data["spec"], data["case"])
        if coverage or data["case"] not in cases or (yield from control.confirm(pair)):
            out.status, out.case, out.spec = "killed", data["case"], data["spec"]
            out.got, out.note = data["got"], ""
            control.killed(mutant, pair)
            break
        pairs = [p for p in pairs if p != pair]  # the case fails anyway: try the rest
    out.seconds = round(time.perf_counter() - start, 2)
    out.cpu_seconds = round(out.cpu_seconds, 2)
    return out


# ---------------------------------------------------------------- the report


def rate(outcomes: list[Outcome]) -> tuple[int, int, float]:
    """(killed or timed out, non-equivalent, their ratio; 1.0 when there is none)."""
    live = [o for o in outcomes if o.status != "equivalent"]
    caught = sum(o.status in ("killed", "timeout") for o in live)
    return caught, len(live), (caught / len(live) if live else 1.0)


def table(outcomes: list[Outcome], key) -> list[str]:
    rows: dict[str, Counter] = defaultdict(Counter)
    for o in outcomes:
        rows[key(o)][o.status] += 1
    lines = ["| | mutants | killed | timeout | survived | equivalent | kill rate |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for name in sorted(rows):
        c = rows[name]
        live = sum(c.values()) - c["equivalent"]
        ratio = f"{(c['killed'] + c['timeout']) / live:.1%}" if live else "-"
        lines.append(f"| {name} | {sum(c.values())} | {c['killed']} | {c['timeout']} | "
                     f"{c['survived']} | {c['equivalent']} | {ratio} |")  # fmt: skip
    return lines


def report(outcomes: list[Outcome], header: dict) -> tuple[dict, str]:
    caught, live, ratio = rate(outcomes)
    data = {**header, "kill_rate": round(ratio, 4), "caught": caught, "non_equivalent": live,
            "summary": dict(Counter(o.status for o in outcomes)),
            "mutants": [asdict(o) for o in outcomes]}  # fmt: skip
    md = ["# Mutation testing of the reference runtime", ""]
    md.append(f"- targets: {', '.join(header['targets'])}")
    md.append(f"- operators: {', '.join(header['operators'])}")
    sampled = (
        f"a sample of {header['sample']} (seed {header['seed']})" if header["sample"] else ("all")
    )
    md.append(f"- mutants: {len(outcomes)} run of {header['generated']} generated ({sampled}); "
              f"{'coverage-selected cases' if header['coverage'] else 'no coverage'}; "
              f"{header['seconds']:.0f} s")  # fmt: skip
    paths = Counter(o.path.split(":")[0] for o in outcomes if o.path)
    cpu = sum(o.cpu_seconds for o in outcomes)
    md.append(f"- {header['jobs']} children at a time; {paths['warm']} mutants warm (function "
              f"code patched), {paths['cold']} cold (module imported afresh); {cpu:.0f} CPU s "
              "in mutant children")  # fmt: skip
    if header["control"]:
        md.append(f"- control run: {header['control']}")
    if header["cases"]:
        md.append(f"- cases: only those matching {', '.join(header['cases'])}")
    if header["interrupted"]:
        md.append(f"- **interrupted**: {len(outcomes)} of the {header['selected']} selected "
                  "mutants were certified")  # fmt: skip
    md.append(f"- **kill rate: {caught}/{live} = {ratio:.1%}** of the non-equivalent mutants "
              "(timeouts count as killed)")  # fmt: skip
    if header.get("control_failures"):
        md.append(f"- cases failing without a mutant (not used): {header['control_failures']}")
    md += ["", "## Per module", "", *table(outcomes, lambda o: o.file)]
    md += ["", "## Per operator", "", *table(outcomes, lambda o: o.operator)]
    survivors = [o for o in outcomes if o.status == "survived"]
    md += ["", f"## Survived ({len(survivors)})", ""]
    for o in survivors:
        note = f" ({o.note})" if o.note else f" ({o.cases_run} cases passed)"
        md += [f"### `{o.id}`", "", f"line {o.line}: {o.description}{note}", "", "```diff",
               o.diff.rstrip(), "```", ""]  # fmt: skip
    timeouts = [o for o in outcomes if o.status == "timeout"]
    if timeouts:
        md += [f"## Timed out ({len(timeouts)})", ""]
        md += [f"- `{o.id}` line {o.line}: {o.description}: {o.note}" for o in timeouts] + [""]
    equivalent = [o for o in outcomes if o.status == "equivalent"]
    if equivalent:
        md += [f"## Equivalent ({len(equivalent)})", ""]
        md += [f"- `{o.id}` line {o.line}: {o.description}: {o.note}" for o in equivalent]
        md.append("")
    killed = [o for o in outcomes if o.status == "killed"]
    md += [f"## Killed ({len(killed)})", "", "| mutant | line | change | killed by |",
           "|---|---|---|---|"]  # fmt: skip
    md += [f"| `{o.id}` | {o.line} | {o.description.replace('|', '/')} | `{o.case}` |"
           for o in killed]  # fmt: skip
    return data, "\n".join(md) + "\n"


def read_floor() -> dict:
    try:
        data = yaml.safe_load(FLOOR_FILE.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise MutationError(f"{FLOOR_FILE.name}: {exc}") from None
    keys = {"floor": float, "mutants": list, "max_cases": int, "coverage": bool}
    if (
        not isinstance(data, dict)
        or set(data) != set(keys)
        or not all(isinstance(data[k], t) for k, t in keys.items())
        or not all(isinstance(i, str) for i in data["mutants"])
    ):
        raise MutationError(
            f"{FLOOR_FILE.name}: give exactly floor (a rate), mutants (a list of mutant ids), "
            "max_cases (an integer) and coverage (true or false)"
        )
    return data


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog=__doc__.split("\n\n", 1)[1].split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--target", action="append",
                        help=f"a module or folder under {PACKAGE}/ (repeatable; default: "
                        f"{' '.join(DEFAULT_TARGETS)})")  # fmt: skip
    parser.add_argument("--operator", action="append", choices=OPERATORS)
    parser.add_argument("--sample", type=int, help="certify N mutants (chosen by --seed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--floor", action="store_true",
                        help="the sample and seed of tools/mutation_floor.yaml; fail below its "
                        "floor")  # fmt: skip
    parser.add_argument("--no-coverage", dest="coverage", action="store_false",
                        help="no control run recording coverage (confirm kills instead)")  # fmt: skip
    hand = parser.add_mutually_exclusive_group()
    hand.add_argument("--hand-written", dest="hand", action="store_const", const="only",
                      help="only the hand-written mutants")  # fmt: skip
    hand.add_argument("--no-hand-written", dest="hand", action="store_const", const="none")
    parser.add_argument("--max-cases", type=int,
                        help="certify each mutant on at most its first N cases (a survivor "
                        "says so)")  # fmt: skip
    parser.add_argument("--mutant", action="append", help="only this mutant id (repeatable)")
    parser.add_argument("--case", action="append", metavar="PATTERN",
                        help="certify mutants only on the cases whose id matches (fnmatch; "
                        "repeatable)")  # fmt: skip
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="children at a time (default: the CPU count)")  # fmt: skip
    parser.add_argument("--cold", action="store_true",
                        help="import every mutant's module afresh (the slow path the warm one "
                        "is checked against)")  # fmt: skip
    parser.add_argument("--report-dir", default="mutation-report",
                        help="where the reports and the control run's cache go")  # fmt: skip
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--pin", action="store_true",
                        help="print an entry of tools/mutation_equivalent.yaml for each selected "
                        "mutant (its change, and its reason when it is listed) and stop")  # fmt: skip
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs takes a positive number")
    try:
        return _main(args)
    except MutationError as exc:
        print(f"mutation: {exc}", file=sys.stderr)
        return 2


def _terminated(signum, frame):
    raise KeyboardInterrupt


def _main(args) -> int:
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f} s] {message}", file=sys.stderr, flush=True)

    signal.signal(signal.SIGTERM, _terminated)  # clean up the copy and the running children
    if PACKAGE in sys.modules:
        raise MutationError(f"{PACKAGE} is already imported: run the tool in its own process")
    floor = read_floor() if args.floor else None
    if floor:
        args.sample = None
        args.max_cases, args.coverage = floor["max_cases"], floor["coverage"]
    targets = tuple(args.target or DEFAULT_TARGETS)
    operators = tuple(args.operator or OPERATORS)
    if args.hand == "only":
        operators = ("hand_written",)
    package_dir = ROOT / PACKAGE
    everything = generate(package_dir, targets, operators, args.hand != "none")
    equivalent = read_equivalent(EQUIVALENT_FILE)
    mutants = sample(everything, args.sample, args.seed)
    if floor:
        missing = sorted(set(floor["mutants"]) - {m.id for m in everything})
        if missing:
            raise MutationError(
                f"{FLOOR_FILE.name} names {missing[0]!r}, which the code no longer has: draw a "
                "replacement with --sample N --seed S --list and pin it there"
            )
        pinned = set(floor["mutants"])
        mutants = [m for m in everything if m.id in pinned or m.operator == "hand_written"]
    if args.mutant:
        unknown = sorted(set(args.mutant) - {m.id for m in everything})
        if unknown:
            raise MutationError(f"no mutant {unknown[0]!r} (see --list)")
        mutants = [m for m in everything if m.id in args.mutant]
    sources = {f: (package_dir / f).read_text() for f in {m.file for m in everything}}
    if args.pin:
        for m in mutants:
            why = equivalent[m.id].why if m.id in equivalent else "WHY IT CANNOT CHANGE BEHAVIOUR"
            print(pin(m, sources[m.file], why))
        return 0
    drifted = drifted_equivalents(equivalent, everything, sources)
    if drifted:
        raise MutationError("\n".join(drifted))
    if args.list:
        for m in mutants:
            mark = "  (equivalent)" if m.id in equivalent else ""
            print(f"{m.id}  line {m.line}: {m.description}{mark}")
        print(f"{len(mutants)} mutants of {len(everything)}")
        return 0
    mutants = in_run_order(mutants, args.seed)
    log(f"{len(mutants)} mutants of {len(everything)} generated in {len(targets)} target(s)")
    out = Path(args.report_dir)
    ws = Workspace(package_dir)
    log(f"runtime imported from a copy ({len(ws.tops)} functions indexed); certifying with up "
        f"to {args.jobs} children at a time")  # fmt: skip
    outcomes: dict[int, Outcome] = {}
    interrupted = False
    control = Control(ws, log)
    try:
        plans = {}
        for m in mutants:
            if (m.file, m.codes) not in plans:
                plans[m.file, m.codes] = candidates(m.file, ws.cases, m.codes)
        if args.case:
            plans = {k: [p for p in v if any(fnmatch.fnmatchcase(p[1], pattern)
                                             for pattern in args.case)]
                     for k, v in plans.items()}  # fmt: skip
            if not any(plans.values()):
                raise MutationError(f"--case {' '.join(args.case)}: no candidate case matches")
        plan = {m.id: plans[m.file, m.codes] for m in mutants}
        needed = list(dict.fromkeys(p for m in mutants if m.id not in equivalent
                                    for p in plan[m.id]))  # fmt: skip
        originals = {f: (package_dir / f).read_text() for f in {m.file for m in mutants}}
        try:
            if args.coverage and needed:
                control.run(needed, args.jobs, out)
            if control.failing:
                log(f"control run: {len(control.failing)} cases fail without a mutant; not used")

            def tasks():
                for i, m in enumerate(mutants):
                    if m.id in equivalent:
                        yield i, _equivalent(m, equivalent[m.id].why)
                    else:
                        yield i, run_mutant(ws, control, m, plan[m.id], args.coverage,
                                            originals[m.file], args.max_cases, args.cold)  # fmt: skip

            def done(i: int, o: Outcome) -> None:
                outcomes[i] = o
                caught, live, _ = rate(list(outcomes.values()))
                by = f" by {o.case}" if o.case else (f" ({o.note})" if o.note else "")
                where = f", {o.path.split(':')[0]}" if o.path else ""
                log(f"[{len(outcomes)}/{len(mutants)}] {o.status}{by}: {o.id} line {o.line}: "
                    f"{o.description} ({o.seconds:.1f} s, {o.cpu_seconds:.1f} CPU s{where}; kill rate so far "
                    f"{caught}/{live})")  # fmt: skip

            drive(ws, tasks(), args.jobs, done)
        except KeyboardInterrupt:  # report what ran
            interrupted = True
            log(f"interrupted: reporting the {len(outcomes)} mutants certified")
    finally:
        ws.close()
    done_outcomes = [outcomes[i] for i in sorted(outcomes)]
    # an entry is stale when its module was mutated and no mutant has its id (entries of
    # modules outside the targets, such as executors/, are judged by a run that targets them)
    mutated = {m.id.split("::", 1)[0] for m in everything}
    ids = {m.id for m in everything}
    stale = sorted(e for e in equivalent if e.split("::", 1)[0] in mutated and e not in ids)
    header = {
        "targets": list(targets),
        "operators": list(operators),
        "generated": len(everything),
        "sample": args.sample,
        "seed": args.seed,
        "coverage": args.coverage,
        "cases": args.case or [],
        "jobs": args.jobs,
        "control": control.note,
        "seconds": round(time.perf_counter() - started, 1),
        "control_failures": sorted(f"{cid} under {spec}" for spec, cid in control.failing),
        "stale_equivalents": stale,
        "interrupted": interrupted,
        "selected": len(mutants),
    }
    data, md = report(done_outcomes, header)
    out.mkdir(parents=True, exist_ok=True)
    (out / "mutation.json").write_text(json.dumps(data, indent=2) + "\n")
    (out / "mutation.md").write_text(md)
    caught, live, ratio = rate(done_outcomes)
    counts = Counter(o.status for o in done_outcomes)
    print(f"{'status':<12} mutants")
    for status in ("killed", "timeout", "survived", "equivalent"):
        print(f"{status:<12} {counts[status]}")
    print(f"kill rate    {caught}/{live} = {ratio:.1%} (non-equivalent; timeouts count as killed)")
    for entry in stale:
        if args.target is None and args.operator is None:
            print(f"problem: {EQUIVALENT_FILE.name} lists {entry!r}, which is no mutant now")
    print(f"reports: {out / 'mutation.md'}, {out / 'mutation.json'}")
    if interrupted:
        print(f"interrupted after {len(done_outcomes)} of {len(mutants)} mutants")
        return 1
    if floor is not None and ratio < floor["floor"]:
        print(f"problem: the kill rate {ratio:.4f} is below the floor {floor['floor']} of "
              f"{FLOOR_FILE.name}: a change lets mutants survive that were killed (see the "
              "survivors in the report; add a conformance case that catches them)")  # fmt: skip
        return 1
    return 0


def _equivalent(m: Mutant, reason: str):
    """An equivalent mutant's outcome (not run), as a task :func:`drive` takes."""
    return Outcome(m.id, m.file, m.line, m.operator, m.description, "equivalent", note=reason)
    yield  # a generator that forks nothing


if __name__ == "__main__":
    sys.exit(main())
