"""Revisions of the format: the document's ``schema_version`` selects the one the loader reads.

Each revision is a typed model (its root class) and the JSON Schema derived from it. Today there
is one, the upstream snapshot this runtime implements (``docs/format.md`` names it); a document
of a later revision is refused with a diagnostic naming what is supported, never read as this
one (a later revision renames and retires fields, so reading it as ours would mis-read it).
Supporting a second revision means adding a :class:`Revision` here with its own model module;
nothing else in the loader changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import Violation
from . import model
from .schema import SCHEMA_PATH


@dataclass(frozen=True)
class Revision:
    name: str  # the canonical spelling of schema_version
    spellings: tuple  # the documented schema_version values that select it (None: absent)
    upstream: str  # the upstream snapshot it follows
    root: type  # the typed model's root class
    schema: Path  # the JSON Schema derived from that model


V1 = Revision(
    name="v1",
    spellings=(None, "v1", "1.0"),
    upstream="onnx-genai snapshot ac9c7dd06 (2026-08-22)",
    root=model.Metadata,
    schema=SCHEMA_PATH,
)

REVISIONS: tuple[Revision, ...] = (V1,)

_VERSION = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?$")


def supported_spellings() -> str:
    return ", ".join(repr(s) for r in REVISIONS for s in r.spellings if s is not None)


def select(document: dict) -> tuple[Revision | None, Violation | None]:
    """The revision a parsed document declares, or the violation that refuses it. A version is
    read as numbers (`v1`, `1.0`, `v1.0.0` all number revision 1)."""
    version = document.get("schema_version")
    for revision in REVISIONS:
        if version in revision.spellings:
            return revision, None
    if not isinstance(version, str):
        return REVISIONS[-1], None  # a wrong type: the schema reports it (A05)
    m = _VERSION.match(version.strip())
    if m is None:
        return None, Violation(
            "A04",
            ("schema_version",),
            f"schema_version {version!r} is not a version of the format",
            f"Declare schema_version as one of {supported_spellings()} (or leave it out).",
        )
    numbers = tuple(int(n) for n in m.groups() if n is not None)
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers = numbers[:-1]  # v1.0 and 1.0.0 number the same revision as v1
    if numbers == (1,):
        return V1, None
    newest = max(REVISIONS, key=lambda r: r.name)
    newer = numbers > (1,)
    return None, Violation(
        "A94",
        ("schema_version",),
        f"schema_version {version!r} is {'a newer' if newer else 'an older'} revision of the "
        f"format than this runtime reads: it implements {newest.name} ({newest.upstream}), "
        f"declared as {supported_spellings()} or no schema_version",
        "Run the package with a runtime that reads this revision, or export it as "
        f"schema_version {newest.name}.",
    )
