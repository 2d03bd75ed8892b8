"""Write every generated fixture package into fixtures/packages and record their hashes.

python tools/generate_fixtures.py            # regenerate in place
python tools/generate_fixtures.py --check    # fail if the committed files drift
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from fixtures import MANIFEST_PATH, PACKAGES_DIR
from fixtures.generators import GENERATORS
from fixtures.generators.common import sha256, write_package


def generate(dest: Path) -> dict[str, dict[str, str]]:
    """Generate every package under ``dest``; return ``{package: {relpath: sha256}}``."""
    manifest: dict[str, dict[str, str]] = {}
    for i, (name, generator) in enumerate(sorted(GENERATORS.items()), 1):
        print(f"[{i}/{len(GENERATORS)}] {name}", file=sys.stderr)
        root = dest / name
        files = write_package(generator(), root)
        manifest[name] = {f.relative_to(root).as_posix(): sha256(f) for f in files}
    return manifest


def manifest_text(manifest: dict) -> str:
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            fresh = generate(Path(tmp))
        committed = json.loads(MANIFEST_PATH.read_text())
        if fresh != committed:
            print("fixtures drifted: run python tools/generate_fixtures.py", file=sys.stderr)
            return 1
        print(f"{len(fresh)} packages, {sum(map(len, fresh.values()))} files: no drift")
        return 0
    manifest = generate(PACKAGES_DIR)
    MANIFEST_PATH.write_text(manifest_text(manifest))
    rows = [(name, len(files)) for name, files in manifest.items()]
    print(f"{'package':<16} files")
    for name, count in rows:
        print(f"{name:<16} {count}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
