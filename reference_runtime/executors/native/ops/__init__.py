"""Kernel modules; importing this package registers every kernel."""

from . import contrib, control, elementwise, indexing, nn, reduce, tensor  # noqa: F401
