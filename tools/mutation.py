"""Mutation testing of the reference runtime: does the conformance suite catch its bugs?

    python tools/mutation.py [--target PATH]... [--operator OP]... [--sample N --seed S]
                             [--no-coverage] [--max-cases N] [--hand-written | --no-hand-written]
                             [--mutant ID]... [--report-dir DIR] [--list] [--floor]

It generates *mutants* of ``reference_runtime/`` (one small change of its source each),
certifies each with ``conformance certify``'s API on the cases likely to notice it, and writes
``mutation.md`` and ``mutation.json`` into ``--report-dir`` (default ``mutation-report/``).
Nothing in the runtime knows it is being tested, and its files are never edited: the tool
copies the ``reference_runtime`` package into a temporary folder, writes each mutant into the
copy, and certifies it in a child process (forked from the tool before it has imported the
runtime) whose import path puts the copy first; the judge (``conformance/``) is always the
repository's own. ``--target`` takes modules or folders under ``reference_runtime/`` (default:
the interpreter and the validator; ``--target ''``: every module but the command line and
the renderer of docs/rules.md).

Mutants, by operator (``--operator``):

- ``arithmetic``: ``+`` and ``-`` swapped, ``*`` to ``/``, ``/`` and ``//`` to ``*``, ``%`` to
  ``//``, ``&`` and ``|`` swapped (also in augmented assignments), ``-x`` and ``~x`` to ``x``;
- ``comparison``: ``<`` and ``<=``, ``>`` and ``>=``, ``==`` and ``!=``, ``in`` and ``not in``,
  ``is`` and ``is not`` swapped;
- ``boolean``: ``and`` and ``or`` swapped, ``not x`` to ``x``;
- ``constant``: an integer ``n`` to ``n + 1``, ``True`` and ``False`` swapped, a string compared
  with ``==`` / ``!=`` / ``in`` replaced by one nothing equals;
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
that can notice it. By default a *control run* first certifies the unmutated copy on every one
of them, recording which functions of the runtime each case calls; a mutant then runs only the
cases that call the function holding it (all of them for code run at import), cheapest first,
and stops at the first failing case (``certify(..., fail_fast=True)``). A case that fails in the
control run is never used. ``--no-coverage`` skips the control run: the group's suites run in
order (a validator module's own rule families first among the fail-closed cases), at most
``--max-cases`` of them, and a kill counts once the killing case passes on the unmutated copy.

Verdicts: ``killed`` (a case failed, or the runtime no longer imports); ``timeout`` (the mutant
used more than 30 CPU seconds plus 5 times what its cases took in the control run, or by a
fixed estimate per suite without one, or 10 times that in wall-clock time): counted as killed,
as mutation testing does, but reported apart; ``survived`` (every case passed; ``no case
executes it`` when no case of the control run reached it); ``equivalent`` (listed in
``tools/mutation_equivalent.yaml`` with the reason it cannot change behaviour; not run). The
kill rate is (killed + timeout) / (all - equivalent).

``--sample N --seed S`` certifies N generated mutants chosen by hashing their ids with the seed
(a change elsewhere leaves the choice of the others alone), and every hand-written one.
``--floor`` runs the CI sample pinned in ``tools/mutation_floor.yaml`` (every hand-written
mutant and the generated ones it lists by id) and fails when its kill rate is
below the committed floor (which may only rise). ``--list`` prints the mutants without running
them. Mutants run hand-written first, then in the order of the hash of (seed, id), so an
interrupted run (Ctrl-C, SIGTERM), which reports the mutants it certified, has a sample spread
over every module. Progress goes to stderr with the elapsed time; a summary ends the run. Exit status: 0 when
the run completed (with ``--floor``: and the rate is not below the floor), 1 otherwise, 2 on a
usage error. Needs ``os.fork`` (Linux, macOS); CPU-time limits read ``/proc`` (elsewhere, the
wall-clock limit alone applies).
"""

from __future__ import annotations

import argparse
import ast
import compileall
import contextlib
import copy
import difflib
import functools
import hashlib
import json
import os
import py_compile
import re
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repository: conformance/, fixtures/, goldens/

from conformance.cases.catalogue import catalogue  # noqa: E402
from conformance.certify import certify, judge  # noqa: E402

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
# Not what certification judges: the command line, and the renderer of docs/rules.md (only
# tools/generate_docs.py calls it; tests/test_generated_files.py holds the document to it).
EXCLUDED = ("cli.py", "__main__.py", "package/rules/catalogue_doc.py")
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
LOAD_SUITES = ("acceptance", "fail_closed")
RUN_SUITES = ("golden", "fail_closed", "determinism", "rows", "parity", "sampling")
# Module groups: (path prefixes under reference_runtime/, [(runtime spec, suites)]). The first
# group whose prefix matches a file decides; suites in the order they are tried without coverage.
GROUPS = (
    ("compiled interpreter", ("workflow/compiled.py", "codegen.py"), ((COMPILED, RUN_SUITES),)),
    ("native executor", ("executors/native/",), ((NATIVE, ("golden", "executor", "parity")),)),
    ("lowering", ("package/lowering/",), ((PLAIN, (*LOAD_SUITES, *RUN_SUITES)),)),
    ("validator", ("package/",), ((PLAIN, (*LOAD_SUITES, "golden")),)),
    (
        "executors",
        ("executors/",),
        ((PLAIN, (*LOAD_SUITES, *RUN_SUITES)), (NATIVE, ("executor",))),
    ),
    ("interpreter", ("",), ((PLAIN, (*RUN_SUITES, "acceptance")),)),
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
}
# A mutant's limit in CPU seconds: BASE_TIMEOUT plus TIMEOUT_FACTOR times what its cases took
# (in the control run, or by SUITE_SECONDS); and WALL_FACTOR times that in wall-clock time
# (a mutant that hangs without computing).
BASE_TIMEOUT, TIMEOUT_FACTOR, WALL_FACTOR = 30.0, 5.0, 10.0


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
        '        """Row ``r``\'s chunk replaces its stream, is appended to it, or is added as an '
        'event."""\n',
        '        """Row ``r``\'s chunk replaces its stream, is appended to it, or is added as an '
        'event."""\n'
        "        cut = chunk_axis if chunk_axis is not None else chunk.ndim - 1\n"
        "        chunk = np.take(chunk, np.arange(max(0, chunk.shape[cut] - 1)), axis=cut)\n",
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
    diff: str = ""


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


class _Finder:
    """Walks a module and lists (node, replacement source, operator, description, scope,
    import_time) for every mutation point."""

    def __init__(self, text: str):
        self.points: list[tuple] = []
        self.scope: list[str] = []
        self.in_function = False
        self.function: int | None = None
        self.visit(ast.parse(text))

    def add(self, node, replacement: str, operator: str, description: str) -> None:
        scope = ".".join(self.scope) or "<module>"
        self.points.append(
            (node, replacement, operator, description, scope, not self.in_function, self.function)
        )

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
            outer_function = self.function
            if not isinstance(node, ast.ClassDef):
                self.function = _first_line(node)
            self.body(node.body)
            self.scope.pop()
            self.in_function, self.function = outer, outer_function
            return
        if isinstance(node, ast.Lambda):
            for default in (*node.args.defaults, *node.args.kw_defaults):
                if default is not None:
                    self.visit(default)
            outer, self.in_function = self.in_function, True
            self.visit(node.body)
            self.in_function = outer
            return
        if isinstance(node, ast.Module):
            self.body(node.body)
            return
        if isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.visit(node.value)
            self.statement(node)
            return
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
                for operand in (node.left, *node.comparators):
                    if isinstance(operand, ast.Constant) and isinstance(operand.value, str):
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


def _enclosing_function(text: str, line: int) -> int | None:
    """The first line of the innermost function holding ``line`` (None at module level)."""
    found = None
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and (node.lineno <= line <= node.end_lineno)
            and (found is None or node.lineno > found.lineno)
        ):
            found = node
    return None if found is None else _first_line(found)


RULE_CODE = re.compile(r"[A-H][0-9]{2}")


def _rule_codes(text: str) -> dict[int | None, frozenset[str]]:
    """The rule codes (string constants like ``"D36"``) each function of a module names, by the
    function's first line (None: the whole module)."""
    tree = ast.parse(text)
    out = {}
    for node in [tree, *ast.walk(tree)]:
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef):
            key = None if isinstance(node, ast.Module) else _first_line(node)
            out[key] = frozenset(
                c.value
                for c in ast.walk(node)
                if isinstance(c, ast.Constant)
                and isinstance(c.value, str)
                and RULE_CODE.fullmatch(c.value)
            )
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
            node, replacement, operator, description, scope, import_time, function = point
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
            function = _enclosing_function(text, line)
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


def read_equivalent(path: Path) -> dict[str, str]:
    try:
        data = yaml.safe_load(path.read_text()) if path.exists() else {}
    except (OSError, yaml.YAMLError) as exc:
        raise MutationError(f"{path.name}: {exc}") from None
    data = data or {}
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in data.items()
    ):
        raise MutationError(f"{path.name}: map each mutant id to the reason it is equivalent")
    return data


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


class Workspace:
    """A copy of reference_runtime/ whose files the mutants are written into, one at a time;
    children forked from this process certify it."""

    def __init__(self, package_dir: Path):
        self.tmp = tempfile.TemporaryDirectory(prefix="mutation-")
        self.root = Path(self.tmp.name)
        self.package = self.root / PACKAGE
        shutil.copytree(package_dir, self.package,
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
        # Bytecode checked against the source's hash: a mutated file is always recompiled.
        compileall.compile_dir(self.package, quiet=1,
                               invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)  # fmt: skip
        self.cases = {c.id: c for c in catalogue()}

    def close(self) -> None:
        self.tmp.cleanup()

    def fork(self, work, timeout: float, mutant: Mutant | None = None):
        """Run ``work()`` (returning JSON data) in a child with ``mutant`` written into the
        copy; (data, None), or (None, "timeout") / (None, why the child died)."""
        path = self.package / mutant.file if mutant else None
        original = path.read_text() if path else None
        if path:
            path.write_text(mutant.source)
        out = self.root / "child.json"
        out.unlink(missing_ok=True)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child
            code = 0
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.setpgid(0, 0)
                sys.path.insert(0, str(self.root))
                sys.dont_write_bytecode = True
                out.write_text(json.dumps(work()))
            except BaseException:
                code = 3
                out.write_text(json.dumps({"crash": traceback.format_exc(limit=3)}))
            finally:
                os._exit(code)
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # also in the child: whichever runs first
        try:
            deadline = time.monotonic() + WALL_FACTOR * timeout
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                if _cpu_seconds(pid) > timeout or time.monotonic() > deadline:
                    _kill(pid)
                    return None, "timeout"
                time.sleep(0.02)
            if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGTERM, signal.SIGINT):
                raise KeyboardInterrupt  # stopped from outside: not the mutant's doing
            try:
                return json.loads(out.read_text()), None
            except (OSError, ValueError):
                return None, f"the child ended with status {status} and no result"
        except KeyboardInterrupt:
            _kill(pid)
            raise
        finally:
            if path:
                path.write_text(original)


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


class Control:
    """The unmutated copy certified on every candidate case, recording which functions of the
    runtime each case calls (coverage mode), or confirming kills one case at a time."""

    def __init__(self, ws: Workspace, pairs: list[tuple[str, str]], log):
        self.ws = ws
        self.seconds: dict[tuple[str, str], float] = {}
        self.calls: dict[tuple[str, str], set[tuple[str, int]]] = {}
        self.at_import: set[tuple[str, int]] = set()  # functions called while importing
        self.failing: dict[tuple[str, str], str] = {}
        self.confirmed: dict[tuple[str, str], bool] = {}
        self.log = log
        if pairs:
            self._trace(pairs)

    def _trace(self, pairs) -> None:
        ws = self.ws

        def work():
            import importlib

            prefix = str(ws.package) + os.sep
            codes: dict[int, object] = {}

            def tracer(frame, event, arg):
                codes[id(frame.f_code)] = frame.f_code  # a call: no line events

            def called() -> list:
                found = {
                    (c.co_filename[len(prefix) :], c.co_firstlineno)
                    for c in codes.values()
                    if c.co_filename.startswith(prefix)
                }
                codes.clear()
                return sorted(found)

            sys.settrace(tracer)  # every module imported: what runs at import
            try:
                for path in sorted(ws.package.rglob("*.py")):
                    module = path.relative_to(ws.root).with_suffix("").as_posix()
                    module = module.replace("/", ".").removesuffix(".__init__")
                    if not module.endswith("__main__"):
                        importlib.import_module(module)
                from conformance.runtimes import open_runtime
            finally:
                sys.settrace(None)
            out = {"at_import": called(), "cases": []}
            runtimes = {}
            for n, (spec, cid) in enumerate(pairs, 1):
                if spec not in runtimes:
                    runtime = open_runtime(spec)
                    runtimes[spec] = (runtime, set(runtime.describe().get("features", [])))
                runtime, features = runtimes[spec]
                codes.clear()
                sys.settrace(tracer)
                try:
                    result = judge(runtime, ws.cases[cid], features)
                finally:
                    sys.settrace(None)
                out["cases"].append(
                    [spec, cid, result.status, result.got, result.seconds, called()]
                )
                if n % 100 == 0 or n == len(pairs):
                    print(f"  control: {n}/{len(pairs)} cases", file=sys.stderr, flush=True)
            return out

        data, error = ws.fork(work, timeout=7200)
        if error or "crash" in data:
            raise MutationError(f"the control run failed: {error or data['crash']}")
        self.at_import = {tuple(k) for k in data["at_import"]}
        for spec, cid, status, got, seconds, calls in data["cases"]:
            key = (spec, cid)
            if status == "not_applicable":
                continue
            if status != "passed":
                self.failing[key] = got
                continue
            self.seconds[key] = seconds
            self.calls[key] = {tuple(k) for k in calls}

    def select(self, mutant: Mutant, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The candidate pairs that passed the control run and call the function holding the
        mutant (all of them for code run at import), cheapest first."""
        where = (mutant.file, mutant.function)
        everywhere = mutant.import_time or where in self.at_import
        chosen = [p for p in pairs if p in self.calls and (everywhere or where in self.calls[p])]
        return sorted(chosen, key=lambda p: self.seconds[p])

    def confirm(self, pair: tuple[str, str]) -> bool:
        """Whether the case passes on the unmutated copy (no coverage: checked on a kill)."""
        if pair not in self.confirmed:
            cases = self.ws.cases
            data, error = self.ws.fork(lambda: _first_failure([pair], cases), timeout=600)
            self.confirmed[pair] = bool(data) and not error and not data.get("killed", True)
            if not self.confirmed[pair]:
                self.log(f"  control: {pair[1]} under {pair[0]} fails without a mutant; "
                         "it is not used")  # fmt: skip
        return self.confirmed[pair]


def run_mutant(ws: Workspace, control: Control, mutant: Mutant, pairs, coverage: bool,
               original: str, max_cases: int | None = None) -> Outcome:  # fmt: skip
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
    if not coverage:
        estimate = sum(SUITE_SECONDS.get(ws.cases[cid].suite, 0.3) for _, cid in pairs)
    timeout = BASE_TIMEOUT + TIMEOUT_FACTOR * estimate
    cases = ws.cases
    while True:
        data, error = ws.fork(functools.partial(_first_failure, pairs, cases), timeout, mutant)
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
        if coverage or data["case"] not in cases or control.confirm(pair):
            out.status, out.case, out.spec = "killed", data["case"], data["spec"]
            out.got, out.note = data["got"], ""
            break
        pairs = [p for p in pairs if p != pair]  # the case fails anyway: try the rest
    out.seconds = round(time.perf_counter() - start, 2)
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
    parser.add_argument("--report-dir", default="mutation-report")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    args = parser.parse_args(argv)
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

    signal.signal(signal.SIGTERM, _terminated)  # clean up the copy and the running child
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
    if args.list:
        for m in mutants:
            mark = "  (equivalent)" if m.id in equivalent else ""
            print(f"{m.id}  line {m.line}: {m.description}{mark}")
        print(f"{len(mutants)} mutants of {len(everything)}")
        return 0
    mutants = in_run_order(mutants, args.seed)
    log(f"{len(mutants)} mutants of {len(everything)} generated in {len(targets)} target(s)")
    ws = Workspace(package_dir)
    try:
        plans = {}
        for m in mutants:
            if (m.file, m.codes) not in plans:
                plans[m.file, m.codes] = candidates(m.file, ws.cases, m.codes)
        plan = {m.id: plans[m.file, m.codes] for m in mutants}
        needed = list(dict.fromkeys(p for m in mutants if m.id not in equivalent
                                    for p in plan[m.id]))  # fmt: skip
        if args.coverage:
            log(f"control run: {len(needed)} (runtime, case) pairs, recording coverage")
        control = Control(ws, needed if args.coverage else [], log)
        if control.failing:
            log(f"control run: {len(control.failing)} cases fail without a mutant; not used")
        originals = {f: (package_dir / f).read_text() for f in {m.file for m in mutants}}
        outcomes = []
        interrupted = False
        for i, m in enumerate(mutants, 1):
            try:
                if m.id in equivalent:
                    o = Outcome(m.id, m.file, m.line, m.operator, m.description, "equivalent",
                                note=equivalent[m.id])  # fmt: skip
                else:
                    o = run_mutant(ws, control, m, plan[m.id], args.coverage,
                                   originals[m.file], args.max_cases)  # fmt: skip
            except KeyboardInterrupt:  # report what ran
                interrupted = True
                log(f"interrupted: reporting the {len(outcomes)} mutants certified")
                break
            outcomes.append(o)
            caught, live, ratio = rate(outcomes)
            by = f" by {o.case}" if o.case else (f" ({o.note})" if o.note else "")
            log(f"[{i}/{len(mutants)}] {o.status}{by}: {m.id} line {m.line}: {m.description} "
                f"({o.seconds:.1f} s; kill rate so far {caught}/{live})")  # fmt: skip
    finally:
        ws.close()
    stale = sorted(set(equivalent) - {m.id for m in everything})
    header = {
        "targets": list(targets),
        "operators": list(operators),
        "generated": len(everything),
        "sample": args.sample,
        "seed": args.seed,
        "coverage": args.coverage,
        "seconds": round(time.perf_counter() - started, 1),
        "control_failures": sorted(f"{cid} under {spec}" for spec, cid in control.failing),
        "stale_equivalents": stale,
        "interrupted": interrupted,
        "selected": len(mutants),
    }
    data, md = report(outcomes, header)
    out = Path(args.report_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "mutation.json").write_text(json.dumps(data, indent=2) + "\n")
    (out / "mutation.md").write_text(md)
    caught, live, ratio = rate(outcomes)
    counts = Counter(o.status for o in outcomes)
    print(f"{'status':<12} mutants")
    for status in ("killed", "timeout", "survived", "equivalent"):
        print(f"{status:<12} {counts[status]}")
    print(f"kill rate    {caught}/{live} = {ratio:.1%} (non-equivalent; timeouts count as killed)")
    for entry in stale:
        if args.target is None and args.operator is None:
            print(f"problem: {EQUIVALENT_FILE.name} lists {entry!r}, which is no mutant now")
    print(f"reports: {out / 'mutation.md'}, {out / 'mutation.json'}")
    if interrupted:
        print(f"interrupted after {len(outcomes)} of {len(mutants)} mutants")
        return 1
    if floor is not None and ratio < floor["floor"]:
        print(f"problem: the kill rate {ratio:.4f} is below the floor {floor['floor']} of "
              f"{FLOOR_FILE.name}: a change lets mutants survive that were killed (see the "
              "survivors in the report; add a conformance case that catches them)")  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
