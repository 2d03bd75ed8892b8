"""C: see reference_runtime/package/rules/catalogue.py for the rules of this family."""

from __future__ import annotations

MUTATIONS: tuple = ()
