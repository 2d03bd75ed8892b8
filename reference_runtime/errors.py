"""One exception hierarchy for the whole runtime.

Every error a user can see carries a stable rule ``code``, a ``location`` (a path in the
metadata document such as ``pipeline.workflow.steps[0].inputs.logits``, or a file path), a
``message`` that says what is wrong and a ``hint`` that says how to fix it.

Validation never stops at the first problem: a refused package raises one
:class:`PackageError` that holds every :class:`Violation`, in document order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

PathPart = str | int
DocPath = tuple[PathPart, ...]

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


def format_location(path: Sequence[PathPart]) -> str:
    """Render a document path: ``a.b[0].c`` with keys that contain dots quoted.

    ``("pipeline", "workflow", "inputs", "request.input_ids")`` renders as
    ``pipeline.workflow.inputs["request.input_ids"]`` so the location stays unambiguous.
    """
    out: list[str] = []
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            out.append(f"[{part}]")
        elif _PLAIN_KEY.match(str(part)):
            out.append(("." if out else "") + str(part))
        else:
            escaped = str(part).replace("\\", "\\\\").replace('"', '\\"')
            out.append(f'["{escaped}"]')
    return "".join(out) or "<document>"


@dataclass(frozen=True)
class Violation:
    """One broken rule at one place in a package."""

    code: str
    path: DocPath
    message: str
    hint: str
    order: tuple = ()

    @property
    def location(self) -> str:
        return format_location(self.path)

    def to_json(self) -> dict:
        return {
            "code": self.code,
            "location": self.location,
            "message": self.message,
            "hint": self.hint,
        }

    def __str__(self) -> str:
        return f"[{self.code}] {self.location}: {self.message} (fix: {self.hint})"


class ReferenceRuntimeError(Exception):
    """Base class of every error this project raises on purpose."""

    code = "E000"

    def __init__(self, message: str, *, code: str | None = None, hint: str = "", location=""):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.hint = hint
        self.location = location

    def to_json(self) -> dict:
        return {"code": self.code, "message": self.message, "hint": self.hint}


class UsageError(ReferenceRuntimeError):
    """The caller used an API or command wrongly (bad argument, unreadable path)."""

    code = "USAGE"


class RunError(ReferenceRuntimeError):
    """A request was refused, or failed while the workflow ran (nothing of it is kept).

    ``code`` is a run-time rule code of the catalogue (``docs/rules.md``); ``location`` names the
    step, value or input at fault when there is one.
    """

    def __init__(self, code: str, message: str, *, hint: str = "", location: str = ""):
        super().__init__(message, code=code, hint=hint, location=location)


class PackageError(ReferenceRuntimeError):
    """A package was refused at load time; ``violations`` lists every reason."""

    def __init__(self, package: str, violations: Iterable[Violation]):
        self.package = str(package)
        self.violations: tuple[Violation, ...] = tuple(violations)
        if not self.violations:
            raise ValueError("PackageError needs at least one violation")
        first = self.violations[0]
        count = len(self.violations)
        lines = [f"package {self.package} was refused ({count} violation{'s' * (count != 1)}):"]
        lines += [f"  {v}" for v in self.violations]
        super().__init__("\n".join(lines), code=first.code, hint=first.hint)
        self.location = first.location

    @property
    def codes(self) -> list[str]:
        return [v.code for v in self.violations]
