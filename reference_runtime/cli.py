"""The ``reference-runtime`` command line.

Exit codes: 0 success (a valid package), 1 refused (every violation listed), 2 usage error
or unreadable path.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

from .arrays import dtype_name
from .engine import Engine
from .errors import PackageError, ReferenceRuntimeError, RunError, UsageError
from .package import validate_package
from .package.lowering import BARE_SHAPES, lower, package_shape
from .package.rules.catalogue import RULES
from .requests import Spelling
from .support import REFERENCE_SUPPORT

EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2


def _violations(path) -> tuple[list, str]:
    """Every violation of the package (a bare decoder is lowered first), and what it is."""
    root = Path(path)
    bare = root.is_dir() and package_shape(root) in BARE_SHAPES
    kind = "bare decoder (lowered to a workflow)" if bare else "workflow package"
    return validate_package(path), kind


def _validate(args) -> int:
    try:
        violations, kind = _violations(args.package)
    except UsageError as exc:
        if args.json:
            print(json.dumps({"error": exc.to_json()}, indent=2))
        else:
            print(f"error: {exc.message}\n  fix: {exc.hint}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        report = {
            "valid": not violations,
            # kind: "violation" (the package breaks the format) or "unsupported" (it is valid
            # but needs something this runtime does not implement)
            "violations": [{**v.to_json(), "kind": RULES[v.code].kind} for v in violations],
        }
        print(json.dumps(report, indent=2))
    elif not violations:
        print(f"{args.package}: valid {kind}")
    else:
        count = len(violations)
        print(f"{args.package}: refused, {count} violation{'s' * (count != 1)}")
        for v in violations:
            unsupported = " (unsupported here)" if RULES[v.code].kind == "unsupported" else ""
            print(f"  {v.code}  {v.location}{unsupported}")
            print(f"        {v.message}")
            print(f"        fix: {v.hint}")
    return EXIT_OK if not violations else EXIT_REFUSED


def _array_json(value) -> dict:
    array = np.asarray(value)

    return {"dtype": dtype_name(array), "shape": list(array.shape), "data": array.tolist()}


def _output_json(value):
    if isinstance(value, list):
        return {"rows": [None if row is None else _array_json(row) for row in value]}
    return _array_json(value)


def _parse_input(text: str, engine):
    """``NAME=JSON`` or ``NAME=@file.npy``; JSON takes its dtype from the input's contract."""
    if "=" not in text:
        raise UsageError(f"--input {text!r} is not NAME=VALUE", hint="e.g. --input eos_ids=[[2]]")
    name, raw = text.split("=", 1)
    if raw.startswith("@"):
        path = Path(raw[1:])
        if not path.is_file():
            raise UsageError(f"--input {name}: file {raw[1:]!r} does not exist")
        try:
            return name, np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise RunError(
                "H75",
                f"--input {name}: {raw[1:]!r} is not a readable .npy array of numbers ({exc})",
                hint="Save a numeric array with numpy.save (object arrays are not read).",
            ) from None
    try:
        return name, json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as exc:
        message = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise UsageError(f"--input {name}: {raw!r} is not JSON ({message})") from None


def _tokens_json(flag: str, text: str):
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        message = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise RunError(
            "H75",
            f"{flag} {text!r} is not JSON token rows ({message})",
            hint="Pass token rows such as [[1,2,3]]; pass text with --text.",
        ) from None


def _prompt(args) -> tuple[object, str]:
    """The prompt and the flag that gave it. ``--tokens`` is JSON token rows, ``--text`` is
    text; ``--prompt`` is token rows when it starts with ``[`` (and must then be valid JSON
    token rows), text otherwise: the first character decides, never a failed parse."""
    given = [(f, v) for f, v in (("--prompt", args.prompt), ("--tokens", args.tokens),
                                 ("--text", args.text)) if v is not None]  # fmt: skip
    if len(given) > 1:
        raise UsageError(
            f"{' and '.join(f for f, _ in given)} were both given",
            hint="Give the prompt once: --tokens JSON, --text TEXT, or --prompt.",
        )
    if not given:
        return None, "--prompt"
    flag, value = given[0]
    if flag == "--tokens" or (flag == "--prompt" and value.lstrip().startswith("[")):
        return _tokens_json(flag, value), flag
    return value, flag


_INTEGER = re.compile(r"^[+-]?[0-9]+$")


def _integer_flag(flag: str, text: str | None):
    if text is None:
        return None
    if not _INTEGER.match(text.strip()):
        raise RunError(
            "H75", f"{flag} {text!r} is not an integer", hint=f"Pass a whole number to {flag}."
        )
    return int(text)


def _number_flag(flag: str, text: str | None):
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise RunError(
            "H75", f"{flag} {text!r} is not a number", hint=f"Pass a number to {flag}."
        ) from None


def _budget_flag(text: str | None):
    """``--kv-budget-bytes``: a whole number of bytes (its range is checked by the engine)."""
    if text is None:
        return None
    if not _INTEGER.match(text.strip()) or int(text) < 0:
        raise UsageError(
            f"--kv-budget-bytes {text!r} is not a whole number of bytes >= 0",
            code="H114",
            hint="Pass a whole number of bytes >= 0 to --kv-budget-bytes.",
        )
    return int(text)


CLI_SPELLING = dict(
    max_new_tokens="--max-new-tokens",
    seed="--seed",
    greedy="--greedy",
    temperature="--temperature",
    top_k="--top-k",
    top_p="--top-p",
    min_p="--min-p",
    stop_on_eos="--no-stop-on-eos",
)


def _run(args) -> int:

    def fail(exc: ReferenceRuntimeError, code: int) -> int:
        if args.json:
            print(json.dumps({"error": exc.to_json()}, indent=2))
        else:
            print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
            if exc.hint:
                print(f"  fix: {exc.hint}", file=sys.stderr)
        return code

    try:
        engine = Engine.from_dir(
            args.package,
            executor=args.executor,
            device=args.device,
            compiled=not args.plain,
            kv_budget_bytes=_budget_flag(args.kv_budget_bytes),
        )
        inputs = dict(_parse_input(text, engine) for text in args.input)
        overrides = {}
        for text in args.override:
            target, sep, replacement = text.partition("=")
            if not sep or not target or not replacement:
                raise UsageError(
                    f"--override {text!r} is not TARGET=REPLACEMENT",
                    hint="Name two declared components, e.g. --override sampler=greedy_sampler.",
                )
            overrides[target] = replacement
        prompt, flag = _prompt(args)
        keywords = dict(
            max_new_tokens=_integer_flag("--max-new-tokens", args.max_new_tokens),
            seed=_integer_flag("--seed", args.seed),
            greedy=True if args.greedy else None,
            temperature=_number_flag("--temperature", args.temperature),
            top_k=_integer_flag("--top-k", args.top_k),
            top_p=_number_flag("--top-p", args.top_p),
            min_p=_number_flag("--min-p", args.min_p),
            stop_on_eos=not args.no_stop_on_eos,
        )
        # refused in the command line's terms before anything runs
        engine.check_request(
            prompt, inputs, spelling=Spelling(prompt=flag, **CLI_SPELLING), **keywords
        )
        result = engine.run(prompt=prompt, inputs=inputs, overrides=overrides, **keywords)
    except UsageError as exc:
        return fail(exc, EXIT_USAGE)
    except PackageError as exc:
        return fail(exc, EXIT_REFUSED)
    except ReferenceRuntimeError as exc:
        return fail(exc, EXIT_REFUSED)
    report = {
        "outputs": {name: _output_json(value) for name, value in result.outputs.items()},
        "tokens": result.tokens,
        "finish_reasons": result.finish_reasons,
        "counters": engine.counters,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK
    for name, value in result.outputs.items():
        if isinstance(value, list):
            print(f"{name}: {len(value)} rows")
            for r, row in enumerate(value):
                print(f"  row {r}: {'(nothing published)' if row is None else row.tolist()}")
        else:
            print(f"{name}: {_array_json(value)['dtype']} {list(np.shape(value))}")
            print(f"  {np.asarray(value).tolist()}")
    for r, text in enumerate(result.text or []):
        print(f"text row {r}: {text!r}")
    if result.tokens is not None:
        for r, (tokens, reason) in enumerate(
            zip(result.tokens, result.finish_reasons, strict=False)
        ):
            print(f"tokens row {r} ({reason}): {tokens}")
    return EXIT_OK


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


def _lower(args) -> int:
    root = Path(args.package)
    if not root.is_dir():
        print(f"error: package path {args.package!r} is not a folder", file=sys.stderr)
        return EXIT_USAGE
    shape = package_shape(root)
    if shape not in BARE_SHAPES:
        print(
            f"error: {args.package} is not a bare decoder (it has a {shape} document)\n"
            "  fix: lower a legacy model.io package or an onnxruntime-genai folder "
            "(genai_config.json); a workflow package is run as written",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        text = lower(root)
    except PackageError as exc:
        for v in exc.violations:
            print(f"  {v.code}  {v.location}\n        {v.message}\n        fix: {v.hint}")
        return EXIT_REFUSED
    sys.stdout.write(text)
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
    p = sub.add_parser("run", help="run a package on one request and print what it published")
    p.add_argument("package", metavar="PKG", help="the package folder")
    p.add_argument("--executor", choices=["ort", "native"], default="ort")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument(
        "--plain",
        action="store_true",
        help="run the plain interpreter (the specification path) instead of its compiled fast "
        "path; results are the same",
    )
    p.add_argument(
        "--prompt",
        help="token rows as JSON when it starts with '[' (e.g. [[1,2,3]]), text otherwise",
    )
    p.add_argument("--tokens", metavar="JSON", help="token rows as JSON, e.g. [[1,2,3]]")
    p.add_argument("--text", help="a text prompt (tokenised with the package's tokenizer)")
    p.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a workflow input: JSON (dtype from the input's contract) or @file.npy",
    )
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="TARGET=REPLACEMENT",
        help="run a declared replacement in place of an application_overridable component",
    )
    p.add_argument("--max-new-tokens", metavar="N", help="new tokens, at least 1")
    p.add_argument("--seed", metavar="S", help="an integer in int64's range")
    p.add_argument("--greedy", action="store_true", help="decode greedily")
    p.add_argument("--temperature", metavar="T", help="sampling temperature, >= 0")
    p.add_argument("--top-k", metavar="K", help="sampling top-k, an integer >= 0")
    p.add_argument("--top-p", metavar="P", help="sampling top-p, in (0, 1]")
    p.add_argument("--min-p", metavar="P", help="sampling min-p, in [0, 1]")
    p.add_argument("--no-stop-on-eos", action="store_true")
    p.add_argument(
        "--kv-budget-bytes",
        metavar="N",
        help="refuse (H113) a request whose KV needs more than N bytes",
    )
    p.add_argument("--json", action="store_true", help="print a JSON report")
    p.set_defaults(func=_run)
    p = sub.add_parser(
        "lower", help="print the workflow a bare decoder is lowered to (model.io, genai_config)"
    )
    p.add_argument("package", metavar="PKG", help="the package folder")
    p.set_defaults(func=_lower)
    p = sub.add_parser(
        "capabilities", help="print the capabilities, adapter ABIs and contracts supported"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_capabilities)
    return parser


def main(argv: list[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # names from a document may not be encodable
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
