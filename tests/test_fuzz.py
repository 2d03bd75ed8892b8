"""Property tests: whatever the metadata says, loading either succeeds or raises PackageError.

Mutations start from the valid base packages (so most documents get past parsing and the schema
and reach the semantic rules); the raw text and bytes tests hit the parser directly. Every
violation must carry a catalogued rule code, a message and a hint.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures import package_path
from reference_runtime.errors import PackageError
from reference_runtime.package import load_package
from reference_runtime.package.parse import find_metadata, parse_metadata
from reference_runtime.package.rules.catalogue import RULES

BASES = ("kv_decoder", "static_cache", "speculative", "lora", "media")
STEP_KINDS = ("invoke", "loop", "branch", "emit", "sequence", "transfer")
HOSTILE = (
    "../x",
    "/etc/passwd",
    "a/../../b",
    "",
    "x" * 5000,
    "..",
    ".",
    "C:\\Windows\\system32",
    "\\\\server\\share",
    "a\\..\\..\\b",
    "nul",
    "model.onnx/",
    "./model.onnx",
    "a b",
    "é",
    "\x00",
)
PATH_KEYS = ("artifact", "location", "path", "config_location")
UNKNOWN = ("unknown", "nosuch.value", "x.y.z", "Ω")
FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# Examples that run the whole validator on a real package take ~0.1-0.2 s each; fewer of them
# keep this file well under a minute on two cores.
FUZZ_PACKAGES = settings(FUZZ, max_examples=40)

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
WRONG_TYPED = st.one_of(
    _SCALARS,
    st.lists(_SCALARS, max_size=3),
    st.dictionaries(st.text(max_size=8), _SCALARS, max_size=3),
)


def check(root: Path) -> None:
    """The property: load returns, or raises PackageError with well-formed violations."""
    try:
        load_package(root)
    except PackageError as exc:
        assert exc.violations
        for v in exc.violations:
            assert v.code in RULES, v
            assert v.message.strip(), v
            assert v.hint.strip(), v
            assert isinstance(v.location, str), v


# ------------------------------------------------------------------ mutations of valid packages


def _nodes(doc) -> list[tuple]:
    """Every path in the document (root excluded), depth first."""
    out: list[tuple] = []
    stack: list[tuple[tuple, object]] = [((), doc)]
    while stack:
        path, node = stack.pop()
        if path:
            out.append(path)
        if isinstance(node, dict):
            stack.extend(((*path, k), v) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend(((*path, i), v) for i, v in reversed(list(enumerate(node))))
    return out


def _get(doc, path):
    for part in path:
        doc = doc[part]
    return doc


def _set(doc, path, value) -> None:
    _get(doc, path[:-1])[path[-1]] = value


def mutate(data, base_doc: dict) -> dict:
    """The base document with 1-4 random structural mutations applied. Each choice is drawn
    separately, so a failure prints the mutations (not the whole document)."""
    doc = copy.deepcopy(base_doc)
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        paths = _nodes(doc)
        if not paths:
            break
        strings = [p for p in paths if isinstance(_get(doc, p), str)]
        keyed = [p for p in paths if isinstance(p[-1], str)]
        lists = [p for p in paths if isinstance(_get(doc, p), list) and _get(doc, p)]
        kinds = [p for p in strings if p[-1] == "kind"]
        files = [p for p in strings if p[-1] in PATH_KEYS]
        names = sorted({s for p in strings if (s := _get(doc, p))} | {p[-1] for p in keyed})
        candidates = {
            "drop": paths,
            "wrong_type": paths,
            "unknown_ref": strings,
            "rename_key": keyed,
            "other_name": strings if names else [],
            "duplicate": lists,
            "swap_kind": kinds,
            "hostile": strings,
            "hostile_path": files,
        }
        op = data.draw(st.sampled_from([op for op, where in candidates.items() if where]))
        path = data.draw(st.sampled_from(candidates[op]), label=op)
        parent = _get(doc, path[:-1])
        if op == "drop":
            del parent[path[-1]]
        elif op == "wrong_type":
            parent[path[-1]] = data.draw(WRONG_TYPED, label="value")
        elif op == "unknown_ref":
            parent[path[-1]] = data.draw(st.sampled_from(UNKNOWN), label="value")
        elif op == "rename_key":
            new = data.draw(st.sampled_from(UNKNOWN + (path[-1] + "_2",)), label="new key")
            if new not in parent:  # keep the key's position: rebuild the mapping in order
                items = [(new if k == path[-1] else k, v) for k, v in parent.items()]
                parent.clear()
                parent.update(items)
        elif op == "other_name":
            parent[path[-1]] = data.draw(st.sampled_from(names), label="value")
        elif op == "duplicate":
            items = _get(doc, path)
            index = data.draw(st.integers(0, len(items) - 1), label="index")
            items.insert(index, copy.deepcopy(items[index]))
        elif op == "swap_kind":
            parent[path[-1]] = data.draw(st.sampled_from(STEP_KINDS), label="kind")
        else:
            parent[path[-1]] = data.draw(st.sampled_from(HOSTILE), label="value")
    return doc


def _dump(doc, suffix: str) -> str:
    if suffix == ".json":
        return json.dumps(doc, indent=1)
    return yaml.dump(doc, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """One copy of each base package; each example rewrites only its metadata file."""
    out = {}
    for base in BASES:
        root = tmp_path_factory.mktemp("fuzz") / base
        shutil.copytree(package_path(base), root)
        metadata = find_metadata(root)
        document, problems = parse_metadata(metadata)
        assert document is not None and not problems, problems
        out[base] = (root, metadata, document)
    return out


@pytest.mark.parametrize("base", BASES)
@FUZZ_PACKAGES
@given(data=st.data())
def test_mutated_packages_load_or_raise_package_error(workspace, base, data):
    root, metadata, document = workspace[base]
    doc = mutate(data, document)
    metadata.write_text(_dump(doc, metadata.suffix), encoding="utf-8")
    check(root)


# ------------------------------------------------------------------ arbitrary text and bytes

YAMLISH = st.text(alphabet=st.sampled_from(list("ab0:-[]{},&*!|>'\"#%@`?~.\\\n \t")), max_size=80)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("raw")


def _only(root: Path, name: str, content: bytes) -> None:
    for old in root.iterdir():
        old.unlink()
    (root / name).write_bytes(content)


@pytest.mark.parametrize("name", ["inference_metadata.yaml", "inference_metadata.json"])
@FUZZ
@given(text=st.one_of(st.text(max_size=200), YAMLISH))
def test_arbitrary_text_loads_or_raises_package_error(scratch, name, text):
    _only(scratch, name, text.encode("utf-8", "surrogatepass"))
    check(scratch)


@pytest.mark.parametrize("name", ["inference_metadata.yaml", "inference_metadata.json"])
@FUZZ
@given(content=st.binary(max_size=200))
def test_arbitrary_bytes_load_or_raise_package_error(scratch, name, content):
    _only(scratch, name, content)
    check(scratch)


@pytest.mark.parametrize("base", ["kv_decoder", "lora"])
@FUZZ_PACKAGES
@given(data=st.data())
def test_edited_metadata_text_loads_or_raises_package_error(workspace, base, data):
    """Character-level damage to a real metadata file: cuts, insertions, truncation."""
    root, metadata, document = workspace[base]
    text = _dump(document, metadata.suffix)
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        start = data.draw(st.integers(0, len(text)), label="at")
        end = data.draw(st.integers(start, min(len(text), start + 40)), label="to")
        insert = data.draw(st.one_of(st.just(""), YAMLISH), label="insert")
        text = text[:start] + insert + text[end:]
    metadata.write_text(text, encoding="utf-8")
    check(root)


@pytest.mark.parametrize("value", HOSTILE, ids=lambda v: repr(v[:12]))
def test_hostile_artifact_paths_are_refused(workspace, value):
    """Every hostile path, where the package names its main graph, is refused cleanly (the two
    spellings of the real file are accepted)."""
    root, metadata, document = workspace["kv_decoder"]
    doc = copy.deepcopy(document)
    doc["pipeline"]["workflow"]["components"]["model"]["implementation"]["artifact"] = value
    metadata.write_text(_dump(doc, metadata.suffix), encoding="utf-8")
    if value in ("model.onnx/", "./model.onnx"):
        load_package(root)
        return
    with pytest.raises(PackageError) as refused:
        load_package(root)
    check(root)
    locations = [v.location for v in refused.value.violations]
    assert "pipeline.workflow.components.model.implementation.artifact" in locations
