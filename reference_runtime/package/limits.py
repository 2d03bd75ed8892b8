"""The limits on what a package may make the loader read, parse or allocate.

Each limit is a rule of its own (``docs/rules.md``): a file or document beyond it is refused
with that rule's code before the work it would cost is done. Two limits can be raised for
packages that need more, through the environment:

- ``REFERENCE_RUNTIME_MAX_METADATA_BYTES``: the size of a metadata file
  (``inference_metadata.*``, ``genai_config.json``), checked before it is read (A98).
- ``REFERENCE_RUNTIME_MAX_TEXT_GRAPH_BYTES``: the size of a text-format graph
  (``.onnx.textproto``), checked before it is parsed (C103).

The others bound the parsers themselves and are fixed.
"""

from __future__ import annotations

import os

from ..errors import UsageError

# A metadata document is a few kilobytes; 16 MiB leaves room for large inline tables.
MAX_METADATA_BYTES = 16 * 2**20
# Structural validation costs ~50 microseconds per expanded node, so this bounds a 300-byte
# alias bomb to a few seconds; real documents have a few thousand nodes.
MAX_NODES = 100_000
# Leaves headroom under Python's recursion limit for the schema validator (several frames per
# level); real documents are nested about a dozen levels deep.
MAX_DEPTH = 64
# One string (a key or a value) of a metadata document.
MAX_SCALAR_CHARS = 2**20
# Digits of an integer, counted on its text before it is converted (Python cannot even print
# an integer of more than 4300 digits, and base-60 conversion is quadratic).
MAX_INT_DIGITS = 1000
# Protocol buffers' text format parses at roughly 0.4 MB/s; binary graphs are not bounded.
MAX_TEXT_GRAPH_BYTES = 2**20

_ENVIRONMENT = {
    "metadata_bytes": ("REFERENCE_RUNTIME_MAX_METADATA_BYTES", MAX_METADATA_BYTES),
    "text_graph_bytes": ("REFERENCE_RUNTIME_MAX_TEXT_GRAPH_BYTES", MAX_TEXT_GRAPH_BYTES),
}


def limit(name: str) -> int:
    """The configured value of a limit the environment can raise (``metadata_bytes`` or
    ``text_graph_bytes``)."""
    variable, default = _ENVIRONMENT[name]
    raw = os.environ.get(variable)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value <= 0:
        raise UsageError(
            f"{variable}={raw!r} is not a positive number of bytes",
            hint=f"Set {variable} to a positive integer, or unset it for {default}.",
        )
    return value
