"""Native kernels: indexing (see the registry module for the kernel conventions)."""

from __future__ import annotations
