"""The syrupy extension through which the test suite asserts goldens (syrupy is a test
dependency: certification itself never imports this module)."""

from __future__ import annotations

import json
from pathlib import Path

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from .goldens import GOLDENS_DIR, decode_result, differences, text


class GoldenExtension(SingleFileSnapshotExtension):
    """syrupy extension: ``assert golden(name=golden_name(case.id)) == document`` compares a
    freshly built golden document with the stored one (results within tolerance, fixture hash
    equal; versions in the provenance may differ)."""

    file_extension = "json"
    _write_mode = WriteMode.TEXT

    @classmethod
    def dirname(cls, *, test_location) -> str:
        return str(GOLDENS_DIR)

    @classmethod
    def get_snapshot_name(cls, *, test_location, index=0) -> str:
        return str(index)

    @classmethod
    def matches_test_location(cls, *, test_location, snapshot_location) -> bool:
        location = Path(snapshot_location)
        return location.parent == GOLDENS_DIR and location.suffix == ".json"

    def serialize(self, data, **kwargs) -> str:
        return text(data)

    def matches(self, *, serialized_data, snapshot_data) -> bool:
        fresh, stored = json.loads(serialized_data), json.loads(snapshot_data)
        if fresh["provenance"]["fixture_sha256"] != stored["provenance"]["fixture_sha256"]:
            return False
        return not differences(stored, [decode_result(r) for r in fresh["results"]])
