"""G rules: LoRA adapter service, preprocessing programs, generation overrides, profiles and
constraint languages."""

from __future__ import annotations

import math

from ... import dtypes
from .. import preprocessing
from ..abis import ADAPTERS_APPLICATION_CAPABILITY
from ..model import AdapterImplementation, RequestSource, RuntimeRole
from ..visit import invocations
from .context import Ctx, layout_name, same_layout

LOADER_FOR_FORMAT = {
    "json": "onnx-genai.adapters.json@1",
    "safetensors": "onnx-genai.adapters.safetensors@1",
    "hf_peft": "onnx-genai.adapters.hf-peft@1",
    "ort_genai": "onnxruntime.lora-adapter@1",
}

SELECTION = {
    # field: (role, dtype, rank)
    "segments": ("adapter_segments", "int64", 2),
    "adapter_counts": ("adapter_counts", "int64", 1),
    "scales": ("adapter_scales", "float32", 2),
    "active": ("adapter_active", "bool", 1),
}

FLOAT_ACTIVATIONS = ("float16", "float32", "bfloat16")
READABLE_FORMATS = ("json", "hf_peft", "safetensors")


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
    if adapters.cache.max_entries == 0:
        ctx.add("G64", (*path, "cache", "max_entries"), "cache.max_entries must be at least 1")
    if adapters.selection.max_adapters == 0:
        ctx.add(
            "G64", (*path, "selection", "max_adapters"), "selection.max_adapters must be at least 1"
        )
    if not adapters.artifacts:
        ctx.add("G64", (*path, "artifacts"), "adapters.artifacts must declare at least one adapter")
    if not adapters.target_manifest.targets:
        ctx.add(
            "G64",
            (*path, "target_manifest", "targets"),
            "adapters.target_manifest.targets must declare at least one target",
        )
    _check_selection(ctx, adapters, wf)
    _check_targets(ctx, adapters, wf)
    _check_artifacts(ctx, adapters)
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
    for alias, artifact in adapters.artifacts.items():
        if artifact.weights and not any(w.format in READABLE_FORMATS for w in artifact.weights):
            ctx.add(
                "H93",
                ("adapters", "artifacts", alias, "weights"),
                f"adapter {alias!r} has weights only in "
                f"{', '.join(sorted({w.format for w in artifact.weights}))}; this runtime reads "
                f"{', '.join(READABLE_FORMATS)}",
            )
    if not adapters.portable_fallback:
        ctx.add(
            "H93",
            (*path, "portable_fallback"),
            "adapters without portable_fallback need a native LoRA application path, which this "
            "runtime does not have (it applies adapters through the portable overlay)",
        )


def _check_selection(ctx: Ctx, adapters, wf) -> None:
    """G65: each selection input is a required request/application input of exactly the
    declared dtype and shape (``[batch]`` or ``[batch, max_adapters]``), request-aligned on
    axis 0, with its adapter runtime role."""
    sel = adapters.selection
    for key, (role, dtype, rank) in SELECTION.items():
        name = getattr(sel, key)
        if name is None or wf is None:
            continue
        spath = ("adapters", "selection", key)
        inp = wf.inputs.get(name)
        if inp is None:
            ctx.add("G65", spath, f"selection {key} {name!r} is not a workflow input")
            continue
        c = inp.contract
        want_shape = ("batch",) if rank == 1 else ("batch", sel.max_adapters)
        problems = []
        if c.dtype != dtype:
            problems.append(f"dtype {c.dtype} (needs {dtype})")
        if c.rank != rank:
            problems.append(f"rank {c.rank} (needs {rank})")
        elif c.shape is None or tuple(c.shape) != want_shape:
            shown = "none" if c.shape is None else list(c.shape)
            problems.append(f"shape {shown} (needs {list(want_shape)})")
        if c.batch_layout.kind != "request_aligned" or c.request_axis != 0:
            problems.append(f"layout {layout_name(c.batch_layout)} (needs request_aligned axis 0)")
        if not isinstance(inp.role, RuntimeRole) or inp.role.role != role:
            actual = inp.role.role if isinstance(inp.role, RuntimeRole) else inp.role.kind
            problems.append(f"role {actual} (needs runtime role {role})")
        if inp.source.kind not in ("request", "application"):
            problems.append(f"{inp.source.kind} source (needs request or application)")
        if not inp.required:
            problems.append("optional input (needs required: true)")
        for problem in problems:
            ctx.add("G65", spath, f"selection {key} {name!r}: {problem}")


def _check_targets(ctx: Ctx, adapters, wf) -> None:
    """G66: target descriptors."""
    ids: set[str] = set()
    resolved: set[tuple] = set()
    components = wf.components if wf else {}
    for i, target in enumerate(adapters.target_manifest.targets):
        tpath = ("adapters", "target_manifest", "targets", i)
        for key in ("id", "component", "initializer", "node_name", "output_name"):
            if not getattr(target, key).strip():
                ctx.add("G66", (*tpath, key), f"target {key} must not be empty")
        if target.id in ids:
            ctx.add("G66", (*tpath, "id"), f"target id {target.id!r} appears twice")
        ids.add(target.id)
        sl = target.output_slice
        binding = (
            target.component,
            target.initializer,
            *((sl.role, sl.offset, sl.width) if sl else (None, None, None)),
        )
        if binding in resolved:
            ctx.add(
                "G66",
                tpath,
                f"target {target.id!r} resolves to the same component/initializer/slice as "
                "another target",
            )
        resolved.add(binding)
        if target.input_features == 0 or target.output_features == 0:
            ctx.add(
                "G66",
                tpath,
                f"target {target.id!r} needs input_features and output_features of at least 1",
            )
        if dtypes.canonical(target.activation_dtype) not in FLOAT_ACTIVATIONS:
            ctx.add(
                "G66",
                (*tpath, "activation_dtype"),
                f"activation_dtype {target.activation_dtype!r} must be float16, float32 or "
                "bfloat16",
            )
        if target.rank == 0:
            ctx.add("G66", (*tpath, "rank"), "a target rank, when given, must be at least 1")
        if target.alpha is not None and not _positive(target.alpha):
            ctx.add("G66", (*tpath, "alpha"), "a target alpha, when given, must be finite and > 0")
        if sl is not None and (
            not sl.role.strip()
            or sl.width == 0
            or sl.rank == 0
            or (sl.alpha is not None and not _positive(sl.alpha))
            or sl.offset + sl.width > target.output_features
        ):
            ctx.add(
                "G66",
                (*tpath, "output_slice"),
                f"output_slice of target {target.id!r} needs a role, a width of at least 1 and "
                f"a range within its {target.output_features} output features",
            )
        gi = target.graph_inputs
        if gi is not None and (
            not gi.a.strip()
            or not gi.b.strip()
            or gi.a == gi.b
            or (gi.scale is not None and (not gi.scale.strip() or gi.scale in (gi.a, gi.b)))
        ):
            ctx.add(
                "G66",
                (*tpath, "graph_inputs"),
                "graph_inputs must name distinct, non-empty a, b and (optional) scale inputs",
            )
        if wf is not None and target.component not in components:
            ctx.add(
                "G66",
                (*tpath, "component"),
                f"target {target.id!r} names unknown component {target.component!r}",
            )


def _positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


def _under(location: str, alias: str) -> bool:
    parts = location.replace("\\", "/").split("/")
    return (
        location.startswith(f"adapters/{alias}/")
        and not location.startswith("/")
        and ".." not in parts
    )


def _check_artifacts(ctx: Ctx, adapters) -> None:
    """G67: artifacts, their weight files and their target bindings."""
    indices = sorted(a.index for a in adapters.artifacts.values())
    if indices != list(range(len(indices))):
        ctx.add(
            "G67",
            ("adapters", "artifacts"),
            f"artifact indices must be exactly 0..{len(indices) - 1}, found {indices}",
        )
    targets = {t.id: t for t in adapters.target_manifest.targets}
    identities: set[tuple[str, str]] = set()
    for alias, artifact in adapters.artifacts.items():
        apath = ("adapters", "artifacts", alias)
        if not artifact.identity.strip() or not artifact.version.strip():
            ctx.add("G67", apath, f"adapter {alias!r} needs a non-empty identity and version")
        if (artifact.identity, artifact.version) in identities:
            ctx.add(
                "G67",
                apath,
                f"adapter {alias!r} repeats identity {artifact.identity}@{artifact.version}",
            )
        identities.add((artifact.identity, artifact.version))
        prov = artifact.provenance
        if prov is not None and (
            not prov.producer.strip()
            or (prov.source is not None and not prov.source.strip())
            or (prov.revision is not None and not prov.revision.strip())
        ):
            ctx.add(
                "G67",
                (*apath, "provenance"),
                "provenance producer (and source/revision when given) must not be empty",
            )
        if artifact.rank == 0:
            ctx.add("G67", (*apath, "rank"), f"adapter {alias!r} rank must be at least 1")
        if not _positive(artifact.alpha):
            ctx.add("G67", (*apath, "alpha"), f"adapter {alias!r} alpha must be finite and > 0")
        if dtypes.canonical(artifact.dtype) not in FLOAT_ACTIVATIONS:
            ctx.add(
                "G67",
                (*apath, "dtype"),
                f"adapter {alias!r} weights must be float16, float32 or bfloat16, "
                f"not {artifact.dtype!r}",
            )
        if not artifact.weights:
            ctx.add("G67", (*apath, "weights"), f"adapter {alias!r} declares no weights")
        formats: set[str] = set()
        for i, weights in enumerate(artifact.weights):
            wpath = (*apath, "weights", i)
            if weights.format in formats:
                ctx.add(
                    "G67", (*wpath, "format"), f"adapter {alias!r} repeats format {weights.format}"
                )
            formats.add(weights.format)
            if not _under(weights.location, alias):
                ctx.add(
                    "G67",
                    (*wpath, "location"),
                    f"weights of {alias!r} must lie under adapters/{alias}/, not "
                    f"{weights.location!r}",
                )
            want = LOADER_FOR_FORMAT[weights.format]
            if weights.loader_capability != want:
                ctx.add(
                    "G67",
                    (*wpath, "loader_capability"),
                    f"format {weights.format} is read by {want}, not "
                    f"{weights.loader_capability or '(empty)'}",
                )
            if weights.format == "hf_peft" and weights.scale_encoding != "alpha_over_rank":
                ctx.add(
                    "G67",
                    (*wpath, "scale_encoding"),
                    "hf_peft weights are scaled by alpha / rank: scale_encoding must be "
                    f"alpha_over_rank, not {weights.scale_encoding}",
                )
            if weights.format == "ort_genai" and weights.scale_encoding != "baked":
                ctx.add(
                    "G67",
                    (*wpath, "scale_encoding"),
                    "ort_genai weights carry their scale baked in: scale_encoding must be "
                    f"baked, not {weights.scale_encoding}",
                )
            if (weights.format == "hf_peft") != (weights.config_location is not None):
                ctx.add(
                    "G67",
                    (*wpath, "config_location"),
                    "hf_peft weights need config_location (adapter_config.json); other formats "
                    "must not declare one",
                )
            if weights.config_location is not None and not _under(weights.config_location, alias):
                ctx.add(
                    "G67",
                    (*wpath, "config_location"),
                    f"config_location of {alias!r} must lie under adapters/{alias}/",
                )
        if not artifact.bindings:
            ctx.add("G67", (*apath, "bindings"), f"adapter {alias!r} binds no target")
        has_ort = any(w.format == "ort_genai" for w in artifact.weights)
        bound: set[str] = set()
        keys: set[str] = set()
        for i, binding in enumerate(artifact.bindings):
            bpath = (*apath, "bindings", i)
            if not binding.target.strip() or not binding.weight_key.strip():
                ctx.add("G67", bpath, "a binding needs a non-empty target and weight_key")
            if binding.weight_key in keys:
                ctx.add(
                    "G67",
                    (*bpath, "weight_key"),
                    f"adapter {alias!r} uses weight_key {binding.weight_key!r} twice",
                )
            keys.add(binding.weight_key)
            if binding.rank == 0:
                ctx.add("G67", (*bpath, "rank"), "a binding rank, when given, must be at least 1")
            if binding.alpha is not None and not _positive(binding.alpha):
                ctx.add("G67", (*bpath, "alpha"), "a binding alpha, when given, must be > 0")
            if binding.target in bound:
                ctx.add(
                    "G67", (*bpath, "target"), f"adapter {alias!r} binds {binding.target!r} twice"
                )
            bound.add(binding.target)
            t = targets.get(binding.target)
            if t is None:
                ctx.add(
                    "G67",
                    (*bpath, "target"),
                    f"adapter {alias!r} binds unknown target {binding.target!r}",
                )
                continue
            if has_ort and t.graph_inputs is None:
                ctx.add(
                    "G67",
                    (*bpath, "target"),
                    f"ort_genai weights of {alias!r} feed graph inputs, but target {t.id!r} "
                    "declares no graph_inputs",
                )
            rank = binding.rank if binding.rank is not None else artifact.rank
            alpha = binding.alpha if binding.alpha is not None else artifact.alpha
            for policy, where in ((t, "target"), (t.output_slice, "output slice")):
                if policy is None:
                    continue
                if policy.rank is not None and policy.rank != rank:
                    ctx.add(
                        "G67",
                        bpath,
                        f"effective rank {rank} of {alias!r} breaks the {where} policy "
                        f"rank {policy.rank} of {t.id!r}",
                    )
                if policy.alpha is not None and policy.alpha != alpha:
                    ctx.add(
                        "G67",
                        bpath,
                        f"effective alpha {alpha:g} of {alias!r} breaks the {where} policy "
                        f"alpha {policy.alpha:g} of {t.id!r}",
                    )


def _program_names(program) -> set[str]:
    """Every value a program's transforms produce (their ``outputs``, or their ``op``)."""
    names: set[str] = set()
    for t in program.transforms:
        names.update(t.outputs or (t.op,))
    return names


def check_preprocessing(ctx: Ctx) -> None:
    """G69 (and H93 for operations this runtime does not implement)."""
    wf = ctx.workflow
    md = ctx.metadata
    prep = md.preprocessing
    if wf is None:
        return
    for kind in ("image", "audio"):
        program = getattr(prep, kind) if prep is not None else None
        abi = f"onnx-genai.{kind}-preprocess"
        adapters = [
            (name, comp)
            for name, comp in wf.components.items()
            if isinstance(comp.implementation, AdapterImplementation)
            and comp.implementation.abi == abi
            and comp.implementation.version == "1"
        ]
        ppath = ("preprocessing", kind)
        if program is None:
            for name, _ in adapters:
                ctx.add(
                    "G69",
                    ("pipeline", "workflow", "components", name),
                    f"{abi}@1 adapter {name!r} needs a preprocessing.{kind} program",
                )
            continue
        for i, t in enumerate(program.transforms):
            why = preprocessing.unsupported(kind, t)
            if why:
                ctx.add("H93", (*ppath, "transforms", i, "op"), f"preprocessing.{kind}: {why}")
        if len(adapters) != 1:
            ctx.add(
                "G69",
                ppath,
                f"preprocessing.{kind} needs exactly one {abi}@1 adapter component, found "
                f"{len(adapters)}",
            )
            continue
        name, comp = adapters[0]
        cpath = ("pipeline", "workflow", "components", name)
        encoded = comp.ports.inputs.get("encoded")
        if encoded is None or encoded.dtype != "uint8" or encoded.rank != 1:
            ctx.add(
                "G69",
                (*cpath, "ports", "inputs"),
                f"preprocess adapter {name!r} reads encoded bytes from input port 'encoded' "
                "(uint8, rank 1)",
            )
        invokes = list(invocations(wf.steps, name))
        if len(invokes) != 1:
            ctx.add(
                "G69",
                cpath,
                f"preprocess adapter {name!r} is invoked {len(invokes)} times; it must run "
                "exactly once",
            )
            continue
        port_of = {value: port for port, value in invokes[0].outputs.items()}
        produced = _program_names(program)
        declared = {out.name for out in program.outputs}
        for i, out in enumerate(program.outputs):
            opath = (*ppath, "outputs", i)
            if out.optional:
                ctx.add(
                    "G69",
                    (*opath, "optional"),
                    f"program output {out.name!r} cannot be optional in a workflow",
                )
            if out.source not in produced:
                ctx.add(
                    "G69",
                    (*opath, "source"),
                    f"program output {out.name!r} reads {out.source!r}, which no transform "
                    "produces",
                )
            if out.contract is None:
                ctx.add("G69", opath, f"program output {out.name!r} needs a contract")
                continue
            if out.contract.dtype != out.dtype:
                ctx.add(
                    "G69",
                    (*opath, "dtype"),
                    f"program output {out.name!r} has dtype {out.dtype} but its contract "
                    f"says {out.contract.dtype}",
                )
            port = port_of.get(out.name)
            if port is None:
                ctx.add(
                    "G69",
                    (*opath, "name"),
                    f"program output {out.name!r} is not an output of the {name!r} invocation",
                )
                continue
            contract = comp.ports.outputs.get(port)
            if contract is None:
                ctx.add(
                    "G69",
                    (*cpath, "ports", "outputs"),
                    f"preprocess adapter {name!r} has no output port {port!r}",
                )
            elif (
                dtypes.canonical(out.contract.dtype) != dtypes.canonical(contract.dtype)
                or out.contract.rank != contract.rank
                or out.contract.shape != contract.shape
                or not same_layout(out.contract.batch_layout, contract.batch_layout)
            ):
                ctx.add(
                    "G69",
                    (*opath, "contract"),
                    f"program output {out.name!r} has a contract unlike port {port!r} of {name!r}",
                )
        for port, value in invokes[0].outputs.items():
            if value not in declared:
                ctx.add(
                    "G69",
                    (*cpath, "ports", "outputs", port),
                    f"output port {port!r} of {name!r} is bound to {value!r}, which the {kind} "
                    "program does not declare",
                )


# Search defaults this runtime honours, and the values of the others that change nothing.
NEUTRAL_DEFAULTS = {
    "repetition_penalty": (1.0,),
    "num_beams": (1,),
    "num_return_sequences": (1,),
    "min_length": (0,),
    "length_penalty": (1.0,),
    "no_repeat_ngram_size": (0,),
    "diversity_penalty": (0.0,),
}


def check_generation(ctx: Ctx) -> None:
    gen = ctx.metadata.generation
    if gen is None:
        return
    wf = ctx.workflow
    for field_name, override in gen.overrides.items():
        path = ("generation", "overrides", field_name)
        if not field_name.strip():
            ctx.add("G70", path, "an override needs a non-empty field name")
        inp = wf.inputs.get(override.input) if wf else None
        problem = None
        if wf is None:
            problem = "cannot be checked: the package declares no pipeline.workflow"
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
    defaults = gen.defaults
    if defaults is not None:
        for key, neutral in NEUTRAL_DEFAULTS.items():
            value = getattr(defaults, key)
            if value is not None and value not in neutral:
                ctx.add(
                    "H93",
                    ("generation", "defaults", key),
                    f"generation.defaults.{key} = {value!r} asks for a search this runtime does "
                    f"not implement (it honours {key} = {neutral[0]!r} only)",
                )


def check_profiles(ctx: Ctx) -> None:
    """G71: profiles of known kinds (upstream's list), their outputs and decoding."""
    md = ctx.metadata
    wf = ctx.workflow
    outputs = wf.outputs if wf else {}
    for name, profile in md.profiles.items():
        path = ("profiles", name)
        known = profile.kind in ctx.support.profile_kinds
        if not known:
            if profile.requirement == "required":
                ctx.add(
                    "G71",
                    (*path, "kind"),
                    f"required profile {name!r} has kind {profile.kind!r}, which this runtime "
                    f"cannot execute ({', '.join(sorted(ctx.support.profile_kinds))}); declare "
                    "requirement: ignorable to let readers skip it",
                )
            continue
        for role, output in profile.outputs.items():
            if output not in outputs:
                ctx.add(
                    "G71",
                    (*path, "outputs", role),
                    f"profile {name!r} maps {role!r} to {output!r}, which is not a workflow output",
                )
        dec = profile.decoding
        if profile.kind == "transcription" and dec is None:
            ctx.add("G71", path, f"transcription profile {name!r} needs a decoding block")
        if dec is not None:
            dpath = (*path, "decoding")
            if profile.batch_invariance == "padding_sensitive" and dec.lengths is None:
                ctx.add(
                    "G71",
                    dpath,
                    f"profile {name!r} is padding_sensitive, so its decoding must bind a "
                    "lengths output role",
                )
            if dec.kind == "ctc" and dec.blank_id is None:
                ctx.add("G71", dpath, "ctc decoding needs blank_id")
            if dec.time_axis == dec.class_axis:
                ctx.add(
                    "G71",
                    (*dpath, "class_axis"),
                    f"time_axis and class_axis are both axis {dec.time_axis}",
                )
            if dec.lengths is not None and dec.lengths not in profile.outputs:
                ctx.add(
                    "G71",
                    (*dpath, "lengths"),
                    f"decoding reads output role {dec.lengths!r}, which the profile does not map",
                )
            voc = dec.vocabulary
            if voc is not None:
                vpath = (*dpath, "vocabulary")
                if voc.source == "inline" and not voc.tokens:
                    ctx.add("G71", vpath, "an inline vocabulary needs tokens")
                if voc.size is not None and voc.tokens and voc.size != len(voc.tokens):
                    ctx.add(
                        "G71", vpath, f"vocabulary size {voc.size} but {len(voc.tokens)} tokens"
                    )
                if voc.tokens:
                    if voc.word_delimiter is not None and voc.word_delimiter not in voc.tokens:
                        ctx.add(
                            "G71",
                            (*vpath, "word_delimiter"),
                            f"word_delimiter {voc.word_delimiter!r} is not one of the tokens",
                        )
                    for token in voc.ignored_tokens:
                        if token not in voc.tokens:
                            ctx.add(
                                "G71",
                                (*vpath, "ignored_tokens"),
                                f"ignored token {token!r} is not one of the tokens",
                            )
                    if dec.blank_id is not None and dec.blank_id >= len(voc.tokens):
                        ctx.add(
                            "G71",
                            (*dpath, "blank_id"),
                            f"blank_id {dec.blank_id} is outside the {len(voc.tokens)} tokens",
                        )
        for feature in ("pooling", "decoding"):
            if getattr(profile, feature) is not None and profile.requirement == "required":
                # an ignorable profile may be skipped by a reader that cannot execute it
                ctx.add(
                    "H93",
                    (*path, feature),
                    f"required profile {name!r} declares {feature}, which this runtime does not "
                    "apply to its outputs (an ignorable profile would be skipped)",
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
