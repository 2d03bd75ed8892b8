"""Native kernels: elementwise (see the registry module for the kernel conventions)."""

from __future__ import annotations
