"""The op registry: kernels keyed by (domain, op type, since-version).

A kernel is a plain function ``kernel(node, *inputs)`` returning one array or a tuple of
arrays, written against the array module ``node.xp`` (numpy or CuPy) so the same definition runs
on both. Dispatch picks the largest since-version <= the model's opset for the domain, exactly
like ONNX's own reference evaluator.

```python
@op("Add", since=(7, 13, 14))
def add(node, a, b):
    return a + b
```

A kernel may return a NumPy scalar where NumPy arithmetic on 0-d arrays gives one (``a + b``
above): the plan turns every result that is not an array into one (a 0-d array for a scalar),
so kernels always receive, and graphs always return, arrays.

An optional ``check(node)`` runs when the graph is loaded and raises :class:`Unsupported` for
attribute values the kernel does not implement, so they are refused before anything runs.

An optional ``prepare(node, constants)`` runs once when a plan is compiled, with the node's
inputs that are constants of the graph (``{input index: array}``, often the axes, shape or
shift amount; possibly none). It may return a kernel specialised to them and to the node's
attributes, called like the kernel itself (with every input), that decodes those parameters
once instead of on every call and may take a shorter route for common inputs; or None to use
the kernel as it is. Both must compute the same thing, bit for bit and errors included: they
share the code that does the work, and the prepared kernel hands what its short route does not
cover to the kernel.

An optional ``inline`` is the kernel as one Python expression over its inputs (``"{0} + {1}"``;
``XP`` names the array module), for kernels that are exactly one operator or one array-module
call: a compiled plan writes it in place of the call to the kernel, for nodes with exactly the
inputs the expression reads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

ONNX_DOMAINS = ("", "ai.onnx")
MS_DOMAIN = "com.microsoft"


class Unsupported(Exception):
    """Raised at load time for an op, version, dtype or attribute the executor lacks."""


@dataclass(frozen=True)
class Kernel:
    domain: str
    op_type: str
    since: int
    fn: Callable
    check: Callable | None = None
    prepare: Callable | None = None
    inline: str | None = None


_REGISTRY: dict[tuple[str, str], dict[int, Kernel]] = {}


def op(
    op_type: str,
    since=(1,),
    domain: str = "",
    check: Callable | None = None,
    prepare: Callable | None = None,
    inline: str | None = None,
):
    """Register a kernel for every since-version in ``since`` (one function, several versions
    whose semantics it covers)."""
    versions = (since,) if isinstance(since, int) else tuple(since)

    def register(fn):
        for version in versions:
            key = (domain, op_type)
            table = _REGISTRY.setdefault(key, {})
            if version in table:
                raise RuntimeError(f"{domain or 'ai.onnx'}::{op_type} v{version} registered twice")
            table[version] = Kernel(domain, op_type, version, fn, check, prepare, inline)
        return fn

    return register


def lookup(domain: str, op_type: str, opset: int) -> Kernel:
    domain = "" if domain in ONNX_DOMAINS else domain
    table = _REGISTRY.get((domain, op_type))
    if not table:
        raise Unsupported(f"op {domain or 'ai.onnx'}::{op_type} is not implemented")
    usable = [v for v in table if v <= opset]
    if not usable:
        raise Unsupported(
            f"op {domain or 'ai.onnx'}::{op_type} is implemented from opset "
            f"{min(table)}, the model imports opset {opset}"
        )
    return table[max(usable)]


def implemented() -> dict[tuple[str, str], list[int]]:
    """(domain, op type) -> registered since-versions (for reports and tests)."""
    _load_kernels()
    return {key: sorted(table) for key, table in sorted(_REGISTRY.items())}


_LOADED = False
_LOAD_LOCK = threading.Lock()


def _load_kernels() -> None:
    """Import every kernel module once (engines may load components from several threads)."""
    global _LOADED
    if _LOADED:
        return
    with _LOAD_LOCK:
        if not _LOADED:
            from . import ops  # noqa: F401  (registers every kernel module)

            _LOADED = True
