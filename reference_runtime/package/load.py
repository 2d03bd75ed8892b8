"""Loading a package: discovery, parsing, structure, the typed model, semantic rules.

``load_package(path)`` returns a :class:`Package` or raises one :class:`PackageError` listing
every violation in document order. ``validate_package(path)`` returns the violations instead.
A path that is not a readable folder is a :class:`UsageError` (the CLI's exit code 2).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import PackageError, UsageError, Violation
from ..support import REFERENCE_SUPPORT, RuntimeSupport
from . import revisions
from .artifacts import GraphSignature
from .docmodel import FrozenMap, build
from .lowering import DRAFT_FOLDER, GENAI_CONFIG, check_draft_folder, lower
from .lowering.abi import is_model_io
from .model import Metadata
from .parse import METADATA_NAMES, find_metadata, parse_metadata, parse_metadata_text
from .rules import run_rules
from .rules.catalogue import hint_for
from .rules.context import Ctx, DocumentOrder
from .structure import schema_violations

# The name a lowered document is reported under (it exists only in memory).
LOWERED_NAME = "lowered_workflow.yaml"


@dataclass(frozen=True)
class Package:
    """A validated package: where it lives, its document, and its graphs' signatures."""

    root: Path
    metadata_path: Path
    document: dict
    metadata: Metadata
    graphs: Mapping[str, GraphSignature]
    # "authored" (a workflow document) or "lowered" (derived from a bare decoder's ABI, in
    # which case ``lowered`` holds the document's text)
    provenance: str = "authored"
    lowered: str | None = None
    # folder name -> folder outside the package whose files the document names under that
    # name: a draft given with the bare decoder it is attached to (docs/lowering.md)
    mounts: Mapping[str, Path] = dataclasses.field(default_factory=FrozenMap)

    def resolve(self, relative: str) -> Path:
        """The file an artifact path of the document names (checked at load)."""
        head, _, rest = str(relative).partition("/")
        if head in self.mounts:
            return self.mounts[head] / rest
        return self.root / relative

    def artifact_path(self, component: str) -> Path:
        impl = self.metadata.workflow.components[component].implementation
        return self.resolve(impl.artifact)


def _check_root(path) -> Path:
    root = Path(path)
    if not root.exists():
        raise UsageError(
            f"package path {str(path)!r} does not exist",
            hint="Pass the folder that holds inference_metadata.yaml.",
        )
    if not root.is_dir():
        raise UsageError(
            f"package path {str(path)!r} is not a folder",
            hint="Pass the folder that holds inference_metadata.yaml, not the file itself.",
        )
    return root


def _sorted(document: dict | None, violations: list[Violation]) -> list[Violation]:
    order = DocumentOrder(document) if document else (lambda path: ())

    def key(v: Violation):
        return (order(v.path), v.code, v.message)

    unique = list(dict.fromkeys(violations))
    return sorted(unique, key=key)


def _analyse(
    root: Path, support: RuntimeSupport, draft=None
) -> tuple[list[Violation], Package | None]:
    if draft is not None:
        return _with_draft(root, support, draft)
    metadata_path = find_metadata(root)
    if metadata_path is None:
        if (root / GENAI_CONFIG).is_file():  # an onnxruntime-genai folder: lowered at load
            return _lower(root, support)
        return [
            Violation(
                "H74",
                (),
                f"no metadata file in {root} (looked for {', '.join(METADATA_NAMES)})",
                "Point at the package folder, the one holding its metadata document (an "
                "inference_metadata.yaml), or at an onnxruntime-genai folder (genai_config.json).",
            )
        ], None
    if not metadata_path.resolve().is_relative_to(root.resolve()):
        return [
            Violation(
                "H74",
                (),
                f"{metadata_path.name} is a symlink to a file outside the package",
                hint_for("H74"),
            )
        ], None
    document, violations = parse_metadata(metadata_path)
    if is_model_io(document):  # a legacy model.io decoder: lowered at load
        return _lower(root, support)
    return _validated(root, support, metadata_path, document, violations)


def _with_draft(root: Path, support: RuntimeSupport, draft):
    """A bare decoder lowered with a draft folder (``lowering/speculative.py``): the document
    names the draft's files under ``draft/``, which resolves in that folder alone."""
    metadata = find_metadata(root)
    bare = (root / GENAI_CONFIG).is_file() if metadata is None else None
    if bare is None:
        document, _ = parse_metadata(metadata)
        bare = is_model_io(document)
    if not bare:
        raise UsageError(
            f"a draft is attached to a bare decoder, and {str(root)!r} is "
            + ("a workflow package" if metadata is not None else "no package"),
            hint="Leave the draft out: a workflow package declares its proposer in its "
            "`speculative` section (docs/speculative.md); pass a draft only with an "
            "onnxruntime-genai folder or a model.io decoder.",
        )
    folder = check_draft_folder(draft).resolve()
    mounts = {DRAFT_FOLDER: folder}
    try:
        lowered = lower(root, draft=folder)
    except PackageError as exc:
        return list(exc.violations), None
    return _lowered(root, support, lowered, mounts)


def _lower(root: Path, support: RuntimeSupport) -> tuple[list[Violation], Package | None]:
    try:
        text = lower(root)
    except PackageError as exc:
        return list(exc.violations), None
    return _lowered(root, support, text)


def _lowered(root: Path, support: RuntimeSupport, text: str, mounts: dict | None = None):
    """A document derived from the package (a lowered bare decoder), validated exactly like an
    authored one, with artifact paths relative to the package folder (and ``mounts``, folders
    outside it the document names by folder name: a draft)."""
    metadata_path = root / LOWERED_NAME
    document, violations = parse_metadata_text(text, metadata_path)
    found, package = _validated(root, support, metadata_path, document, violations, mounts)
    if package is not None:
        package = dataclasses.replace(package, provenance="lowered", lowered=text)
    return found, package


def _validated(root, support, metadata_path, document, violations, mounts=None):
    if document is None or any(v.code == "A05" for v in violations):
        return _sorted(document, violations), None
    revision, refused = revisions.select(document)
    if refused is not None:  # another revision of the format: never read as this one
        return [refused], None
    violations += schema_violations(document, revision.schema)
    if violations:
        return _sorted(document, violations), None
    metadata: Metadata = build(revision.root, document)
    mounts = dict(mounts or {})
    ctx = Ctx(metadata=metadata, document=document, root=root, support=support, mounts=mounts)
    if metadata.pipeline is None:
        legacy = metadata.model is not None and metadata.model.io is not None
        ctx.add(
            "H74",
            ("pipeline",),
            "the metadata has no pipeline section"
            + (" (it is a legacy model.io decoder package)" if legacy else ""),
            "Declare pipeline.workflow; legacy model.io decoders are lowered to a workflow by "
            "the engine, not validated as workflow packages."
            if legacy
            else None,
        )
    elif metadata.model is not None and metadata.model.io is not None:
        ctx.add("A06", ("model", "io"), "model.io is declared beside pipeline.workflow")
    run_rules(ctx)
    if ctx.violations:
        return _sorted(document, ctx.violations), None
    graphs = FrozenMap({k: v for k, v in ctx.graphs.items() if v is not None})
    return [], Package(root, metadata_path, document, metadata, graphs, mounts=FrozenMap(mounts))


def validate_package(
    path, support: RuntimeSupport = REFERENCE_SUPPORT, draft=None
) -> list[Violation]:
    """Every violation of the package at ``path`` (empty when it is valid), in document order."""
    violations, _ = _analyse(_check_root(path), support, draft)
    return violations


def load_package(path, support: RuntimeSupport = REFERENCE_SUPPORT, draft=None) -> Package:
    """Load and validate the package at ``path``; raise :class:`PackageError` if refused.

    A bare decoder (an onnxruntime-genai folder, a ``model.io`` document) is lowered to a
    workflow document (``reference_runtime.package.lowering``), validated in place of a
    metadata file and never written anywhere. ``draft``, a bare decoder folder, is attached to
    the bare decoder at ``path`` as its speculative draft (docs/lowering.md, "A draft").
    """
    root = _check_root(path)
    violations, package = _analyse(root, support, draft)
    if violations:
        raise PackageError(root, violations)
    assert package is not None
    return package
