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
