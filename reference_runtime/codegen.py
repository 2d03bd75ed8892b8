"""Generated Python functions, shared by the compiled paths (workflow fast path, native plans).

A fast path may write a function's source, specialised to one step or one graph, instead of
interpreting a description of it on every call. :func:`generate` compiles such source under a
filename that names what it was generated for, keeps the source on the result, and registers
it with :mod:`linecache`, so a traceback through the generated function shows its lines (and
:attr:`Generated.source` can be read or printed).
"""

from __future__ import annotations

import itertools
import linecache
import weakref
from collections.abc import Callable
from dataclasses import dataclass

_serial = itertools.count()


@dataclass(frozen=True)
class Generated:
    """A generated function with its source and the filename its code objects carry."""

    function: Callable
    source: str
    filename: str


def generate(
    lines: list[str], name: str, namespace: dict, label: str, owner: object | None = None
) -> Generated:
    """Compile ``lines`` (the source of a module defining function ``name``) in ``namespace``.

    ``label`` names what the function was generated for (a step's location, a graph): the
    filename is ``<label #n>``, unique per call. The source stays in :mod:`linecache` for as
    long as ``owner`` lives (for the life of the process when there is no owner).
    """
    source = "\n".join(lines) + "\n"
    filename = f"<{label} #{next(_serial)}>"
    exec(compile(source, filename, "exec"), namespace)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    if owner is not None:
        weakref.finalize(owner, linecache.cache.pop, filename, None)
    return Generated(namespace[name], source, filename)
