"""Read the semantic checks of the format's upstream loader (``validation.rs``) into plain data.

Every check the upstream loader makes reports one message: almost all of them through an
``errors.push(...)`` whose argument is a ``format!`` (or a plain string literal). This module
finds each such call, the function it sits in (the innermost ``fn``, nested helpers included)
and its message template, normalised so that it is stable across reformatting:

- the text of the string literal, with Rust's ``\\`` line continuations joined and its escapes
  decoded;
- whitespace collapsed to single spaces;
- every ``{...}`` placeholder (``{path}``, ``{:?}``, ``{dynamic_axis:?}``) written ``{}``.

Each check gets a stable id, ``"<function>: <template>"``; when one function reports the same
template twice, the later ones are told apart by `` #2``, `` #3``, ... in source order.

A few checks are reported another way than ``errors.push``; :data:`OTHER_CHECKS` names them,
each with a fragment of source that must be present for the check to be read.

It is a reader for this one, well-formed source, not a Rust parser: it understands comments,
string and character literals, lifetimes, ``fn`` items (nested ones too) and brace nesting.
``test_upstream_checks.py`` compares what it reads with the notes of our rule catalogue.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# Checks reported without ``errors.push``: (function, template, source fragment that makes it).
OTHER_CHECKS: tuple[tuple[str, str, str], ...] = (
    # `validate` appends every required capability the runtime does not support, the message
    # being the capability's name itself.
    (
        "validate_structure_and_capabilities",
        "{}",
        ".filter(|capability| !runtime.supported.contains(capability))",
    ),
)

_FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")
_RAW = re.compile(r'r(#*)"')
_CHAR = re.compile(r"'(?:\\.|\\u\{[0-9a-fA-F]+\}|[^\\'\n])'")
_PUSH = re.compile(r"\berrors\s*\.\s*push\s*\(")
_FORMAT = re.compile(r"format!\s*\(")
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}


@dataclass(frozen=True)
class UpstreamCheck:
    function: str  # the innermost enclosing fn
    template: str  # the normalised message
    line: int  # 1-based line of the errors.push (or of the fragment, for OTHER_CHECKS)
    ident: str  # "<function>: <template>", unique in the file

    def __str__(self) -> str:
        return self.ident


def check_id(function: str, template: str) -> str:
    return f"{function}: {template}"


def _decode(raw: str) -> str:
    """The value of a Rust string literal's body (between the quotes)."""
    out: list[str] = []
    i = 0
    while i < len(raw):
        c = raw[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == "\n":  # line continuation: the newline and the next line's indentation go
            i += 2
            while i < len(raw) and raw[i] in " \t\r\n":
                i += 1
            continue
        if nxt == "u":
            end = raw.index("}", i)
            out.append(chr(int(raw[i + 3 : end], 16)))
            i = end + 1
            continue
        if nxt == "x":
            out.append(chr(int(raw[i + 2 : i + 4], 16)))
            i += 4
            continue
        out.append(_ESCAPES[nxt])
        i += 2
    return "".join(out)


def normalise(message: str, formatted: bool = True) -> str:
    """Collapse whitespace and write every ``{...}`` placeholder as ``{}``."""
    text = " ".join(message.split())
    if formatted:
        text = text.replace("{{", "\0").replace("}}", "\1")
        text = _PLACEHOLDER.sub("{}", text)
        text = text.replace("\0", "{{").replace("\1", "}}")
    return text


class _Source:
    """Positions of the code in a Rust source: what is comment or literal, and which ``fn``
    each offset belongs to."""

    def __init__(self, text: str):
        self.text = text
        self.code = [True] * len(text)  # False inside comments and literals
        # literal start -> (body start, body end, raw: no escapes)
        self.literals: dict[int, tuple[int, int, bool]] = {}
        self._scan()
        self.functions = self._functions()  # (start, end, name) of each fn body

    def _scan(self) -> None:
        text, n, i = self.text, len(self.text), 0
        while i < n:
            c = text[i]
            if text.startswith("//", i):
                end = text.find("\n", i)
                end = n if end < 0 else end
            elif text.startswith("/*", i):
                end, depth, j = None, 0, i
                while j < n:
                    if text.startswith("/*", j):
                        depth, j = depth + 1, j + 2
                    elif text.startswith("*/", j):
                        depth, j = depth - 1, j + 2
                        if depth == 0:
                            end = j
                            break
                    else:
                        j += 1
                end = n if end is None else end
            elif c == '"':
                j = i + 1
                while text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                self.literals[i] = (i + 1, j, False)
                end = j + 1
            elif c == "r" and not _ident_char(text, i - 1) and (raw := _RAW.match(text, i)):
                hashes = raw.group(1)
                start = raw.end()
                close = text.index('"' + hashes, start)
                self.literals[i] = (start, close, True)
                end = close + 1 + len(hashes)
            elif c == "'" and (m := _CHAR.match(text, i)):
                end = m.end()
            else:
                i += 1
                continue
            for k in range(i, end):
                self.code[k] = False
            i = end

    def _functions(self) -> list[tuple[int, int, str]]:
        text, found = self.text, []
        stack: list[tuple[str, int]] = []  # open fn bodies: (name, brace depth at opening)
        pending: str | None = None
        depth = 0
        i = 0
        while i < len(text):
            if not self.code[i]:
                i += 1
                continue
            m = _FN.match(text, i) if text[i] == "f" and not _ident_char(text, i - 1) else None
            if m:
                pending = m.group(1)
                i = m.end()
                continue
            c = text[i]
            if c == "{":
                depth += 1
                if pending is not None:
                    stack.append((pending, depth, i))
                    pending = None
            elif c == "}":
                if stack and stack[-1][1] == depth:
                    name, _, start = stack.pop()
                    found.append((start, i, name))
                depth -= 1
            elif c == ";" and pending is not None:
                pending = None  # a declaration without a body
            i += 1
        return found

    def function_at(self, offset: int) -> str:
        inside = [(start, name) for start, end, name in self.functions if start < offset < end]
        if not inside:
            raise ValueError(f"offset {offset} is in no fn")
        return max(inside)[1]  # the innermost: the one that opened last

    def line_of(self, offset: int) -> int:
        return self.text.count("\n", 0, offset) + 1

    def next_code(self, offset: int) -> int:
        while self.text[offset].isspace() or not self.code[offset] and offset not in self.literals:
            offset += 1
        return offset


def _ident_char(text: str, i: int) -> bool:
    return i >= 0 and (text[i].isalnum() or text[i] == "_")


def read_checks(path: Path) -> list[UpstreamCheck]:
    """Every check of ``validation.rs`` at ``path``, in source order, with unique ids."""
    text = Path(path).read_text(encoding="utf-8")
    source = _Source(text)
    raw: list[tuple[int, str, str]] = []  # (offset, function, template)
    for m in _PUSH.finditer(text):
        if not source.code[m.start()]:
            continue
        at = source.next_code(m.end())
        formatted = False
        fm = _FORMAT.match(text, at)
        if fm:
            formatted = True
            at = source.next_code(fm.end())
        if at not in source.literals:
            raise ValueError(f"line {source.line_of(m.start())}: errors.push without a literal")
        start, end, raw_literal = source.literals[at]
        body = text[start:end] if raw_literal else _decode(text[start:end])
        template = normalise(body, formatted)
        raw.append((m.start(), source.function_at(m.start()), template))
    for function, template, fragment in OTHER_CHECKS:
        at = text.find(fragment)
        if at >= 0 and source.function_at(at) == function:
            raw.append((at, function, template))
    raw.sort()
    checks: list[UpstreamCheck] = []
    seen: dict[str, int] = {}
    for offset, function, template in raw:
        base = check_id(function, template)
        seen[base] = seen.get(base, 0) + 1
        ident = base if seen[base] == 1 else f"{base} #{seen[base]}"
        checks.append(UpstreamCheck(function, template, source.line_of(offset), ident))
    return checks


def split_id(ident: str) -> tuple[str, str]:
    """``"fn: template #2"`` -> ``("fn", "template #2")``."""
    function, sep, template = ident.partition(": ")
    if not sep:
        raise ValueError(f"not a check id: {ident!r}")
    return function, template


if __name__ == "__main__":  # pragma: no cover - a reading aid
    import sys

    for check in read_checks(Path(sys.argv[1])):
        print(f"{check.line:5}  {check.ident}")
