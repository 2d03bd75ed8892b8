"""Where each rule is enforced, found in the code itself so that the catalogue cannot drift.

Two kinds of site:

- code: a rule code written as a literal argument of a call (``ctx.add("D29", ...)``,
  ``Violation("A94", ...)``, ``RunError("E56", ...)``, ``self.check_type("D33", ...)``) or as
  the default of a parameter named ``code``, in any module of ``reference_runtime`` (the rule
  table and the typed model excepted), attributed to the function that holds it;
- schema: an ``x-rule`` or ``x-required-rule`` annotation of the published JSON Schema of each
  revision (the ``rule=`` of a typed model field), attributed to the type (by its upstream
  name) and field that carry it.

``docs/rules.md`` lists both under every rule (``catalogue_doc``).
"""

from __future__ import annotations

import ast
import functools
import json
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..revisions import REVISIONS
from .catalogue import RULES

SOURCE = Path(__file__).resolve().parents[2]  # the reference_runtime package
# Modules whose code literals define rules or annotate the model rather than enforce anything:
# the rule table itself, and the typed model (its annotations are read through the schema).
NOT_SCANNED = frozenset(
    {
        "package/model.py",
        "package/rules/catalogue.py",
        "package/rules/catalogue_doc.py",
        "package/rules/enforcement.py",
    }
)
# Calls that look a rule up rather than report it.
LOOKUPS = frozenset({"hint_for"})
SCHEMA_KEYS = ("x-rule", "x-required-rule")


@dataclass(frozen=True)
class Site:
    """One place that enforces a rule: a function of a module, or a field of a schema type."""

    module: str  # a path under reference_runtime/ ("package/rules/loops.py"), or "schema"
    name: str  # the function ("Walk.define_inputs"), or the schema type and field ("Phi.cases")


# ------------------------------------------------------------------ code


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(SOURCE.rglob("*.py")):
        module = path.relative_to(SOURCE).as_posix()
        if module not in NOT_SCANNED and "__pycache__" not in path.parts:
            yield module, path


class _CodeLiterals(ast.NodeVisitor):
    """The rule codes a module reports, each with the qualified name of its function."""

    def __init__(self, codes: Collection[str]):
        self.codes = codes
        self.scope: list[str] = []
        self.found: list[tuple[str, str]] = []  # (code, function)

    def _note(self, node: ast.AST | None) -> None:
        if isinstance(node, ast.Constant) and node.value in self.codes:
            self.found.append((node.value, ".".join(self.scope) or "module level"))

    def _nested(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        if not isinstance(node, ast.ClassDef):
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            defaults = zip(
                positional[len(positional) - len(args.defaults) :], args.defaults, strict=True
            )
            for arg, default in (*defaults, *zip(args.kwonlyargs, args.kw_defaults, strict=True)):
                if arg.arg == "code":
                    self._note(default)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = _nested
    visit_AsyncFunctionDef = visit_FunctionDef
    visit_ClassDef = _nested

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name not in LOOKUPS:
            for arg in (*node.args, *(k.value for k in node.keywords)):
                self._note(arg)
        self.generic_visit(node)


def code_sites(codes: Collection[str]) -> dict[str, list[Site]]:
    """Every code site of each rule in ``codes``, by module path, then in source order."""
    out: dict[str, list[Site]] = {}
    for module, path in _modules():
        visitor = _CodeLiterals(codes)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=module))
        for code, function in visitor.found:
            site = Site(module, function)
            if site not in out.setdefault(code, []):
                out[code].append(site)
    return out


# ------------------------------------------------------------------ schema


def _annotations(node, field: str | None) -> Iterator[tuple[str, str | None]]:
    """(code, field) for every rule annotation in a schema node, not following references."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in SCHEMA_KEYS and isinstance(value, str):
                yield value, field if key == "x-rule" else None
            elif key == "properties" and field is None and isinstance(value, dict):
                for prop, schema in value.items():
                    yield from _annotations(schema, prop)
            else:
                yield from _annotations(value, field)
    elif isinstance(node, list):
        for item in node:
            yield from _annotations(item, field)


def schema_sites(codes: Collection[str]) -> dict[str, list[Site]]:
    """Every schema annotation of each rule in ``codes``: ``Type.field`` for a field's
    constraint, ``Type`` for the type's required keys; types by their upstream names."""
    out: dict[str, list[Site]] = {}
    for schema_path in dict.fromkeys(revision.schema for revision in REVISIONS):
        schema = json.loads(Path(schema_path).read_text(encoding="utf-8"))
        for name, definition in schema.get("$defs", {}).items():
            type_name = definition.get("x-upstream", name)
            for code, field in _annotations(definition, None):
                if code not in codes:
                    continue
                site = Site("schema", f"{type_name}.{field}" if field else type_name)
                if site not in out.setdefault(code, []):
                    out[code].append(site)
    return out


# ------------------------------------------------------------------ both


@functools.cache
def enforcement_sites() -> dict[str, tuple[Site, ...]]:
    """Every site of every catalogued rule (code sites first, then schema sites)."""
    codes = frozenset(RULES)
    found = code_sites(codes)
    for code, sites in schema_sites(codes).items():
        found.setdefault(code, []).extend(sites)
    return {code: tuple(found.get(code, ())) for code in RULES}


def describe(sites: tuple[Site, ...]) -> str:
    """``Enforced in: `package/rules/loops.py` (`check_loop`), schema (`Phi.{cases, default}`)``"""
    modules: dict[str, list[str]] = {}
    for site in sites:
        if site.module != "schema":
            modules.setdefault(site.module, []).append(f"`{site.name}`")
    parts = [f"`{module}` ({', '.join(names)})" for module, names in modules.items()]
    schema = _schema_names([site.name for site in sites if site.module == "schema"])
    if schema:
        parts.append(f"schema ({', '.join(schema)})")
    return "Enforced in: " + ("; ".join(parts) if parts else "nowhere found")


def _schema_names(names: list[str]) -> list[str]:
    """``Type.field`` names grouped by type (``Type.field``, ``Type.{a, b}``), and
    ``Type (required keys)`` for a type whose missing keys report the rule."""
    fields: dict[str, list[str]] = {}
    required: set[str] = set()
    for name in names:
        type_name, _, field = name.partition(".")
        fields.setdefault(type_name, [])
        if field:
            fields[type_name].append(field)
        else:
            required.add(type_name)
    out = []
    for type_name, of_type in fields.items():
        if type_name in required:
            out.append(f"`{type_name}` (required keys)")
        if len(of_type) == 1:
            out.append(f"`{type_name}.{of_type[0]}`")
        elif of_type:
            out.append(f"`{type_name}.{{{', '.join(of_type)}}}`")
    return out
