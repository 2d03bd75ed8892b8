"""Mutations of valid packages, written as data.

A :class:`Mutation` names a base package (``fixtures/packages/<base>``), a few edit operations
and the rule code that the edited package must be refused with (and where). The same records
drive the fail-closed tests, the examples in ``docs/rules.md`` and the conformance suite's
invalid packages.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from fixtures import package_path
from fixtures.generators.common import dump_document

from ..package_reader import find_metadata, format_location, parse_metadata, read_document

Path_ = tuple  # a document path: keys and list indices


@dataclass(frozen=True)
class Set:
    path: Path_
    value: object

    def apply(self, doc):
        parent, key = _parent(doc, self.path)
        if isinstance(parent, list) and key == len(parent):
            parent.append(copy.deepcopy(self.value))
        else:
            parent[key] = copy.deepcopy(self.value)

    def describe(self) -> str:
        return f"set `{format_location(self.path)}` to `{_show(self.value)}`"


@dataclass(frozen=True)
class Delete:
    path: Path_

    def apply(self, doc):
        parent, key = _parent(doc, self.path)
        del parent[key]

    def describe(self) -> str:
        return f"delete `{format_location(self.path)}`"


@dataclass(frozen=True)
class Rename:
    """Rename a mapping key in place (keeping its position)."""

    path: Path_
    new_key: str

    def apply(self, doc):
        parent, key = _parent(doc, self.path)
        items = list(parent.items())
        parent.clear()
        for k, v in items:
            parent[self.new_key if k == key else k] = v

    def describe(self) -> str:
        return f"rename `{format_location(self.path)}` to `{self.new_key}`"


@dataclass(frozen=True)
class Insert:
    """Insert ``value`` into the list at ``path`` before ``index``."""

    path: Path_
    index: int
    value: object

    def apply(self, doc):
        target = _get(doc, self.path)
        target.insert(self.index, copy.deepcopy(self.value))

    def describe(self) -> str:
        return f"insert `{_show(self.value)}` at `{format_location((*self.path, self.index))}`"


@dataclass(frozen=True)
class Move:
    """Take the item at ``path`` out of its list and insert it into the list at ``dest`` before
    ``index`` (counted once the item is out)."""

    path: Path_
    dest: Path_
    index: int

    def apply(self, doc):
        parent, key = _parent(doc, self.path)
        value = parent.pop(key)
        _get(doc, self.dest).insert(self.index, value)

    def describe(self) -> str:
        return (
            f"move `{format_location(self.path)}` to `{format_location((*self.dest, self.index))}`"
        )


@dataclass(frozen=True)
class ReplaceText:
    """Edit the metadata file's text (for what a parsed document cannot express)."""

    old: str
    new: str
    count: int = 1

    def apply_text(self, text: str) -> str:
        if self.old not in text:
            raise ValueError(f"text {self.old!r} not found in the metadata file")
        return text.replace(self.old, self.new, self.count)

    def describe(self) -> str:
        return f"in the metadata text, replace `{_clip(self.old)}` with `{_clip(self.new)}`"


@dataclass(frozen=True)
class AsJson:
    """Write the metadata document as ``inference_metadata.json`` in place of the YAML file
    (the same document in the format's JSON spelling), after any document edit and before any
    text edit (which then edits the JSON text)."""

    def describe(self) -> str:
        return "write the metadata as `inference_metadata.json`"


@dataclass(frozen=True)
class WriteFile:
    relpath: str
    data: bytes

    def apply_files(self, root: Path) -> None:
        target = root / self.relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(self.data)

    def describe(self) -> str:
        return f"write {len(self.data)} bytes to `{self.relpath}`"


@dataclass(frozen=True)
class GrowFile:
    """Append a comment to ``relpath`` (YAML or protobuf text) until it holds ``size`` bytes, or,
    in a JSON file, spaces before its closing brace, so its last byte still matters (for size
    limits: the bytes are made when the package is, never held in the catalogue)."""

    relpath: str
    size: int

    def apply_files(self, root: Path) -> None:
        target = root / self.relpath
        missing = self.size - target.stat().st_size
        if self.relpath.endswith(".json"):
            text = target.read_bytes().rstrip()
            missing = self.size - len(text)
            target.write_bytes(text[:-1] + b" " * missing + text[-1:])
        elif missing > 2:
            with target.open("ab") as out:
                out.write(b"\n#" + b" " * (missing - 2))

    def describe(self) -> str:
        if self.relpath.endswith(".json"):
            return f"pad `{self.relpath}` with spaces before its closing brace to {self.size} bytes"
        return f"append a comment to `{self.relpath}` until it holds {self.size} bytes"


@dataclass(frozen=True)
class EditJson:
    """Apply document edits (``Set``, ``Delete``) to a JSON file of the package other than the
    metadata document (an onnxruntime-genai folder's ``genai_config.json``)."""

    relpath: str
    edits: tuple

    def apply_files(self, root: Path) -> None:
        target = root / self.relpath
        doc = json.loads(target.read_text())
        for edit in self.edits:
            edit.apply(doc)
        target.write_text(json.dumps(doc, indent=2) + "\n")

    def describe(self) -> str:
        return f"in `{self.relpath}`, " + "; ".join(e.describe() for e in self.edits)


@dataclass(frozen=True)
class DeleteFile:
    relpath: str

    def apply_files(self, root: Path) -> None:
        (root / self.relpath).unlink()

    def describe(self) -> str:
        return f"delete the file `{self.relpath}`"


@dataclass(frozen=True)
class MoveFile:
    relpath: str
    dest: str

    def apply_files(self, root: Path) -> None:
        target = root / self.dest
        target.parent.mkdir(parents=True, exist_ok=True)
        (root / self.relpath).rename(target)

    def describe(self) -> str:
        return f"move the file `{self.relpath}` to `{self.dest}`"


@dataclass(frozen=True)
class Symlink:
    """Make ``relpath`` a symlink to ``target`` (``{outside}`` = a file outside the package)."""

    relpath: str
    target: str

    def apply_files(self, root: Path) -> None:
        link = root / self.relpath
        target = self.target
        if "{outside}" in target:
            outside = root.parent / "outside-the-package.bin"
            outside.write_bytes(b"not part of the package")
            target = target.replace("{outside}", str(outside))
        if link.exists() or link.is_symlink():
            link.unlink()
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, link)

    def describe(self) -> str:
        where = "a file outside the package" if "{outside}" in self.target else self.target
        return f"replace `{self.relpath}` with a symlink to {where}"


class _Edited:
    """A base package and the edits (``ops``) made to a copy of it."""

    base: str
    ops: tuple

    def describe(self) -> str:
        return "; ".join(op.describe() for op in self.ops)

    def materialise(self, dest: Path) -> Path:
        """Copy the base package into ``dest`` and apply the edits. Returns the folder."""
        return edit_copy(self.base, self.ops, dest)


@dataclass(frozen=True)
class Mutation(_Edited):
    code: str  # the one rule code the mutated package must be refused with
    base: str  # fixtures/packages/<base>
    ops: tuple
    location: str  # where (one of) the violations must point
    note: str = ""  # what the mutation breaks, in words
    # Codes the same edit must also be refused with, where the format checks one fault twice
    # (a weights path through `..` breaks G67 and H74); the case judges ``code`` alone.
    also: tuple[str, ...] = ()

    @property
    def ident(self) -> str:
        return f"{self.code}-{self.base}-{self.note or self.location}".replace(" ", "_")


@dataclass(frozen=True)
class Variant(_Edited):
    """A valid edit of a base package: the package must still load (an ``acceptance`` case).
    Variants pin the edge of a rule from the valid side (a value at its limit, an optional key
    present, a spelling the format allows), where a mutation pins it from the refused side."""

    base: str  # fixtures/packages/<base>
    ops: tuple
    note: str  # what the variant changes, in words (its case id)

    @property
    def ident(self) -> str:
        return f"{self.base}-{self.note}".replace(" ", "_")


def edit_copy(base: str, ops: tuple, dest: Path) -> Path:
    """Copy fixtures/packages/``base`` into ``dest`` and apply the edits ``ops`` (document,
    text and file edits); returns the copy's folder."""
    root = dest / base
    shutil.copytree(package_path(base), root, symlinks=True)
    metadata = find_metadata(root)
    doc_ops = [op for op in ops if hasattr(op, "apply")]
    text_ops = [op for op in ops if hasattr(op, "apply_text")]
    file_ops = [op for op in ops if hasattr(op, "apply_files")]
    as_json = any(isinstance(op, AsJson) for op in ops)
    if doc_ops or as_json:
        # through JSON to break YAML alias sharing: an edit changes one spot only
        doc = json.loads(json.dumps(parse_metadata(metadata)))
        for op in doc_ops:
            op.apply(doc)
        if as_json:
            metadata.unlink()
            metadata = metadata.with_name("inference_metadata.json")
        metadata.write_bytes(dump_document(doc, metadata.name))
    for op in text_ops:
        metadata.write_text(op.apply_text(metadata.read_text()))
    for op in file_ops:
        op.apply_files(root)
    return root


def load_document(base: str) -> dict:
    """The parsed document of a base package (for building mutation values); an
    onnxruntime-genai folder gives ``{"genai_config": <its config>}``."""
    return read_document(package_path(base))


def _get(doc, path):
    node = doc
    for part in path:
        node = node[part]
    return node


def _parent(doc, path):
    return _get(doc, path[:-1]), path[-1]


def _clip(text: str) -> str:
    """Text as an example shows it: stripped, control characters escaped (``\\x07``), and cut
    short past 100 characters."""
    text = "".join(c if c.isprintable() or c == "\n" else ascii(c)[1:-1] for c in text.strip())
    return text if len(text) <= 100 else f"{text[:97]}... ({len(text)} characters)"


def _show(value) -> str:
    text = json.dumps(value, separators=(", ", ": "))
    return text if len(text) <= 100 else text[:97] + "..."
