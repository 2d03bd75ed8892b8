"""G rules: LoRA adapter service, preprocessing programs, generation overrides, profiles and
constraint languages."""

from __future__ import annotations

from ... import dtypes
from ...contracts.abis import ADAPTER_ABIS, ADAPTERS_APPLICATION_CAPABILITY
from ..model import (
    AdapterImplementation,
    DecodeOp,
    PublishOp,
    RequestSource,
    RuntimeRole,
)
from .context import Ctx, VType, layout_name, mismatch, same_layout

LOADER_FOR_FORMAT = {
    "json": "onnx-genai.adapters.json@1",
    "safetensors": "onnx-genai.adapters.safetensors@1",
    "hf_peft": "onnx-genai.adapters.hf-peft@1",
    "ort_genai": "onnxruntime.lora-adapter@1",
}

SELECTION = {
    # field: (role, dtype family, rank)
    "segments": ("adapter_segments", "integer", 2),
    "adapter_counts": ("adapter_counts", "integer", 1),
    "scales": ("adapter_scales", "float", 2),
    "active": ("adapter_active", "bool", 1),
}


def _a(word: str) -> str:
    """``word`` with its indefinite article."""
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def check_adapter_service(ctx: Ctx) -> None:
    adapters = ctx.metadata.adapters
    if adapters is None:
        return
    wf = ctx.workflow
    path = ("adapters",)
    if adapters.application_capability != ADAPTERS_APPLICATION_CAPABILITY:
        ctx.add(
            "G64",
            (*path, "application_capability"),
            f"application_capability must be {ADAPTERS_APPLICATION_CAPABILITY!r}, not "
            f"{adapters.application_capability!r}",
        )
    # G65: selection inputs
    sel = adapters.selection
    for key, (role, family, rank) in SELECTION.items():
        name = getattr(sel, key)
        if name is None or wf is None:
            continue
        spath = (*path, "selection", key)
        inp = wf.inputs.get(name)
        if inp is None:
            ctx.add("G65", spath, f"selection {key} {name!r} is not a workflow input")
            continue
        c = inp.contract
        dtype = dtypes.canonical(c.dtype)
        ok_dtype = (
            dtype in dtypes.INTEGER
            if family == "integer"
            else dtype in dtypes.FLOATING
            if family == "float"
            else dtype == "bool"
        )
        problems = []
        if not ok_dtype:
            problems.append(f"dtype {dtype} (needs {family})")
        if c.rank != rank:
            problems.append(f"rank {c.rank} (needs {rank})")
        elif (
            rank == 2
            and c.shape is not None
            and len(c.shape) == 2  # a shape unlike its rank is B07's to report
            and isinstance(c.shape[1], int)
            and (c.shape[1] != sel.max_adapters)
        ):
            problems.append(f"{c.shape[1]} adapter slots (max_adapters is {sel.max_adapters})")
        if c.batch_layout.kind != "request_aligned" or c.request_axis != 0:
            problems.append(f"layout {layout_name(c.batch_layout)} (needs request_aligned axis 0)")
        if not isinstance(inp.role, RuntimeRole) or inp.role.role != role:
            actual = inp.role.role if isinstance(inp.role, RuntimeRole) else inp.role.kind
            problems.append(f"role {actual} (needs runtime role {role})")
        if inp.source.kind not in ("request", "application"):
            problems.append(f"{inp.source.kind} source (needs request or application)")
        for problem in problems:
            ctx.add("G65", spath, f"selection {key} {name!r}: {problem}")
    # G66: targets
    ids: set[str] = set()
    components = wf.components if wf else {}
    for i, target in enumerate(adapters.target_manifest.targets):
        tpath = (*path, "target_manifest", "targets", i)
        if target.id in ids:
            ctx.add("G66", (*tpath, "id"), f"target id {target.id!r} appears twice")
        ids.add(target.id)
        if wf is not None and target.component not in components:
            ctx.add(
                "G66",
                (*tpath, "component"),
                f"target {target.id!r} names unknown component {target.component!r}",
            )
        if target.rank > min(target.input_features, target.output_features):
            ctx.add(
                "G66",
                (*tpath, "rank"),
                f"target {target.id!r} rank {target.rank} exceeds its features "
                f"({target.input_features} in, {target.output_features} out)",
            )
        if target.slice is not None and (
            target.slice.start + target.slice.length > target.output_features
        ):
            ctx.add(
                "G66",
                (*tpath, "slice"),
                f"slice of target {target.id!r} runs past its {target.output_features} output features",
            )
    # G67: artifacts
    indices = sorted(a.index for a in adapters.artifacts.values())
    if indices != list(range(len(indices))):
        ctx.add(
            "G67",
            (*path, "artifacts"),
            f"artifact indices must be exactly 0..{len(indices) - 1}, found {indices}",
        )
    targets = {t.id: t for t in adapters.target_manifest.targets}
    for alias, artifact in adapters.artifacts.items():
        apath = (*path, "artifacts", alias)
        if dtypes.canonical(artifact.dtype) not in dtypes.FLOATING:
            ctx.add("G67", (*apath, "dtype"), f"adapter {alias!r} weights must be floating point")
        for i, weights in enumerate(artifact.weights):
            wpath = (*apath, "weights", i)
            want = LOADER_FOR_FORMAT[weights.format]
            if weights.loader_capability != want:
                ctx.add(
                    "G67",
                    (*wpath, "loader_capability"),
                    f"format {weights.format} is read by {want}, not {weights.loader_capability}",
                )
            if weights.format == "hf_peft":
                if weights.scale_encoding != "alpha_over_rank":
                    ctx.add(
                        "G67",
                        (*wpath, "scale_encoding"),
                        "hf_peft weights are scaled by alpha / rank: scale_encoding must be "
                        f"alpha_over_rank, not {weights.scale_encoding}",
                    )
                if weights.config_location is None:
                    ctx.add(
                        "G67",
                        (*wpath, "config_location"),
                        "hf_peft weights need config_location (adapter_config.json)",
                    )
            if weights.format == "ort_genai":
                if weights.scale_encoding != "baked":
                    ctx.add(
                        "G67",
                        (*wpath, "scale_encoding"),
                        "ort_genai weights carry their scale baked in: scale_encoding must be "
                        f"baked, not {weights.scale_encoding}",
                    )
                for binding in artifact.bindings:
                    t = targets.get(binding.target)
                    if t is not None and t.graph_inputs is None:
                        ctx.add(
                            "G67",
                            wpath,
                            f"ort_genai weights of {alias!r} feed graph inputs, but target "
                            f"{t.id!r} declares no graph_inputs",
                        )
        bound: set[str] = set()
        for i, binding in enumerate(artifact.bindings):
            bpath = (*apath, "bindings", i)
            if binding.target not in targets:
                ctx.add(
                    "G67",
                    (*bpath, "target"),
                    f"adapter {alias!r} binds unknown target {binding.target!r}",
                )
            if binding.target in bound:
                ctx.add(
                    "G67", (*bpath, "target"), f"adapter {alias!r} binds {binding.target!r} twice"
                )
            bound.add(binding.target)
    # G68: capabilities
    if wf is not None:
        missing = [
            cap
            for cap in ("parameter_adapters", "heterogeneous_adapter_batching")
            if cap not in wf.manifest.capabilities
        ]
        if missing:
            ctx.add(
                "G68",
                ("pipeline", "workflow", "manifest", "capabilities"),
                f"an adapters section requires manifest capabilities: {', '.join(missing)}",
            )


def check_preprocessing(ctx: Ctx) -> None:
    wf = ctx.workflow
    md = ctx.metadata
    programs = {}
    if md.preprocessing is not None:
        programs = {k: getattr(md.preprocessing, k) for k in ("image", "audio")}
    components = wf.components if wf else {}
    counts = ctx.flow.invoke_count if ctx.flow else {}
    # every preprocess adapter needs the program of its kind, naming it
    for name, comp in components.items():
        impl = comp.implementation
        if not isinstance(impl, AdapterImplementation) or impl.abi not in ADAPTER_ABIS:
            continue
        kind = ADAPTER_ABIS[impl.abi].program
        if kind is None:
            continue
        cpath = ("pipeline", "workflow", "components", name)
        program = programs.get(kind)
        if program is None or program.adapter != name:
            ctx.add(
                "G69",
                cpath,
                f"{impl.abi} adapter {name!r} has no preprocessing.{kind} program naming it",
            )
            continue
        encoded = comp.ports.inputs.get("encoded") if comp.ports and comp.ports.inputs else None
        if encoded is None or dtypes.canonical(encoded.dtype) != "uint8" or encoded.rank != 1:
            ctx.add(
                "G69",
                (*cpath, "ports", "inputs"),
                f"preprocess adapter {name!r} reads encoded bytes from input port 'encoded' "
                "(uint8, rank 1)",
            )
        if counts.get(name, 0) != 1:
            ctx.add(
                "G69",
                cpath,
                f"preprocess adapter {name!r} is invoked {counts.get(name, 0)} times; it must "
                "run exactly once",
            )
    for kind, program in programs.items():
        if program is None:
            continue
        ppath = ("preprocessing", kind)
        comp = components.get(program.adapter)
        abi = (
            comp.implementation.abi
            if comp and isinstance(comp.implementation, AdapterImplementation)
            else None
        )
        if wf is not None and (
            abi is None or ADAPTER_ABIS.get(abi) is None or ADAPTER_ABIS[abi].program != kind
        ):
            ctx.add(
                "G69",
                (*ppath, "adapter"),
                f"the {kind} program must be run by one {kind}-preprocess adapter component; "
                f"{program.adapter!r} is not one",
            )
            comp = None
        want_format = "png" if kind == "image" else "wav"
        for i, op in enumerate(program.operations):
            if isinstance(op, DecodeOp) and op.format != want_format:
                ctx.add(
                    "G69",
                    (*ppath, "operations", i, "format"),
                    f"the {kind} program decodes {want_format}, not {op.format}",
                )
        published = {op.output for op in program.operations if isinstance(op, PublishOp)}
        ports = (
            comp.ports.outputs if comp and comp.ports and comp.ports.outputs is not None else None
        )
        for out_name, out in program.outputs.items():
            opath = (*ppath, "outputs", out_name)
            if out.optional:
                ctx.add(
                    "G69", (*opath, "optional"), f"program output {out_name!r} cannot be optional"
                )
            if out.contract is None:
                ctx.add("G69", opath, f"program output {out_name!r} needs a contract")
            if out_name not in published:
                ctx.add("G69", opath, f"no operation publishes program output {out_name!r}")
            if ports is not None and out.contract is not None:
                port = ports.get(out_name)
                if port is None:
                    ctx.add(
                        "G69", opath, f"adapter {program.adapter!r} has no output port {out_name!r}"
                    )
                elif mismatch(VType.of_contract(out.contract), VType.of_contract(port)) or not (
                    same_layout(out.contract.batch_layout, port.batch_layout)
                ):
                    ctx.add(
                        "G69",
                        (*opath, "contract"),
                        f"program output {out_name!r} differs from port {out_name!r} of "
                        f"{program.adapter!r}",
                    )
        if ports is not None:
            for port_name in ports:
                if port_name not in program.outputs:
                    ctx.add(
                        "G69",
                        (
                            "pipeline",
                            "workflow",
                            "components",
                            program.adapter,
                            "ports",
                            "outputs",
                            port_name,
                        ),
                        f"output port {port_name!r} is not produced by the {kind} program",
                    )


def check_generation(ctx: Ctx) -> None:
    gen = ctx.metadata.generation
    if gen is None:
        return
    wf = ctx.workflow
    for field_name, override in gen.overrides.items():
        path = ("generation", "overrides", field_name)
        inp = wf.inputs.get(override.input) if wf else None
        problem = None
        if wf is None:
            pass  # H74 reports the missing pipeline
        elif inp is None:
            problem = "is not a workflow input"
        elif not isinstance(inp.source, RequestSource):
            problem = f"has {_a(inp.source.kind)} source"
        elif not isinstance(inp.role, RuntimeRole):
            problem = f"has {_a(inp.role.kind)} role"
        if problem:
            ctx.add(
                "G70",
                (*path, "input"),
                f"override {field_name!r} must name a request-sourced input with a runtime "
                f"role; {override.input!r} {problem}",
            )
        c = override.constraint
        if (
            c is not None
            and c.minimum is not None
            and c.maximum is not None
            and c.minimum > c.maximum
        ):
            ctx.add(
                "G70",
                (*path, "constraint"),
                f"override {field_name!r} has minimum {c.minimum:g} above maximum {c.maximum:g}",
            )


def check_profiles(ctx: Ctx) -> None:
    md = ctx.metadata
    wf = ctx.workflow
    outputs = wf.outputs if wf else {}
    for name, profile in md.profiles.items():
        path = ("profiles", name)
        if profile.kind not in ctx.support.profile_kinds:
            if profile.requirement == "required":
                ctx.add(
                    "G71",
                    (*path, "kind"),
                    f"required profile {name!r} has kind {profile.kind!r}, which this runtime "
                    f"does not know ({', '.join(sorted(ctx.support.profile_kinds))})",
                )
            continue
        if wf is None:
            continue  # H74 reports the missing pipeline
        for key, entry in profile.outputs.items():
            epath = (*path, "outputs", key)
            out = outputs.get(entry.output)
            if out is None:
                ctx.add(
                    "G71",
                    (*epath, "output"),
                    f"profile {name!r} maps {key!r} to {entry.output!r}, which is not a workflow output",
                )
                continue
            if entry.decoding == "tokenizer":
                if out.role != "tokens":
                    ctx.add(
                        "G71",
                        (*epath, "decoding"),
                        f"tokenizer decoding needs a tokens output; {entry.output!r} has role "
                        f"{out.role}",
                    )
                elif md.package is None or md.package.tokenizer is None:
                    ctx.add(
                        "G71",
                        (*epath, "decoding"),
                        "tokenizer decoding needs package.tokenizer, which the package does "
                        "not declare",
                    )
            if entry.decoding == "wav":
                if out.role != "audio":
                    ctx.add(
                        "G71",
                        (*epath, "decoding"),
                        f"wav decoding needs an audio output; {entry.output!r} has role {out.role}",
                    )
                elif out.media is None:
                    ctx.add(
                        "G71",
                        (*epath, "decoding"),
                        f"wav decoding needs a media block on audio output {entry.output!r}",
                    )


def check_constraint_languages(ctx: Ctx) -> None:
    md = ctx.metadata
    if md.package is None:
        return
    wf = ctx.workflow
    if wf is None:
        return  # H74 reports the missing pipeline
    for i, lang in enumerate(md.package.constraint_languages):
        comp = wf.components.get(lang.component)
        if comp is None:
            problem = "is not a declared component"
        elif not isinstance(comp.implementation, AdapterImplementation):
            problem = f"is {_a(comp.implementation.kind)} component"
        elif comp.implementation.abi != "onnx-genai.grammar-guidance":
            problem = f"is {_a(comp.implementation.abi)} adapter"
        else:
            continue
        ctx.add(
            "G79",
            ("package", "constraint_languages", i, "component"),
            f"the {lang.dialect} language names {lang.component!r}, which {problem}; only a "
            "grammar-guidance adapter component can enforce a constraint language",
        )


def check(ctx: Ctx) -> None:
    check_adapter_service(ctx)
    check_preprocessing(ctx)
    check_generation(ctx)
    check_profiles(ctx)
    check_constraint_languages(ctx)
