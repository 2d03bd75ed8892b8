"""What a package asks of its caller and of a runtime (``reference-runtime inspect PKG``).

For each workflow input: how to pass it on the command line, its source, role, dtype, shape,
whether it is required and its default; for each output: its role and media; for each
component: what implements it and which executors can run it (the native executor is asked
whether it implements every node of the component's graph); the capabilities and adapter ABIs
the package declares, and whether this runtime supports each. A bare decoder is described as
the workflow it is lowered to.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .package import load_package
from .package.model import (
    AdapterImplementation,
    ApplicationSource,
    ArtifactSource,
    BindingImplementation,
    LiteralSource,
    OnnxImplementation,
    RequestSource,
    RuntimeRole,
)
from .requests import cli_value_hint
from .saving import media_suffix
from .support import REFERENCE_SUPPORT
from .tokenizer import tokenizer_file

# runtime role -> the flag that fills it
ROLE_FLAGS = {
    "max_iterations": "--max-new-tokens N",
    "max_output_tokens": "--max-new-tokens N",
    "seed": "--seed S",
    "sampling_temperature": "--temperature T (or --greedy)",
    "sampling_top_k": "--top-k K (or --greedy)",
    "sampling_top_p": "--top-p P (or --greedy)",
    "sampling_min_p": "--min-p P (or --greedy)",
}


def describe(path, draft=None) -> dict:
    """The description of the package at ``path`` (refused with ``PackageError`` when it does
    not load); ``draft``: a draft folder attached to the bare decoder at ``path``."""
    package = load_package(Path(path), draft=draft)
    wf = package.metadata.workflow
    text = tokenizer_file(package) is not None
    support = REFERENCE_SUPPORT
    manifest = wf.manifest
    return {
        "package": str(path),
        "kind": "workflow package"
        if package.provenance != "lowered"
        else "bare decoder with a draft (lowered to a speculative workflow)"
        if package.mounts
        else "bare decoder (lowered to a workflow)",
        # what the caller passes first (required, then optional), then what the package fixes
        "inputs": sorted(
            (_input(name, inp, text) for name, inp in wf.inputs.items()),
            key=lambda i: (i["source"] == "literal", not i["required"]),
        ),
        "outputs": [_output(name, out) for name, out in wf.outputs.items()],
        "components": [
            _component(package, name, comp) for name, comp in sorted(wf.components.items())
        ],
        "capabilities": [
            {"name": c, "supported": c in support.capabilities}
            for c in (manifest.capabilities if manifest else ())
        ],
        "adapter_abis": [
            {"abi": abi, "version": version, "supported": support.adapter_abis.get(abi) == version}
            for abi, version in sorted((manifest.adapter_abis if manifest else {}).items())
        ],
    }


def _shape(contract) -> list | None:
    """The declared shape (a scalar's is ``[]``), or None when only the rank is declared."""
    if contract.shape is None:
        return [] if contract.rank == 0 else None
    return [d if isinstance(d, int) else str(d) for d in contract.shape]


def _input(name: str, inp, text: bool) -> dict:
    source = inp.source
    role = inp.role.role if isinstance(inp.role, RuntimeRole) else None
    if isinstance(source, LiteralSource):
        how = "fixed by the package (a literal)"
    elif isinstance(source, ArtifactSource):
        how = f"read from artifact {source.location!r}"
    elif isinstance(source, RequestSource) and role == "prompt_tokens":
        how = "--tokens JSON or --prompt JSON" + (" (or --text TEXT)" if text else "")
    elif isinstance(source, RequestSource) and role in ROLE_FLAGS:
        how = ROLE_FLAGS[role]
    elif isinstance(source, RequestSource) and role == "prompt_text":
        how = "not accepted: it takes text through an adapter this runtime does not run"
    else:
        key = source.name if isinstance(source, ApplicationSource) else name
        how = (
            f"--input {cli_value_hint(key, inp.contract).split(' (')[0]} or --input {key}=@FILE.npy"
        )
    default = inp.default
    return {
        "name": name,
        "pass": how,
        "source": source.kind
        + (f" ({source.name})" if isinstance(source, ApplicationSource) else ""),
        "role": f"runtime {role}" if role else "opaque",
        "dtype": inp.contract.dtype,
        "rank": inp.contract.rank,
        "shape": _shape(inp.contract),
        "required": bool(inp.required and default is None),
        "default": list(default) if isinstance(default, tuple) else default,
    }


def _output(name: str, out) -> dict:
    media = out.media
    return {
        "name": name,
        "role": out.role,
        "dtype": out.contract.dtype,
        "rank": out.contract.rank,
        "shape": _shape(out.contract),
        "value_range": out.value_range,
        "media": None
        if media is None
        else {
            "container": media.container,
            "encoding": media.encoding,
            "sample_rate_hz": media.sample_rate_hz,
            "channels": media.channels,
            "delivery": media.delivery,
        },
        "saved_as": [".npy", *filter(None, [media_suffix(out)])],
    }


def _component(package, name: str, comp) -> dict:
    impl = comp.implementation
    graph = None
    if isinstance(impl, OnnxImplementation):
        kind, graph = "onnx", impl.artifact
    elif isinstance(impl, BindingImplementation) and comp.contract is not None:
        kind = f"binding contract {comp.contract.id}@{comp.contract.version}"
        artifact = dict(comp.contract.parameters).get("artifact")
        graph = str(artifact) if artifact is not None else None
    elif isinstance(impl, BindingImplementation):
        kind = "binding (a copy of its input)"
    elif isinstance(impl, AdapterImplementation):
        kind = f"adapter {impl.abi}@{impl.version}"
    else:  # pragma: no cover - the model admits no other implementation
        kind = type(impl).__name__
    if graph is None:
        executors = {"ort": "yes", "native": "yes"}  # no graph: runs beneath either
    else:
        executors = _graph_support(package.resolve(graph))
    return {
        "name": name,
        "implementation": kind,
        "graph": graph,
        "application_overridable": comp.application_overridable,
        "executors": executors,
    }


# operator domains ONNX Runtime implements itself
ORT_DOMAINS = ("", "ai.onnx", "ai.onnx.ml", "com.microsoft")


def _graph_support(path: Path) -> dict:
    """Per executor, whether it can run the graph at ``path``: ONNX Runtime where every node is
    in a domain it implements; the native executor where it implements every node (its plan of
    the graph has no problem)."""
    from .executors.native.graph import plan_model
    from .package.artifacts import load_model

    try:
        model = load_model(path, external_data=True)
    except Exception as exc:  # noqa: BLE001 - reported, not raised: inspect describes
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        unknown = f"unknown: the graph could not be read ({first})"
        return {"ort": unknown, "native": unknown}
    nodes = [*model.graph.node, *(n for f in model.functions for n in f.node)]
    local = {f.domain for f in model.functions}
    custom = sorted({n.domain for n in nodes} - set(ORT_DOMAINS) - local)
    ort = "yes" if not custom else f"only with custom operators registered ({', '.join(custom)})"
    try:
        _, problems = plan_model(model, np)
    except Exception as exc:  # noqa: BLE001 - reported, not raised: inspect describes
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return {"ort": ort, "native": f"unknown: the graph could not be planned ({first})"}
    if not problems:
        return {"ort": ort, "native": "yes"}
    ops = sorted({p.op for p in problems})
    return {
        "ort": ort,
        "native": f"no: {len(problems)} node(s) it does not implement ({', '.join(ops)})",
    }


def _shown(shape: list | None, rank: int) -> str:
    return f"rank {rank}" if shape is None else f"[{', '.join(map(str, shape))}]"


def render(info: dict) -> str:
    """The human-readable form of ``describe``."""
    lines = [f"{info['package']}: {info['kind']}", "", "inputs:"]
    for i in info["inputs"]:
        shape = _shown(i["shape"], i["rank"])
        need = "required" if i["required"] else "optional"
        default = "" if i["default"] is None else f", default {i['default']!r}"
        lines.append(f"  {i['name']}  {i['dtype']} {shape}  {need}{default}")
        lines.append(f"      source {i['source']}, role {i['role']}")
        lines.append(f"      pass: {i['pass']}")
    lines += ["", "outputs:"]
    for o in info["outputs"]:
        shape = _shown(o["shape"], o["rank"])
        lines.append(f"  {o['name']}  {o['dtype']} {shape}  role {o['role']}")
        if o["media"]:
            m = o["media"]
            lines.append(
                f"      media {m['container']} {m['encoding']}, {m['sample_rate_hz']} Hz, "
                f"{m['channels']} channel(s), {m['delivery']}"
            )
        lines.append(f"      run --out saves: {', '.join(o['saved_as'])}")
    lines += ["", "components:"]
    for c in info["components"]:
        graph = f" ({c['graph']})" if c["graph"] else ""
        lines.append(f"  {c['name']}  {c['implementation']}{graph}")
        for executor, answer in c["executors"].items():
            lines.append(f"      --executor {executor}: {answer}")
    lines += ["", "capabilities:"]
    for c in info["capabilities"] or [{"name": "(none declared)", "supported": True}]:
        lines.append(f"  {c['name']}{'' if c['supported'] else '  (not supported here)'}")
    if info["adapter_abis"]:
        lines += ["", "adapter ABIs:"]
        for a in info["adapter_abis"]:
            note = "" if a["supported"] else "  (not supported here)"
            lines.append(f"  {a['abi']}@{a['version']}{note}")
    return "\n".join(lines) + "\n"
