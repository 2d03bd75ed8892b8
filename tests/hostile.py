"""Hostile packages: deterministic mutations of valid packages, and a fixed corpus of attacks.

``mutate(root, rng)`` damages the package copied at ``root`` in one of several ways, chosen by
``rng`` (a ``random.Random``): the metadata document's structure (YAML, JSON or
``genai_config.json``), its text, raw bytes of any file, the ONNX graphs' protos, their
external data, the files themselves (symlinks out of the package, loops, folders in place of
files) and parser bombs. It returns a one-line description of what it did.

``CORPUS`` is a list of named attacks, each a function that damages a copy of a given base
package. Both are used by ``tests/test_fuzz.py`` (bounded examples) and by
``tools/fuzz_packages.py`` (thousands, each in a subprocess, with time and memory measured).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path

import onnx
import yaml
from onnx import TensorProto, helper

METADATA = ("inference_metadata.yaml", "inference_metadata.yml", "inference_metadata.json")
GENAI = "genai_config.json"
HOSTILE_PATHS = (
    "../x", "/etc/passwd", "a/../../b", "", "x" * 5000, "..", ".", "C:\\Windows\\system32",
    "\\\\server\\share", "a\\..\\..\\b", "nul", "model.onnx/", "./model.onnx", "\x00", "é",
)  # fmt: skip
HOSTILE_VALUES = (
    None, True, False, 0, -1, 1, 2**63, -(2**63) - 1, 10**30, 1.5, float("inf"), float("nan"),
    "", "x", "%d%s%n", "Ω", [], [1], [[[]]], {}, {"a": 1}, {"": None}, "1" * 2000,
)  # fmt: skip
STEP_KINDS = ("invoke", "loop", "branch", "emit", "sequence", "transfer")
ELEM_TYPES = (0, 1, 7, 9, 10, 16, 17, 23, 99, 255, -1)


# ------------------------------------------------------------------ reading and writing


def metadata_file(root: Path) -> Path | None:
    for name in (*METADATA, GENAI):
        if (root / name).is_file():
            return root / name
    return None


def _load_doc(path: Path):
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)
    return yaml.load(text, Loader=yaml.CSafeLoader)


def _dump_doc(path: Path, doc) -> None:
    if path.suffix == ".json":
        text = json.dumps(doc, indent=1, allow_nan=True)
    else:
        text = yaml.dump(doc, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True)
    path.write_text(text, encoding="utf-8", errors="surrogatepass")


def graphs(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and p.name.endswith((".onnx", ".onnx.textproto"))
    )


def load_graph(path: Path) -> onnx.ModelProto:
    if path.name.endswith(".textproto"):
        return onnx.load(os.fspath(path), format="textproto", load_external_data=False)
    return onnx.load(os.fspath(path), load_external_data=False)


def save_graph(path: Path, model: onnx.ModelProto) -> None:
    if path.name.endswith(".textproto"):
        onnx.save(model, os.fspath(path), format="textproto")
    else:
        path.write_bytes(model.SerializeToString())


# ------------------------------------------------------------------ document structure


def paths(doc) -> list[tuple]:
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


def get(doc, path):
    for part in path:
        doc = doc[part]
    return doc


def mutate_structure(root: Path, rng: random.Random) -> str:
    path = metadata_file(root)
    if path is None:
        return "no metadata file"
    doc = _load_doc(path)
    done = []
    for _ in range(rng.randint(1, 4)):
        candidates = sorted(paths(doc), key=repr)
        if not candidates:
            break
        where = rng.choice(candidates)
        parent = get(doc, where[:-1])
        key = where[-1]
        op = rng.choice(
            ("drop", "wrong_type", "hostile_path", "rename", "duplicate", "kind", "swap")
        )
        if op == "drop":
            del parent[key]
        elif op == "wrong_type":
            parent[key] = rng.choice(HOSTILE_VALUES)
        elif op == "hostile_path":
            parent[key] = rng.choice(HOSTILE_PATHS)
        elif op == "rename" and isinstance(parent, dict):
            new = rng.choice(("unknown", key + "_2", "Ω", ""))
            if new not in parent:
                items = [(new if k == key else k, v) for k, v in parent.items()]
                parent.clear()
                parent.update(items)
        elif op == "duplicate" and isinstance(parent, list):
            parent.insert(key, json.loads(json.dumps(parent[key])))
        elif op == "kind":
            parent[key] = rng.choice(STEP_KINDS)
        else:  # swap: another value of the document in this place
            other = rng.choice(candidates)
            if other[: len(where)] != where:
                parent[key] = json.loads(json.dumps(get(doc, other)))
        done.append(f"{op} {'.'.join(map(str, where))[:60]}")
    _dump_doc(path, doc)
    return f"structure of {path.name}: " + "; ".join(done)


def mutate_text(root: Path, rng: random.Random) -> str:
    path = metadata_file(root)
    if path is None:
        return "no metadata file"
    text = path.read_text(encoding="utf-8")
    for _ in range(rng.randint(1, 3)):
        start = rng.randrange(len(text) + 1)
        end = min(len(text), start + rng.randint(0, 40))
        insert = "".join(
            rng.choice("ab0:-[]{},&*!|>'\"#%@`?~.\\\n \t") for _ in range(rng.randint(0, 8))
        )
        text = text[:start] + insert + text[end:]
    path.write_text(text, encoding="utf-8")
    return f"text of {path.name}"


def mutate_bytes(root: Path, rng: random.Random) -> str:
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    path = rng.choice(files)
    data = bytearray(path.read_bytes())
    how = rng.choice(("flip", "truncate", "zero"))
    if how == "truncate" or not data:
        data = data[: rng.randrange(len(data) + 1)]
    else:
        for _ in range(rng.randint(1, 8)):
            at = rng.randrange(len(data))
            data[at] = rng.randrange(256) if how == "flip" else 0
    path.write_bytes(bytes(data))
    return f"bytes of {path.relative_to(root)} ({how})"


# ------------------------------------------------------------------ ONNX protos


def _values(graph) -> list:
    return [*graph.input, *graph.output, *graph.value_info]


def _external(tensor, entries: dict[str, str]) -> None:
    tensor.ClearField("raw_data")
    for field in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
        tensor.ClearField(field)
    del tensor.external_data[:]
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in entries.items():
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value


def mutate_graph(root: Path, rng: random.Random) -> str:
    found = graphs(root)
    if not found:
        return mutate_bytes(root, rng)
    path = rng.choice(found)
    model = load_graph(path)
    graph = model.graph
    ops = ["elem_type", "dims", "op_type", "node_input", "drop_node", "opset", "initializer", "attribute", "external", "sparse", "huge"]  # fmt: skip
    op = rng.choice(ops)
    note = op
    values = _values(graph)
    if op == "elem_type" and values:
        value = rng.choice(values)
        value.type.tensor_type.elem_type = rng.choice(ELEM_TYPES)
        note += f" {value.name}={value.type.tensor_type.elem_type}"
    elif op == "dims" and values:
        value = rng.choice(values)
        dims = value.type.tensor_type.shape.dim
        if dims:
            dim = rng.choice(dims)
            dim.dim_value = rng.choice((0, -1, 1, 10**12, 2**62))
    elif op == "op_type" and graph.node:
        node = rng.choice(graph.node)
        node.op_type = rng.choice(("NoSuchOp", "Add", "Loop", "If", "Constant", ""))
    elif op == "node_input" and graph.node:
        node = rng.choice(graph.node)
        if node.input:
            node.input[rng.randrange(len(node.input))] = rng.choice(("", "nowhere", "x" * 300))
        else:
            node.input.append("nowhere")
    elif op == "drop_node" and graph.node:
        del graph.node[rng.randrange(len(graph.node))]
    elif op == "opset":
        for opset in model.opset_import:
            opset.version = rng.choice((0, 1, 7, 99, 10**6))
    elif op == "initializer":
        tensor = graph.initializer.add()
        tensor.name = rng.choice(("w", graph.input[0].name if graph.input else "w"))
        tensor.data_type = rng.choice(ELEM_TYPES[1:])
        tensor.dims.extend(rng.choice(([2, 2], [10**6, 10**6], [-1], [0])))
        if rng.random() < 0.5:
            tensor.raw_data = bytes(rng.randrange(64))
    elif op == "attribute" and graph.node:
        node = rng.choice(graph.node)
        attr = node.attribute.add()
        attr.name = rng.choice(("axis", "to", "value", "body", "unknown"))
        attr.type = rng.choice((1, 2, 3, 4, 5, 11, 99))
        if attr.type == onnx.AttributeProto.TENSOR:
            attr.t.CopyFrom(helper.make_tensor("a", TensorProto.FLOAT, [10**9], []))
    elif op in ("external", "huge"):
        tensor = graph.initializer[0] if graph.initializer else graph.initializer.add()
        if not tensor.name:
            tensor.name, tensor.data_type = "ext", TensorProto.FLOAT
            tensor.dims.extend([4])
        if op == "huge":
            del tensor.dims[:]
            tensor.dims.extend([10**6, 10**6])
        entries = {
            "location": rng.choice(("data.bin", "../outside.bin", "/etc/passwd", "", "d/../../x", path.name)),
            "offset": rng.choice(("0", "-1", "x", "99999999999", "")),
            "length": rng.choice(("0", "4", "16", "-4", "4000000000000", "", "1e3")),
        }  # fmt: skip
        for key in list(entries):
            if rng.random() < 0.2:
                del entries[key]
        _external(tensor, entries)
        if rng.random() < 0.5:
            (path.parent / "data.bin").write_bytes(bytes(rng.randrange(32)))
        note += f" {entries}"
    elif op == "sparse":
        values_t = helper.make_tensor("sv", TensorProto.FLOAT, [2], [1.0, 2.0])
        indices = helper.make_tensor("si", TensorProto.INT64, [2], [0, 1])
        if rng.random() < 0.7:
            _external(
                values_t,
                {"location": rng.choice(("../outside.bin", "data.bin", "")), "length": "8"},
            )
        sparse = helper.make_sparse_tensor(values_t, indices, rng.choice(([4], [10**12], [-3])))
        node = helper.make_node("Constant", [], ["sparse_out"], sparse_value=sparse)
        graph.node.append(node)
    else:
        return mutate_bytes(root, rng)
    save_graph(path, model)
    return f"graph {path.relative_to(root)}: {note}"


# ------------------------------------------------------------------ files and bombs


def _outside(root: Path) -> Path:
    target = root.parent / "outside-the-package.bin"
    target.write_bytes(b"secret outside the package")
    return target


def mutate_files(root: Path, rng: random.Random) -> str:
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    path = rng.choice(files)
    how = rng.choice(("symlink_out", "symlink_loop", "folder", "delete", "fifo"))
    path.unlink()
    if how == "symlink_out":
        path.symlink_to(_outside(root))
    elif how == "symlink_loop":
        path.symlink_to(path.name)
    elif how == "folder":
        path.mkdir()
    elif how == "fifo" and hasattr(os, "mkfifo"):
        os.mkfifo(path)
    return f"file {path.relative_to(root)}: {how}"


BOMBS: dict[str, Callable[[], tuple[str, str]]] = {
    # name -> () -> (file name, text)
    "json_list_15mb": lambda: ("inference_metadata.json", '{"a": [' + "1," * 7_500_000 + "1]}"),
    "yaml_list_15mb": lambda: ("inference_metadata.yaml", "a:\n" + "- 1\n" * 3_800_000),
    "json_list_50mb": lambda: ("inference_metadata.json", '{"a": [' + "1," * 25_000_000 + "1]}"),
    "yaml_list_50mb": lambda: ("inference_metadata.yaml", "a:\n" + "- 1\n" * 12_500_000),
    "sexagesimal": lambda: ("inference_metadata.yaml", "schema_version: 1" + ":59" * 300_000 + "\n"),
    "long_string": lambda: ("inference_metadata.json", '{"a": "' + "x" * 15_000_000 + '"}'),
    "deep_json": lambda: ("inference_metadata.json", "[" * 100_000 + "]" * 100_000),
    "deep_yaml": lambda: ("inference_metadata.yaml", "a: " + "[" * 100_000 + "]" * 100_000),
    "alias_bomb": lambda: (
        "inference_metadata.yaml",
        "a0: &a0 [" + ", ".join(['"lol"'] * 9) + "]\n"
        + "".join(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]\n" for i in range(1, 10)),
    ),
    "huge_int_json": lambda: ("inference_metadata.json", '{"a": ' + "9" * 900_000 + "}"),
}  # fmt: skip


def plant_bomb(root: Path, name: str) -> str:
    for old in (*METADATA, GENAI):
        if (root / old).exists():
            (root / old).unlink()
    file_name, text = BOMBS[name]()
    (root / file_name).write_text(text, encoding="utf-8")
    return f"bomb {name} ({len(text)} bytes)"


def mutate_bomb(root: Path, rng: random.Random) -> str:
    return plant_bomb(root, rng.choice(sorted(BOMBS)))


def text_graph_bomb(root: Path, rng: random.Random) -> str:
    found = [p for p in graphs(root) if p.name.endswith(".textproto")]
    if not found:
        return mutate_graph(root, rng)
    path = rng.choice(found)
    with path.open("ab") as out:
        out.write(b"\n#" + b" " * (10 * 2**20))
    return f"text graph {path.relative_to(root)} padded to 10 MB"


# family -> (weight, mutation)
FAMILIES: dict[str, tuple[int, Callable[[Path, random.Random], str]]] = {
    "structure": (40, mutate_structure),
    "text": (10, mutate_text),
    "bytes": (12, mutate_bytes),
    "graph": (28, mutate_graph),
    "files": (6, mutate_files),
    "bomb": (3, mutate_bomb),
    "text_graph_bomb": (1, text_graph_bomb),
}


def mutate(root: Path, rng: random.Random) -> tuple[str, str]:
    """Damage the package at ``root``; returns (family, what was done)."""
    names = sorted(FAMILIES)
    family = rng.choices(names, weights=[FAMILIES[n][0] for n in names])[0]
    try:
        return family, FAMILIES[family][1](root, rng)
    except (ValueError, KeyError, IndexError, TypeError, UnicodeError, yaml.YAMLError) as exc:
        # the base cannot take this mutation (e.g. text that is not YAML): damage its bytes
        return "bytes", f"{family} not applicable ({type(exc).__name__}); " + mutate_bytes(
            root, rng
        )
