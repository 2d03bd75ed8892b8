"""What the documentation quotes still exists: every case id in docs/ and README.md names a case
of the catalogue, and every ``conformance`` / ``reference-runtime`` command line quoted names a
subcommand and options that command has."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from conformance.cases.catalogue import catalogue
from conformance.cli import parser as conformance_parser
from reference_runtime.cli import build_parser as runtime_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
SUITES = ("acceptance", "fail_closed", "golden", "determinism", "rows", "executor", "parity",
          "component_sessions", "sampling", "kv_admission", "continuous_batching")  # fmt: skip
CASE_ID = re.compile(rf"\b((?:{'|'.join(SUITES)})/[A-Za-z0-9_./-]+)(<?)")
COMMAND = re.compile(r"\b(conformance|reference-runtime)((?: +[-\w.:=/'\"\[\],@<>]+)*)")


def quoted_case_ids():
    for doc in DOCS:
        for match in CASE_ID.finditer(doc.read_text()):
            if match.group(2):  # a pattern such as fail_closed/run/<run case>
                continue
            yield doc.name, match.group(1).rstrip(".")


def code(text: str):
    """The code of a markdown text: fenced blocks' lines and inline code spans, with quoted
    arguments removed."""
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        for snippet in [line] if fenced else re.findall(r"`([^`]+)`", line):
            yield re.sub(r"\"[^\"]*\"|'[^']*'", "", snippet)


def quoted_commands():
    for doc in DOCS:
        for line in code(doc.read_text()):
            for match in COMMAND.finditer(line):
                words = match.group(2).split()
                if words and not words[0].startswith(("-", "`")):
                    yield doc.name, match.group(1), words


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


PARSERS = {"conformance": conformance_parser(), "reference-runtime": runtime_parser()}


def test_every_quoted_case_id_exists():
    ids = {c.id for c in catalogue()}
    quoted = list(quoted_case_ids())
    assert quoted, "the docs quote no case id: the pattern is broken"
    missing = [(doc, case_id) for doc, case_id in quoted if case_id not in ids]
    assert not missing


def test_every_quoted_command_line_exists():
    checked = 0
    problems = []
    for doc, program, words in quoted_commands():
        top = PARSERS[program]
        commands = _subcommands(top)
        name = words[0]
        if name not in commands:
            problems.append((doc, program, name, "no such command"))
            continue
        options = _options(commands[name]) | _options(top)
        for word in words[1:]:
            flag = word.strip("[]`'\"").split("=")[0]
            if flag.startswith("-") and flag not in options:
                problems.append((doc, program, name, flag))
        checked += 1
    assert checked >= 10, "too few command lines found in the docs: the pattern is broken"
    assert not problems


@pytest.mark.parametrize("program", sorted(PARSERS))
def test_every_subcommand_has_help(program, capsys):
    for name, sub in _subcommands(PARSERS[program]).items():
        assert sub.format_help().strip(), name
