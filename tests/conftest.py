from __future__ import annotations

import os
from pathlib import Path

import pytest

# The format's upstream material: its source (spec/upstream/) and example packages
# (upstream-fixtures/), next to the repository by default. ONNX_GENAI_SHARED points at another
# such folder; ONNX_GENAI_UPSTREAM_FIXTURES at the example packages alone.
SHARED = Path(os.environ.get("ONNX_GENAI_SHARED") or Path(__file__).resolve().parents[2] / "shared")
UPSTREAM = Path(os.environ.get("ONNX_GENAI_UPSTREAM_FIXTURES") or SHARED / "upstream-fixtures")
WHERE = "set ONNX_GENAI_UPSTREAM_FIXTURES (or ONNX_GENAI_SHARED) to run these tests"


@pytest.fixture(scope="session")
def upstream_dir() -> Path:
    if not UPSTREAM.is_dir():
        pytest.skip(f"the upstream example packages are absent ({UPSTREAM}); {WHERE}")
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


@pytest.fixture(scope="module")
def engines():
    """``engines(package, executor)``: one engine per generated fixture package and executor,
    shared by the tests of a module (tests that read counters load their own)."""
    from fixtures import package_path
    from reference_runtime import Engine

    cache = {}

    def get(name, executor):
        if (name, executor) not in cache:
            cache[name, executor] = Engine.from_dir(package_path(name), executor=executor)
        return cache[name, executor]

    return get
