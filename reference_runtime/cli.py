"""The ``reference-runtime`` command line.

Exit codes: 0 success (a valid package), 1 refused (every violation listed), 2 usage error
or unreadable path.
"""

from __future__ import annotations

import argparse
import json
import sys

from .errors import UsageError
from .package import validate_package
from .support import REFERENCE_SUPPORT

EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2


def _validate(args) -> int:
    try:
        violations = validate_package(args.package)
    except UsageError as exc:
        if args.json:
            print(json.dumps({"error": exc.to_json()}, indent=2))
        else:
            print(f"error: {exc.message}\n  fix: {exc.hint}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        report = {"valid": not violations, "violations": [v.to_json() for v in violations]}
        print(json.dumps(report, indent=2))
    elif not violations:
        print(f"{args.package}: valid workflow package")
    else:
        count = len(violations)
        print(f"{args.package}: refused, {count} violation{'s' * (count != 1)}")
        for v in violations:
            print(f"  {v.code}  {v.location}")
            print(f"        {v.message}")
            print(f"        fix: {v.hint}")
    return EXIT_OK if not violations else EXIT_REFUSED


def _capabilities(args) -> int:
    data = REFERENCE_SUPPORT.to_json()
    if args.json:
        print(json.dumps(data, indent=2))
        return EXIT_OK
    for key, values in data.items():
        print(f"{key}:")
        items = [f"{k}@{v}" for k, v in values.items()] if isinstance(values, dict) else values
        for item in items or ["(none)"]:
            print(f"  {item}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reference-runtime",
        description="Reference runtime for ONNX GenAI workflow packages.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("validate", help="validate a package; list every violation")
    p.add_argument("package", metavar="PKG", help="the package folder")
    p.add_argument("--json", action="store_true", help="print a JSON report")
    p.set_defaults(func=_validate)
    p = sub.add_parser(
        "capabilities", help="print the capabilities, adapter ABIs and contracts supported"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_capabilities)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
