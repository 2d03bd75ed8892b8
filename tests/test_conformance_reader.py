"""The suite reads packages on its own: its reader, and its independence from the runtime."""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

import pytest

from conformance import package_reader
from conformance.package_reader import (
    LOWERED_REQUEST_AXES,
    MAX_DOCUMENT_BYTES,
    DocumentError,
    find_metadata,
    format_location,
    parse_text,
    read_document,
    request_axes,
)
from fixtures import package_path
from fixtures.generators import RUN_CASES
from tests import hostile

CONFORMANCE = Path(package_reader.__file__).parent
# The one module of the suite allowed to import the runtime: the adapter that certifies it.
REFERENCE_ADAPTER = CONFORMANCE / "runtimes" / "reference.py"


def _imported_modules(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module or ""
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None))
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            yield str(node.args[0].value)


def test_the_suite_imports_nothing_from_the_reference_runtime():
    modules = sorted(CONFORMANCE.rglob("*.py"))
    assert REFERENCE_ADAPTER in modules and len(modules) > 10
    offending = {
        str(path.relative_to(CONFORMANCE.parent)): name
        for path in modules
        if path != REFERENCE_ADAPTER
        for name in _imported_modules(path)
        if name == "reference_runtime" or name.startswith("reference_runtime.")
    }
    assert not offending, offending


def test_the_import_check_sees_every_form_of_import(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        "import reference_runtime.errors\n"
        "from reference_runtime.package import load_package\n"
        "def f():\n"
        "    import importlib\n"
        "    importlib.import_module('reference_runtime.engine')\n"
    )
    assert list(_imported_modules(path)) == [
        "reference_runtime.errors",
        "reference_runtime.package",
        "importlib",
        "reference_runtime.engine",
    ]


@pytest.mark.parametrize(
    "path, text",
    [
        ((), "<document>"),
        (("pipeline", "workflow", "steps", 0, "inputs", "token"),
         "pipeline.workflow.steps[0].inputs.token"),
        (("pipeline", "workflow", "inputs", "request.input_ids"),
         'pipeline.workflow.inputs["request.input_ids"]'),
        (("a", 'say "hi"\\'), 'a["say \\"hi\\"\\\\"]'),
        (("kv_cache",), "kv_cache"),
        (("names", "past-key"), "names.past-key"),
        (("x", "1st"), 'x["1st"]'),
        ((0, "a"), "[0].a"),
    ],
)  # fmt: skip
def test_locations_render_like_the_reports(path, text):
    assert format_location(path) == text


def test_the_metadata_file_is_found_in_order(tmp_path):
    assert find_metadata(tmp_path) is None
    for name in ("inference_metadata.json", "inference_metadata.yml", "inference_metadata.yaml"):
        (tmp_path / name).write_text(json.dumps({"from": name}))
        assert find_metadata(tmp_path) == tmp_path / name
        assert read_document(tmp_path) == {"from": name}


def test_yaml_is_read_safely(tmp_path):
    (tmp_path / "inference_metadata.yaml").write_text("x: !!python/object/apply:os.system [true]\n")
    with pytest.raises(Exception, match="python/object"):
        read_document(tmp_path)


def test_a_genai_folder_reads_as_its_config():
    document = read_document(package_path("genai_decoder"))
    assert set(document) == {"genai_config"}
    assert request_axes(document) == LOWERED_REQUEST_AXES


def test_request_axes_come_from_the_batch_layouts():
    document = {
        "pipeline": {
            "workflow": {
                "inputs": {
                    "request.tokens": {
                        "contract": {"batch_layout": {"kind": "request_aligned", "axis": 1}},
                        "source": {"kind": "application", "name": "tokens"},
                    },
                    "request.expanded": {
                        "contract": {
                            "batch_layout": {"kind": "request_expanded", "axis": 0, "factor": 2}
                        },
                        "source": {"kind": "request"},
                    },
                    "package.table": {"contract": {"batch_layout": {"kind": "shared"}}},
                    "package.bias": {"contract": {}, "source": {"kind": "literal"}},
                },
                "outputs": {
                    "tokens": {
                        "contract": {"batch_layout": {"kind": "request_aligned", "axis": 0}}
                    },
                    "table": {"contract": {"dtype": "float32"}},
                },
            }
        }
    }
    axes = request_axes(document)
    assert axes.inputs == {"request.tokens": 1, "tokens": 1, "request.expanded": 0}
    assert axes.outputs == {"tokens": 0}


@pytest.mark.parametrize("package", sorted({run.package for run in RUN_CASES}))
def test_request_axes_agree_with_the_reference_loader(package):
    """A cross-check (the suite itself never imports the runtime): the axes the suite reads from
    the raw document are those of the runtime's typed model; for a bare decoder, those of its
    lowered workflow, on every name the suite lists."""
    from reference_runtime.package import load_package

    workflow = load_package(package_path(package)).metadata.workflow
    inputs = {}
    for name, declared in workflow.inputs.items():
        if declared.contract.request_axis is not None:
            inputs[name] = declared.contract.request_axis
            alias = getattr(declared.source, "name", None)
            if alias:
                inputs[alias] = declared.contract.request_axis
    outputs = {
        name: out.contract.request_axis
        for name, out in workflow.outputs.items()
        if out.contract.request_axis is not None
    }
    axes = request_axes(read_document(package_path(package)))
    if axes is LOWERED_REQUEST_AXES:
        assert {name: inputs.get(name) for name in axes.inputs} == axes.inputs
    else:
        assert axes.inputs == inputs
    assert axes.outputs == outputs


@pytest.mark.parametrize("bomb", sorted(hostile.BOMBS))
def test_a_hostile_document_is_refused_within_bounds(tmp_path, bomb):
    """The parser bombs the runtime refuses (tests/hostile.py) are refused by the suite's own
    reader too, before anything is built: each names the bound it passes."""
    hostile.plant_bomb(tmp_path, bomb)
    with pytest.raises(DocumentError, match="more than|deeper than|refers to itself"):
        read_document(tmp_path)


def test_a_large_document_is_refused_on_its_size_before_it_is_read(tmp_path, monkeypatch):
    path = tmp_path / "inference_metadata.json"
    path.write_text('{"a": 1}')
    with open(path, "r+b") as f:  # a sparse file: large, and nothing in it worth reading
        f.truncate(MAX_DOCUMENT_BYTES + 1)
    opened = []
    monkeypatch.setattr(package_reader, "open", lambda *a, **k: opened.append(a), raising=False)
    with pytest.raises(DocumentError, match=f"holds {MAX_DOCUMENT_BYTES + 1} bytes"):
        read_document(tmp_path)
    assert opened == []


def test_a_fifo_is_not_opened(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this system")
    os.mkfifo(tmp_path / "genai_config.json")  # reading it would wait for a writer forever
    with pytest.raises(DocumentError, match="not a regular file"):
        read_document(tmp_path)


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("m.yaml", "a: " + "[" * 70 + "]" * 70, "deeper than 64"),
        ("m.json", '{"a": ' + "[" * 70 + "]" * 70 + "}", "deeper than 64"),
        ("m.yaml", "a: &a [1, 2]\nb: *b\n", "refers to itself or to nothing"),
        ("m.yaml", "a: &a [1, *a]\n", "refers to itself or to nothing"),
        ("m.yaml", "a: &a " + "[" * 40 + "1" + "]" * 40 + "\nb: " + "[" * 30 + "*a" + "]" * 30,
         "deeper than 64"),
        ("m.yaml", "a: 1" + ":59" * 400, "a number written with 1201 characters"),
        ("m.json", '{"a": ' + "9" * 1001 + "}", "a number of 1001 characters"),
        ("m.yaml", "a: " + "x" * (2**20 + 1), "a string of 1048577 characters"),
        ("m.yaml", "a: [1, 2\n", "not valid YAML at line 2"),
        ("m.json", '{"a": }', "not valid JSON at line 1"),
        ("m.yaml", "a: 2001-13-45\n", "cannot be read"),
    ],
    ids=["deep-yaml", "deep-json", "undefined-alias", "self-alias", "deep-through-alias",
         "base-60", "long-int", "long-string", "bad-yaml", "bad-json", "bad-date"],
)  # fmt: skip
def test_each_bound_and_each_unreadable_document_is_a_document_error(name, text, said):
    with pytest.raises(DocumentError, match=re.escape(said)):
        parse_text(text, name)


def test_documents_within_the_bounds_read_as_before():
    deep = "a: " + "[" * 60 + "1" + "]" * 60
    assert parse_text(deep, "m.yaml")["a"] is not None
    assert parse_text("a: &a [1, 2]\nb: *a\n", "m.yaml") == {"a": [1, 2], "b": [1, 2]}
    assert parse_text('{"a": ' + "9" * 1000 + "}", "m.json") == {"a": int("9" * 1000)}
    assert parse_text("a: " + "1:59" * 10, "m.yaml")["a"] is not None
