from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
UPSTREAM = SHARED / "upstream-fixtures"


@pytest.fixture(scope="session")
def upstream_dir() -> Path:
    if not UPSTREAM.is_dir():
        pytest.skip("the shared upstream example packages (../shared/upstream-fixtures) are absent")
    return UPSTREAM


@pytest.fixture(params=["compiled", "plain"])
def interpreter_mode(request, monkeypatch) -> str:
    """Runs a test under both interpreters: the compiled fast path (the default) and the plain
    specification path (``Engine.from_dir(..., compiled=False)``)."""
    if request.param == "plain":
        from reference_runtime import Engine

        original = Engine.from_dir.__func__

        def plain(cls, *args, **kwargs):
            kwargs.setdefault("compiled", False)
            return original(cls, *args, **kwargs)

        monkeypatch.setattr(Engine, "from_dir", classmethod(plain))
    return request.param
