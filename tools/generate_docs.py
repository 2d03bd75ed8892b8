"""Regenerate the generated documents under docs/ (rule catalogue, JSON Schema copy).

python tools/generate_docs.py            # write
python tools/generate_docs.py --check    # fail if a generated document drifted
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from conformance.cases.load_rules import MUTATIONS
from reference_runtime.package.rules.catalogue_doc import render

DOCS = Path(__file__).resolve().parents[1] / "docs"


def generated() -> dict[Path, str]:
    return {DOCS / "rules.md": render(MUTATIONS)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    drifted = []
    for path, text in generated().items():
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                drifted.append(path)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(DOCS.parent)}")
    for path in drifted:
        print(f"{path.relative_to(DOCS.parent)} drifted: run python tools/generate_docs.py")
    return 1 if drifted else 0


if __name__ == "__main__":
    sys.exit(main())
