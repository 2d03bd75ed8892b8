"""H74 / C78 / C83 / C103 / C104 / C105: every file a package names (and the tokenizer the
engine loads), the ONNX graphs' well-formedness and their real signatures.

Runs before the step rules, which compare invoke ports against the graphs loaded here.
"""

from __future__ import annotations

from ... import dtypes
from ..artifacts import (
    elem_type_problems,
    graph_problems,
    load_model,
    locate,
    signature,
    text_graph_too_large,
)
from ..model import AdapterImplementation, ArtifactSource, MappedVocabulary, OnnxImplementation
from .context import Ctx


def _confined(ctx: Ctx, relative: str, path, what: str):
    resolved, problem = locate(ctx.root, relative, ctx.mounts)
    if problem:
        ctx.add("H74", path, f"{what}: {problem}")
    return resolved


def check_components(ctx: Ctx) -> None:
    wf = ctx.workflow
    for name, comp in wf.components.items():
        impl = comp.implementation
        ipath = ("pipeline", "workflow", "components", name, "implementation")
        if isinstance(impl, AdapterImplementation) and impl.artifact is not None:
            _confined(ctx, impl.artifact, (*ipath, "artifact"), f"artifact of adapter {name!r}")
        if not isinstance(impl, OnnxImplementation):
            continue
        ctx.graphs[name] = None
        resolved = _confined(ctx, impl.artifact, (*ipath, "artifact"), f"graph of {name!r}")
        if resolved is None:
            continue
        artifact = (*ipath, "artifact")
        if resolved.name.endswith(".textproto"):
            problem = text_graph_too_large(resolved)
            if problem:
                ctx.add("C103", artifact, f"graph of {name!r}: {problem}")
                continue
        try:
            model = load_model(resolved)
        except Exception as exc:  # onnx raises DecodeError, ParseError, ValueError...
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            ctx.add(
                "C83",
                artifact,
                f"graph of {name!r} ({impl.artifact}) cannot be read as an ONNX model: "
                f"{first[:200]}",
            )
            continue
        graph = _checked_graph(ctx, name, impl.artifact, artifact, model, resolved)
        if graph is None:
            continue
        ctx.graphs[name] = graph
        check_graph_ports(ctx, name, comp, graph)


def _checked_graph(ctx: Ctx, name: str, relative: str, where: tuple, model, resolved):
    """The graph's signature, or None when it is refused (``artifacts.graph_problems``), so
    that a graph that validates also builds."""
    unnamed = any(not v.name for v in (*model.graph.input, *model.graph.output))
    if unnamed and not elem_type_problems(model):
        return signature(model, resolved)  # C78, reported with the ports
    refused = graph_problems(model, resolved.parent)
    for code, problem in refused:
        ctx.add(code, where, f"graph of {name!r} ({relative}): {problem}")
    return None if refused else signature(model, resolved)


def check_graph_ports(ctx: Ctx, name: str, comp, graph) -> None:
    """C78: declared ports against the graph's real inputs and outputs."""
    cpath = ("pipeline", "workflow", "components", name)
    if graph.unnamed_inputs or graph.unnamed_outputs:
        ctx.add(
            "C78",
            (*cpath, "implementation", "artifact"),
            f"graph of {name!r} has {graph.unnamed_inputs} unnamed input(s) and "
            f"{graph.unnamed_outputs} unnamed output(s); every graph value needs a name",
        )
    for direction, values in (("inputs", graph.inputs), ("outputs", graph.outputs)):
        declared = getattr(comp.ports, direction)
        if not declared:  # no declared ports: the graph's own are used
            continue
        for port, contract in declared.items():
            ppath = (*cpath, "ports", direction, port)
            actual = values.get(port)
            if actual is None:
                ctx.add(
                    "C78",
                    ppath,
                    f"declared {direction[:-1]} port {port!r} is not a graph {direction[:-1]} "
                    f"of {name!r} (graph {direction}: {', '.join(values) or 'none'})",
                )
                continue
            want = dtypes.canonical(contract.dtype)
            if actual.dtype is not None and actual.dtype != want:
                ctx.add(
                    "C78",
                    (*ppath, "dtype"),
                    f"port {port!r} is declared {want} but the graph has {actual.dtype}",
                )
                continue
            if actual.rank is not None and actual.rank != contract.rank:
                ctx.add(
                    "C78",
                    (*ppath, "rank"),
                    f"port {port!r} is declared rank {contract.rank} but the graph has rank "
                    f"{actual.rank}",
                )
                continue
            if contract.shape is not None and actual.dims is not None:
                for axis, (want_dim, graph_dim) in enumerate(
                    zip(contract.shape, actual.dims, strict=False)
                ):
                    if (
                        isinstance(want_dim, int)
                        and isinstance(graph_dim, int)
                        and want_dim != graph_dim
                    ):
                        ctx.add(
                            "C78",
                            (*ppath, "shape", axis),
                            f"port {port!r} axis {axis} is declared {want_dim} but the graph "
                            f"fixes it to {graph_dim}",
                        )
        if direction == "inputs":
            for graph_input in graph.required_inputs:
                if graph_input not in declared:
                    ctx.add(
                        "C78",
                        (*cpath, "ports", "inputs"),
                        f"graph input {graph_input!r} of {name!r} is not declared among the "
                        "ports, so no invoke can bind it",
                    )


def check_other_files(ctx: Ctx) -> None:
    md = ctx.metadata
    wf = ctx.workflow
    if wf is not None:
        for name, inp in wf.inputs.items():
            if isinstance(inp.source, ArtifactSource):
                _confined(
                    ctx,
                    inp.source.location,
                    ("pipeline", "workflow", "inputs", name, "source", "path"),
                    f"artifact source of input {name!r}",
                )
    tokenizer = md.package.tokenizer if md.package else None
    text_codec = None  # the tokenizer.json the engine loads: (path, where) or None
    if tokenizer is not None and tokenizer.artifacts:
        for i, artifact in enumerate(tokenizer.artifacts):
            where = ("package", "tokenizer", "artifacts", i, "location")
            resolved = _confined(ctx, artifact.location, where, "tokenizer file")
            if artifact.location.endswith("tokenizer.json") and text_codec is None:
                text_codec = (resolved, where)
    implicit = ctx.root / "tokenizer.json"
    if text_codec is None and (implicit.is_file() or implicit.is_symlink()):
        # not named by the document, but loaded by the engine: the same confinement
        text_codec = (_confined(ctx, "tokenizer.json", (), "tokenizer.json"), ())
    if text_codec is not None and text_codec[0] is not None:
        _check_tokenizer(ctx, *text_codec)
    if md.speculative is not None and isinstance(md.speculative.vocabulary, MappedVocabulary):
        _confined(
            ctx,
            md.speculative.vocabulary.artifact,
            ("speculative", "vocabulary", "artifact"),
            "vocabulary map",
        )
    if md.adapters is not None:
        for alias, artifact in md.adapters.artifacts.items():
            for i, weights in enumerate(artifact.weights):
                wpath = ("adapters", "artifacts", alias, "weights", i)
                for key in ("location", "config_location"):
                    relative = getattr(weights, key)
                    if relative is None:
                        continue
                    parts = relative.replace("\\", "/").split("/")
                    if parts[:2] != ["adapters", alias] or len(parts) < 3:
                        continue  # refused as G67 (rules/adapters.py), not read as a file
                    _confined(ctx, relative, (*wpath, key), f"adapter file of {alias!r}")


def _check_tokenizer(ctx: Ctx, path, where: tuple) -> None:
    """C83: the tokenizer the engine loads must load (a broken one would otherwise fail only
    when the engine is built)."""
    from tokenizers import Tokenizer

    try:
        Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception with serde's message
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        ctx.add("C83", where, f"tokenizer file {path.name} cannot be loaded: {first[:200]}")


def check(ctx: Ctx) -> None:
    if ctx.workflow is not None:
        check_components(ctx)
    check_other_files(ctx)
