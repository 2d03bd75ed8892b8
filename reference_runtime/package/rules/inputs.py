"""B rules: tensor contracts, workflow inputs (roles, sources, defaults, presence) and outputs."""

from __future__ import annotations

import math

from ... import dtypes
from ..model import (
    ArtifactSource,
    LiteralSource,
    OpaqueRole,
    RequestSource,
    RuntimeRole,
    TensorContract,
)
from .context import Ctx, walk_nodes

PRESENCE_REQUEST_ROLES = ("media", "constraint", "session_id")
WAV_SOURCE_DTYPES = ("float32", "fp32", "float16", "fp16", "bfloat16", "bf16")


def check_contracts(ctx: Ctx) -> None:
    """B07 / B08 on every contract of the document."""
    for node in walk_nodes(ctx.metadata):
        if not isinstance(node, TensorContract):
            continue
        # Loop iteration contracts are checked by D31 (same facts, sharper message).
        if len(node.path) >= 2 and node.path[-2] == "iteration":
            continue
        if node.shape is not None and len(node.shape) != node.rank:
            ctx.add(
                "B07",
                (*node.path, "shape"),
                f"shape lists {len(node.shape)} dimension(s) but rank is {node.rank}",
            )
        axis = node.request_axis
        if axis is not None and axis >= node.rank:
            ctx.add(
                "B07",
                (*node.path, "batch_layout", "axis"),
                f"batch layout axis {axis} is beyond rank {node.rank}",
            )
        if node.dtype == "string":
            ctx.add(
                "B08",
                (*node.path, "dtype"),
                "string tensors are not workflow values (tokenise text at the API boundary)",
            )
        elif node.dtype not in dtypes.TENSOR_DTYPES:
            ctx.add(
                "B08",
                (*node.path, "dtype"),
                f"{node.dtype!r} is not a tensor dtype of the format (one of: "
                f"{', '.join(sorted(dtypes.TENSOR_DTYPES))})",
            )
        elif dtypes.canonical(node.dtype) not in dtypes.ONNX_ELEM_TYPE:
            ctx.add(
                "H93",
                (*node.path, "dtype"),
                f"dtype {node.dtype!r} is a name of the format but this runtime has no ONNX "
                "element type or array type for it",
            )


def _literal_problem(value, contract: TensorContract) -> str | None:
    """Why a ``default`` literal cannot materialise under ``contract`` (None when it can)."""
    dtype = dtypes.canonical(contract.dtype)
    items = list(value) if isinstance(value, tuple) else [value]
    if isinstance(value, tuple):
        if not items:
            return "the literal list is empty"
        if any(isinstance(v, tuple) for v in items):
            return "write a flat, row-major list (nested lists are not literals)"
        if contract.rank == 0:
            return "a rank-0 contract takes a single value, not a list"
    if contract.rank > 0 and contract.shape is None:
        return f"a rank-{contract.rank} literal needs the contract's `shape`"
    for v in items:
        if isinstance(v, str):
            return f"string literal {v!r}: literals are numbers or booleans"
        if dtype == "bool":
            if not isinstance(v, bool):
                return f"{v!r} is not a boolean (the contract is bool)"
        elif dtype in dtypes.INTEGER:
            if isinstance(v, bool) or not isinstance(v, int):
                return f"{v!r} is not an integer (the contract is {dtype})"
            low, high = dtypes.INTEGER_RANGES[dtype]
            if not low <= v <= high:
                return f"{v} does not fit {dtype} ([{low}, {high}])"
        elif dtype in dtypes.FLOATING and (isinstance(v, bool) or not isinstance(v, float)):
            suggestion = (
                f" (write {float(v)!r})" if isinstance(v, int) and not isinstance(v, bool) else ""
            )
            return f"{v!r} is not a float, the contract is {dtype}{suggestion}"
    shape = contract.shape
    if isinstance(value, tuple) and shape is not None and all(isinstance(d, int) for d in shape):
        numel = math.prod(shape)
        if len(items) != numel:
            return f"the list has {len(items)} values but the shape holds {numel}"
    return None


def check_inputs(ctx: Ctx) -> None:
    wf = ctx.workflow
    base = ("pipeline", "workflow", "inputs")
    for name, inp in wf.inputs.items():
        path = (*base, name)
        literal = isinstance(inp.source, LiteralSource)
        if isinstance(inp.source, RequestSource) and isinstance(inp.role, OpaqueRole):
            ctx.add(
                "B10",
                (*path, "role"),
                f"input {name!r} comes from the request but its role is opaque, so the "
                "runtime cannot know what to put there",
            )
        if not inp.required and inp.default is None and inp.present_as is None:
            ctx.add(
                "B11",
                (*path, "required"),
                f"optional input {name!r} has neither a default nor a present_as flag"
                + (" (a literal takes its value from `default`)" if literal else ""),
            )
        elif literal and inp.default is None and inp.present_as is None:
            ctx.add(
                "B82",
                (*path, "default"),
                f"literal input {name!r} has no default: a literal source takes its value "
                "from `default`",
            )
        if inp.present_as is not None:
            ppath = (*path, "present_as")
            problem = None
            if inp.required:
                problem = "the input is required (present_as needs `required: false`)"
            elif inp.default is not None:
                problem = "the input has a default, so it is always present"
            elif isinstance(inp.source, LiteralSource | ArtifactSource):
                problem = f"a {inp.source.kind} source is always present"
            elif isinstance(inp.source, RequestSource) and (
                not isinstance(inp.role, RuntimeRole) or inp.role.role not in PRESENCE_REQUEST_ROLES
            ):
                role = inp.role.role if isinstance(inp.role, RuntimeRole) else "opaque"
                problem = (
                    f"request inputs take present_as only with roles "
                    f"{', '.join(PRESENCE_REQUEST_ROLES)} (this one is {role})"
                )
            if problem:
                ctx.add("B12", ppath, f"present_as on input {name!r}: {problem}")
        if inp.default is not None:
            problem = _literal_problem(inp.default, inp.contract)
            if problem:
                ctx.add("B82", (*path, "default"), f"default of input {name!r}: {problem}")


def check_outputs(ctx: Ctx) -> None:
    wf = ctx.workflow
    for name, out in wf.outputs.items():
        path = ("pipeline", "workflow", "outputs", name)
        if out.media is not None:
            media = out.media
            mpath = (*path, "media")
            dtype = out.contract.dtype
            if out.role != "audio":
                ctx.add(
                    "B14",
                    mpath,
                    f"output {name!r} has role {out.role!r}; media blocks describe audio outputs",
                )
            for key in ("sample_rate_hz", "source_sample_rate_hz", "channels"):
                if getattr(media, key) == 0:
                    ctx.add("B14", (*mpath, key), f"media.{key} must be greater than zero")
            for key in ("sample_rate_hz", "channels"):
                if getattr(media, key) is None:
                    ctx.add("B14", mpath, f"an audio media contract must declare {key}")
            if media.container == "wav":
                if out.stage == "post_adapter" and dtype != "uint8":
                    ctx.add(
                        "B14",
                        (*path, "contract", "dtype"),
                        f"post-adapter WAV output {name!r} holds encoded bytes: its dtype must be "
                        f"uint8, not {dtype}",
                    )
                if out.stage == "pre_adapter" and dtype not in WAV_SOURCE_DTYPES:
                    ctx.add(
                        "B14",
                        (*path, "contract", "dtype"),
                        f"pre-adapter WAV source {name!r} must hold floating-point samples, "
                        f"not {dtype}",
                    )
        if out.role == "image" and out.value_range is None:
            ctx.add(
                "B15",
                (*path, "value_range"),
                f"image output {name!r} must declare value_range (e.g. negative_one_to_one)",
            )
        if out.role != "image" and out.value_range is not None:
            ctx.add(
                "B15",
                (*path, "value_range"),
                f"value_range is for image outputs; {name!r} has role {out.role!r}",
            )


def check(ctx: Ctx) -> None:
    check_contracts(ctx)
    if ctx.workflow is None:
        return
    check_inputs(ctx)
    check_outputs(ctx)
