"""Regenerate reference_runtime/package/schema.json from the typed model.

python tools/generate_schema.py            # write the file
python tools/generate_schema.py --check    # fail if it drifted from the model
"""

from __future__ import annotations

import argparse
import sys

from reference_runtime.package.schema import SCHEMA_PATH, schema_text, write_schema


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    if args.check:
        if SCHEMA_PATH.read_text(encoding="utf-8") != schema_text():
            print(f"{SCHEMA_PATH} drifted: run python tools/generate_schema.py", file=sys.stderr)
            return 1
        print("schema.json matches the model")
        return 0
    print(write_schema())
    return 0


if __name__ == "__main__":
    sys.exit(main())
