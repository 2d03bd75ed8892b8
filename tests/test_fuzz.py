"""Property tests: whatever the metadata says, loading either succeeds or raises PackageError.

The hostile part (``tests/hostile.py``: damaged graphs, external data, files, parser bombs)
also holds that a package that validates builds an engine, and that each limit refuses with
its own rule; ``tools/fuzz_packages.py`` runs the same mutations by the thousand and measures
time and memory.

Mutations start from the valid base packages (so most documents get past parsing and the schema
and reach the semantic rules); the raw text and bytes tests hit the parser directly. Every
violation must carry a catalogued rule code, a message and a hint.
"""

from __future__ import annotations

import copy
import json
import random
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures import package_path
from reference_runtime.errors import PackageError, UsageError
from reference_runtime.package import load_package, validate_package
from reference_runtime.package.parse import find_metadata, parse_metadata
from reference_runtime.package.rules.catalogue import RULES
from tests import hostile

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


def _set(doc, path, value) -> None:
    hostile.get(doc, path[:-1])[path[-1]] = value


def mutate(data, base_doc: dict) -> dict:
    """The base document with 1-4 random structural mutations applied. Each choice is drawn
    separately, so a failure prints the mutations (not the whole document)."""
    doc = copy.deepcopy(base_doc)
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        paths = hostile.paths(doc)
        if not paths:
            break
        strings = [p for p in paths if isinstance(hostile.get(doc, p), str)]
        keyed = [p for p in paths if isinstance(p[-1], str)]
        lists = [p for p in paths if isinstance(hostile.get(doc, p), list) and hostile.get(doc, p)]
        kinds = [p for p in strings if p[-1] == "kind"]
        files = [p for p in strings if p[-1] in PATH_KEYS]
        names = sorted({s for p in strings if (s := hostile.get(doc, p))} | {p[-1] for p in keyed})
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
        parent = hostile.get(doc, path[:-1])
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
            items = hostile.get(doc, path)
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


# ------------------------------------------------------------------ hostile packages

HOSTILE_BASES = ("kv_decoder", "lora", "genai_decoder", "model_io_decoder", "static_cache")


@pytest.fixture(scope="module")
def hostile_bases(tmp_path_factory):
    out = {}
    for base in HOSTILE_BASES:
        root = tmp_path_factory.mktemp("hostile-base") / base
        shutil.copytree(package_path(base), root)
        out[base] = root
    return out


def _validates_and_builds_or_refuses(root: Path) -> None:
    """The property the fuzz tool measures at scale: validation returns violations or none,
    never raises; a package that validates also builds (``Engine.from_dir``)."""
    from reference_runtime.engine import Engine

    check(root)
    if not validate_package(root):
        Engine.from_dir(root)


@pytest.mark.parametrize("base", HOSTILE_BASES)
@settings(FUZZ, max_examples=15)  # each example may build an engine: ~0.5 s
@given(seed=st.integers(0, 2**32 - 1))
def test_hostile_mutations_are_refused_or_build(hostile_bases, tmp_path_factory, base, seed):
    """tests/hostile.py's mutations (structure, text, bytes, ONNX protos, external data, files,
    bombs) of a copy of the base package."""
    root = tmp_path_factory.mktemp("hostile") / base
    shutil.copytree(hostile_bases[base], root, symlinks=True)
    hostile.mutate(root, random.Random(seed))
    _validates_and_builds_or_refuses(root)
    shutil.rmtree(root.parent)


@pytest.mark.parametrize(
    ("bomb", "code"),
    [
        ("json_list_50mb", "A98"),
        ("yaml_list_50mb", "A98"),
        ("json_list_15mb", "A99"),
        ("yaml_list_15mb", "A99"),
        ("alias_bomb", "A99"),
        ("deep_json", "A100"),
        ("deep_yaml", "A100"),
        ("long_string", "A101"),
        ("sexagesimal", "A102"),
        ("huge_int_json", "A102"),
    ],
)
def test_parser_bombs_are_refused_with_their_limit(tmp_path, bomb, code):
    """Time and memory are measured by tools/fuzz_packages.py; here, the rule each one breaks."""
    root = tmp_path / "bomb"
    root.mkdir()
    hostile.plant_bomb(root, bomb)
    violations = validate_package(root)
    assert [v.code for v in violations] == [code], violations
    assert violations[0].hint


def test_metadata_size_limit_is_configurable(tmp_path, monkeypatch):
    root = tmp_path / "pkg"
    shutil.copytree(package_path("kv_decoder"), root)
    monkeypatch.setenv("REFERENCE_RUNTIME_MAX_METADATA_BYTES", "1000")
    (v,) = validate_package(root)
    assert v.code == "A98" and "REFERENCE_RUNTIME_MAX_METADATA_BYTES" in v.message
    monkeypatch.setenv("REFERENCE_RUNTIME_MAX_METADATA_BYTES", "zero")
    with pytest.raises(UsageError):
        validate_package(root)


def test_text_graph_size_limit_is_configurable(tmp_path, monkeypatch):
    root = tmp_path / "pkg"
    shutil.copytree(package_path("static_cache"), root)
    monkeypatch.setenv("REFERENCE_RUNTIME_MAX_TEXT_GRAPH_BYTES", "100")
    codes = {v.code for v in validate_package(root)}
    assert codes == {"C103"}
    monkeypatch.delenv("REFERENCE_RUNTIME_MAX_TEXT_GRAPH_BYTES")
    assert validate_package(root) == []


def _graph_with(root: Path, relative: str, edit) -> None:
    path = root / relative
    model = hostile.load_graph(path)
    edit(model)
    hostile.save_graph(path, model)


@pytest.mark.parametrize(
    ("name", "edit", "code"),
    [
        (
            "elem_type_99",
            lambda m: setattr(m.graph.input[0].type.tensor_type, "elem_type", 99),
            "C104",
        ),
        ("opset_99", lambda m: setattr(m.opset_import[0], "version", 99), "C104"),
        ("unknown_op", lambda m: setattr(m.graph.node[0], "op_type", "NoSuchOp"), "C104"),
        ("empty_required_input", lambda m: m.graph.node[0].input.__setitem__(0, ""), "C104"),
        ("negative_dims", lambda m: _initializer(m, [-1], b""), "C105"),
        ("huge_without_data", lambda m: _initializer(m, [10**6, 10**6], b"\0" * 8), "C105"),
        ("external_no_location", lambda m: _external(m, {"length": "16"}), "C105"),
        ("external_no_length", lambda m: _external(m, {"location": "model.onnx"}), "C105"),
        (
            "external_negative_offset",
            lambda m: _external(m, {"location": "model.onnx", "offset": "-4", "length": "16"}),
            "C105",
        ),
        (
            "external_wrong_length",
            lambda m: _external(m, {"location": "model.onnx", "length": "12"}),
            "C105",
        ),
        (
            "external_outside",
            lambda m: _external(m, {"location": "../outside.bin", "length": "16"}),
            "H74",
        ),
        (
            "external_past_the_end",
            lambda m: _external(
                m, {"location": "model.onnx", "offset": "99999999", "length": "16"}
            ),
            "C83",
        ),
        ("sparse_attribute_outside", lambda m: _sparse(m, "../outside.bin"), "H74"),
    ],  # fmt: skip
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_hostile_graphs_are_refused_at_validation(tmp_path, name, edit, code):
    """Graph damage that ONNX Runtime or the native executor would otherwise meet only when
    the engine is built (or run) is refused by the validator, with its code."""
    root = tmp_path / "pkg"
    shutil.copytree(package_path("kv_decoder"), root)
    (tmp_path / "outside.bin").write_bytes(b"\0" * 64)
    _graph_with(root, "model.onnx", edit)
    violations = validate_package(root)
    assert code in {v.code for v in violations}, violations
    assert all(v.location == "pipeline.workflow.components.model.implementation.artifact"
               for v in violations if v.code == code)  # fmt: skip


def _initializer(model, dims, raw: bytes) -> None:
    tensor = model.graph.initializer.add()
    tensor.name, tensor.data_type = "extra", 1
    tensor.dims.extend(dims)
    tensor.raw_data = raw


def _external(model, entries: dict) -> None:
    tensor = model.graph.initializer.add()
    tensor.name, tensor.data_type = "extra", 1
    tensor.dims.extend([2, 2])
    hostile._external(tensor, entries)


def _sparse(model, location: str) -> None:
    from onnx import TensorProto, helper

    values = helper.make_tensor("sv", TensorProto.FLOAT, [2], [1.0, 2.0])
    hostile._external(values, {"location": location, "length": "8"})
    indices = helper.make_tensor("si", TensorProto.INT64, [2], [0, 1])
    sparse = helper.make_sparse_tensor(values, indices, [4])
    model.graph.node.append(helper.make_node("Constant", [], ["sparse_out"], sparse_value=sparse))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("model.context_length", "abc"),
        ("model.type", {"a": 1}),
        ("model.eos_token_id", [1, "x"]),
        ("model.pad_token_id", 1.5),
        ("model.decoder.num_hidden_layers", 10**12),
        ("model.decoder.filename", 7),
        ("model.decoder.inputs.past_key_names", ["x"]),
        ("search.max_length", "64"),
        ("search.do_sample", 1),
        ("search.num_beams", [1]),
    ],
)
def test_genai_config_fields_are_type_checked(tmp_path, field, value):
    root = tmp_path / "pkg"
    shutil.copytree(package_path("genai_decoder"), root)
    config = json.loads((root / "genai_config.json").read_text())
    *parents, key = field.split(".")
    target = config
    for part in parents:
        target = target[part]
    target[key] = value
    (root / "genai_config.json").write_text(json.dumps(config))
    violations = validate_package(root)
    assert violations, "accepted"
    assert {v.code for v in violations} == {"H91"}, violations
    assert f'["genai_config.json"].{field}' in [v.location for v in violations]


@pytest.mark.parametrize(
    ("damage", "code"),
    [
        (lambda root: (root / "tokenizer.json").write_bytes(b"\xff\xfe not json"), "C83"),
        (lambda root: (root / "tokenizer.json").write_text('{"model": '), "C83"),
        (lambda root: _symlink_outside(root, "tokenizer.json"), "H74"),
    ],
    ids=["not-utf8", "truncated", "symlink-outside"],
)
def test_the_tokenizer_the_engine_loads_is_checked_at_validation(tmp_path, damage, code):
    """kv_decoder names no tokenizer; the engine loads the one at its root all the same."""
    root = tmp_path / "pkg"
    shutil.copytree(package_path("kv_decoder"), root)
    damage(root)
    assert {v.code for v in validate_package(root)} == {code}


def _symlink_outside(root: Path, name: str) -> None:
    outside = root.parent / "outside.json"
    outside.write_text("{}")
    (root / name).unlink()
    (root / name).symlink_to(outside)


def test_a_sparse_constant_too_large_to_densify_is_c105(tmp_path):
    from onnx import TensorProto, helper

    def edit(model):
        values = helper.make_tensor("sv", TensorProto.FLOAT, [2], [1.0, 2.0])
        indices = helper.make_tensor("si", TensorProto.INT64, [2], [0, 1])
        sparse = helper.make_sparse_tensor(values, indices, [10**12])
        model.graph.node.append(helper.make_node("Constant", [], ["s"], sparse_value=sparse))

    root = tmp_path / "pkg"
    shutil.copytree(package_path("kv_decoder"), root)
    _graph_with(root, "model.onnx", edit)
    (v,) = validate_package(root)
    assert v.code == "C105" and "dense" in v.message


def test_the_fuzz_tool_counts_every_case(tmp_path):
    """tools/fuzz_packages.py end to end on a few cases (its figures come from larger runs)."""
    import subprocess
    import sys

    tool = Path(__file__).resolve().parents[1] / "tools" / "fuzz_packages.py"
    done = subprocess.run(
        [sys.executable, str(tool), "--cases", "4", "--jobs", "1", "--seed", "7", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    summary = json.loads(done.stdout)
    assert summary["cases"] == 4
    assert sum(summary["counts"].values()) == 4
    assert summary["failures"] == [], summary["failures"]
    assert done.returncode == 0
    assert summary["peak_mb"] > 0


def test_the_fuzz_tool_stopped_prints_the_summary_of_the_cases_done():
    """SIGTERM (or Ctrl-C) ends a long run with the summary so far, marked interrupted."""
    import signal
    import subprocess
    import sys
    import time

    tool = Path(__file__).resolve().parents[1] / "tools" / "fuzz_packages.py"
    command = [sys.executable, str(tool), "--cases", "100000", "--jobs", "1", "--json"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)  # its signal handler is in place once it has parsed its arguments
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=120)
    summary = json.loads(out)
    assert summary["interrupted"] is True and summary["of"] == 100000
    assert summary["cases"] < 100000 and sum(summary["counts"].values()) == summary["cases"]
    assert process.returncode == (1 if summary["failures"] else 130)


def test_an_initializer_of_another_shape_than_its_input_is_c104(tmp_path):
    """ONNX Runtime refuses a graph input's default of another rank; so does validation."""

    def edit(model):
        name = model.graph.input[0].name
        tensor = model.graph.initializer.add()
        tensor.name, tensor.data_type = name, model.graph.input[0].type.tensor_type.elem_type
        tensor.dims.append(0)

    root = tmp_path / "pkg"
    shutil.copytree(package_path("kv_decoder"), root)
    _graph_with(root, "model.onnx", edit)
    codes = {v.code for v in validate_package(root)}
    assert "C104" in codes, codes
