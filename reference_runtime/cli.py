"""The ``reference-runtime`` command line (also ``python -m reference_runtime``).

    reference-runtime validate PKG [--json]
    reference-runtime inspect PKG [--json]
    reference-runtime run PKG [--prompt ... | --tokens ... | --text ...] [--input NAME=...]...
                          [--out DIR] [--json [--indent N]] ...
    reference-runtime lower PKG
    reference-runtime capabilities [--json]

Every mistake is one paragraph on stderr (what, where, the fix; with ``--json``, an
``{"error": ...}`` object on stdout) and an exit status: 0 success, 1 refused (a package with
its violations, a request the package or this runtime refuses, a run that failed), 2 a usage
mistake (an unknown option, a malformed flag value, a path that is not a readable folder),
130 interrupted (Ctrl-C), 3 a bug in this program. ``--debug`` shows the traceback of an
unexpected error instead of the paragraph.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from .arrays import dtype_name
from .describe import describe, render
from .engine import Engine
from .errors import PackageError, ReferenceRuntimeError, RunError, UsageError
from .package import validate_package
from .package.lowering import BARE_SHAPES, check_draft_folder, lower, package_shape
from .package.rules.catalogue import RULES
from .requests import Spelling
from .saving import save_outputs
from .support import REFERENCE_SUPPORT

PROG = "reference-runtime"
EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_BUG, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message, hint=f"See '{self.prog} --help'.")


def _version() -> str:
    try:
        return version("onnx-genai-reference-runtime")
    except PackageNotFoundError:
        return "unknown"


def _folder(path: str) -> Path:
    """A package path that is a folder (a usage mistake otherwise)."""
    root = Path(path)
    if not root.exists():
        raise UsageError(
            f"package path {path!r} does not exist", hint="Give the path of a package folder."
        )
    if not root.is_dir():
        raise UsageError(
            f"package path {path!r} is not a folder",
            hint="Give the package folder (the one holding inference_metadata.yaml), not a file.",
        )
    return root


def _violations(path, draft=None) -> tuple[list, str]:
    """Every violation of the package (a bare decoder is lowered first, with its draft when
    one is given), and what it is."""
    root = Path(path)
    bare = root.is_dir() and package_shape(root) in BARE_SHAPES
    kind = "bare decoder (lowered to a workflow)" if bare else "workflow package"
    if draft is not None:
        kind = "bare decoder with a draft (lowered to a speculative workflow)"
    return validate_package(path, draft=draft), kind


def _validate(args) -> int:
    violations, kind = _violations(args.package, args.draft)
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


SUMMARY_AT = 16  # arrays with more elements print as a summary


def _values(values) -> str:
    return ", ".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in values)


def _summary(value) -> str:
    """An array in one line: in full when small (``--json`` or ``--out`` for every value), else
    numpy-style: dtype, shape, min / max / mean and the first and last few values."""
    array = np.asarray(value)
    head = f"{dtype_name(array)} {list(array.shape)}"
    if array.size <= SUMMARY_AT:
        return f"{head}  {array.tolist()}"
    flat = array.reshape(-1)
    values = f"[{_values(flat[:3].tolist())}, ..., {_values(flat[-3:].tolist())}]"
    if array.dtype.kind not in "biuf":
        return f"{head}  {values}"
    numbers = flat.astype(np.float64)
    with np.errstate(all="ignore"):
        low, high, mean = numbers.min(), numbers.max(), numbers.mean()
    return f"{head}  min {low:.6g}  max {high:.6g}  mean {mean:.6g}  {values}"


NPY_MAGIC = b"\x93NUMPY"


def _parse_input(text: str):
    """``NAME=JSON`` or ``NAME=@file.npy``; JSON takes its dtype from the input's contract."""
    if "=" not in text:
        raise UsageError(
            f"--input {text!r} is not NAME=VALUE",
            hint="Write --input NAME=JSON (e.g. --input eos_ids=[[2]]) or --input NAME=@FILE.npy; "
            "'reference-runtime inspect PKG' lists the inputs.",
        )
    name, raw = text.split("=", 1)
    if raw.startswith("@"):
        path = Path(raw[1:])
        if not path.exists():
            raise UsageError(
                f"--input {name}: file {raw[1:]!r} does not exist",
                hint="Give the path of a .npy file after '@'.",
            )
        if not path.is_file():
            raise UsageError(
                f"--input {name}: {raw[1:]!r} is not a file",
                hint="Give the path of a .npy file after '@'.",
            )
        try:
            with path.open("rb") as handle:
                is_npy = handle.read(len(NPY_MAGIC)) == NPY_MAGIC
            if not is_npy:
                raise ValueError("it is not a .npy file")
            return name, np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            reason = str(exc).split(". ")[0] if _is_npy_error(exc) else str(exc)
            raise RunError(
                "H75",
                f"--input {name}: {raw[1:]!r} is not a readable .npy array of numbers ({reason})",
                hint="Save a numeric array with numpy.save (object arrays are not read).",
            ) from None
    try:
        return name, json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as exc:
        message = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise UsageError(
            f"--input {name}: {raw!r} is not JSON ({message})",
            hint="Write the value as JSON (e.g. [[1, 2]], true, 0.5), or @FILE.npy.",
        ) from None


def _is_npy_error(exc: Exception) -> bool:
    """numpy's refusal of an object array (a long sentence; its first clause says it)."""
    return "pickled" in str(exc)


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


def _overrides(texts: list[str]) -> dict:
    overrides = {}
    for text in texts:
        target, sep, replacement = text.partition("=")
        if not sep or not target or not replacement:
            raise UsageError(
                f"--override {text!r} is not TARGET=REPLACEMENT",
                hint="Name two declared components, e.g. --override sampler=greedy_sampler.",
            )
        overrides[target] = replacement
    return overrides


def _out_folder(path: str | None) -> Path | None:
    """The ``--out`` folder, created (a usage mistake when it cannot be)."""
    if path is None:
        return None
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise UsageError(
            f"--out {path}: it is a file", hint="Give a folder (it is created when missing)."
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".reference-runtime-write-check"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(
            f"--out {path}: cannot write there ({exc.strerror or exc})",
            hint="Give a folder you can write (it is created when missing).",
        ) from None
    return out


def _run(args) -> int:
    if args.indent is not None and not args.json:
        raise UsageError("--indent is given without --json", hint="Add --json, or drop --indent.")
    engine = Engine.from_dir(
        args.package,
        executor=args.executor,
        device=args.device,
        compiled=not args.plain,
        kv_budget_bytes=_budget_flag(args.kv_budget_bytes),
        draft=args.draft,
    )
    inputs = dict(_parse_input(text) for text in args.input)
    overrides = _overrides(args.override)
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
    spelling = Spelling(prompt=flag, inputs="--input", **CLI_SPELLING)
    engine.check_request(prompt, inputs, spelling=spelling, **keywords)
    out = _out_folder(args.out)
    workflow = engine.package.metadata.workflow
    # a package whose session-scoped state needs a session (cells other than a conversation's
    # continuation, which a run without a session simply starts) runs as the first turn of a
    # fresh session
    stateful = any(
        cell.scope == "session" and (cell.session is None or cell.session.continuation is None)
        for cell in workflow.state.values()
    )
    session = engine.create_session() if stateful else None
    result = engine.run(
        prompt=prompt, inputs=inputs, overrides=overrides, session_id=session, **keywords
    )
    tokens_output = next((n for n, o in workflow.outputs.items() if o.role == "tokens"), None)
    files = save_outputs(result, workflow, out) if out is not None else None
    summary = {
        "tokens": result.tokens,
        "text": result.text,
        "finish_reasons": result.finish_reasons,
        "tokens_output": tokens_output if result.tokens is not None else None,
        "counters": engine.counters,
    }
    if out is not None:
        summary["files"] = files
        (out / "result.json").write_text(json.dumps(summary, indent=2) + "\n")
    if args.json:
        report = {
            # the tokens output is reported once, as "tokens" (per row)
            "outputs": {
                name: _output_json(value)
                for name, value in result.outputs.items()
                if name != summary["tokens_output"]
            },
            **summary,
        }
        indent = args.indent if args.indent else None
        separators = None if indent else (",", ":")
        print(json.dumps(report, indent=indent, separators=separators))
        return EXIT_OK
    for name, value in result.outputs.items():
        if name == summary["tokens_output"]:
            continue  # printed below, per row, with each row's finish reason
        if isinstance(value, list):
            print(f"{name}: {len(value)} rows")
            for r, row in enumerate(value):
                print(f"  row {r}: {'(nothing published)' if row is None else _summary(row)}")
        else:
            print(f"{name}: {_summary(value)}")
    for r, text in enumerate(result.text or []):
        print(f"text row {r}: {text!r}")
    if result.tokens is not None:
        for r, (tokens, reason) in enumerate(
            zip(result.tokens, result.finish_reasons, strict=False)
        ):
            print(f"tokens row {r} ({reason}): {tokens}")
    if out is not None:
        print(f"wrote {out / 'result.json'} and the outputs it lists")
    return EXIT_OK


def _requests_file(path: str) -> list:
    """``--requests FILE``: one JSON object per line (``-``: standard input); blank lines are
    skipped."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"--requests {path}: cannot be read ({_said(exc)})",
            hint="Give a readable UTF-8 file of JSON lines, one request per line.",
        ) from None
    requests = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            requests.append(json.loads(line))
        except (ValueError, RecursionError) as exc:  # not JSON, nested too deeply, huge integer
            message = exc.msg if isinstance(exc, json.JSONDecodeError) else _said(exc)
            raise UsageError(
                f"--requests {path}, line {number}: not JSON ({message})",
                hint='Write one JSON object per line, e.g. {"prompt": [1, 2, 3], "arrival": 0}.',
            ) from None
    return requests


def _served_json(item) -> dict:
    """One served request as the `serve` command prints it."""
    result = item.result
    return {
        "index": item.index,
        "arrival": item.arrival,
        "admitted": item.admitted,
        "finished": item.finished,
        "slot": item.slot,
        "tokens": result.tokens[0] if result.tokens else None,
        "finish_reason": result.finish_reasons[0] if result.finish_reasons else None,
    }


def _serve(args) -> int:
    engine = Engine.from_dir(
        args.package,
        executor=args.executor,
        device=args.device,
        kv_budget_bytes=_budget_flag(args.kv_budget_bytes),
    )
    slots = _integer_flag("--slots", args.slots)
    requests = _requests_file(args.requests)
    trace: list = []
    served = engine.serve(requests, slots=slots, trace=trace)  # refuses before anything runs
    for item in served:
        report = _served_json(item)
        if item.result.text is not None:
            report["text"] = item.result.text[0]
        if args.json:
            print(json.dumps(report, separators=(",", ":")), flush=True)
        else:
            print(
                f"request {item.index} (slot {item.slot}, arrival {item.arrival}, admitted at "
                f"step {item.admitted}, finished at step {item.finished}, "
                f"{report['finish_reason']}): {report['tokens']}",
                flush=True,
            )
    summary = {"steps": len(trace), "counters": engine.counters}
    if args.trace:
        summary["trace"] = [record.to_json() for record in trace]
    if args.json:
        print(json.dumps(summary, separators=(",", ":")))
    else:
        batching = engine.counters["batching"]
        print(
            f"served {batching['admitted']} request(s) in {len(trace)} step(s): "
            f"{batching['rows']} rows in {batching['bodies']} bodies, "
            f"{batching['slots_reused']} slot reuse(s)"
        )
        for record in trace if args.trace else ():
            print(
                f"  step {record.step}: slots {record.slots} accepted_len "
                f"{record.accepted_len} live {record.live}"
            )
    return EXIT_OK


def _inspect(args) -> int:
    info = describe(args.package, draft=args.draft)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        sys.stdout.write(render(info))
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
    root = _folder(args.package)
    shape = package_shape(root)
    if shape not in BARE_SHAPES:
        raise UsageError(
            f"{args.package} is not a bare decoder (it is a workflow package, run as written)",
            hint="Lower a legacy model.io package or an onnxruntime-genai folder "
            "(genai_config.json).",
        )
    if args.draft is not None:
        check_draft_folder(args.draft)  # a usage error: a draft that is no bare decoder
    sys.stdout.write(lower(root, draft=args.draft))
    return EXIT_OK


def _draft_flag(p) -> None:
    p.add_argument(
        "--draft",
        metavar="DIR",
        help="a bare decoder folder attached to the bare decoder PKG as its speculative draft "
        "(docs/lowering.md)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Reference runtime for ONNX GenAI workflow packages.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an unexpected error"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("validate", help="validate a package; list every violation")
    p.add_argument("package", metavar="PKG", help="the package folder")
    _draft_flag(p)
    p.add_argument("--json", action="store_true", help="print a JSON report")
    p.set_defaults(func=_validate)
    p = sub.add_parser(
        "inspect",
        help="describe a package: its inputs (and how to pass them), outputs, components "
        "(and the executors that can run each) and capabilities",
    )
    p.add_argument("package", metavar="PKG", help="the package folder")
    _draft_flag(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_inspect)
    p = sub.add_parser("run", help="run a package on one request and print what it published")
    p.add_argument("package", metavar="PKG", help="the package folder")
    _draft_flag(p)
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
    p.add_argument("--max-new-tokens", metavar="N", help="new tokens to generate, >= 0")
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
    p.add_argument(
        "--out",
        metavar="DIR",
        help="save every output (.npy; .wav for audio media, .png for images) and result.json",
    )
    p.add_argument("--json", action="store_true", help="print a JSON report (one line)")
    p.add_argument(
        "--indent", type=_indent, metavar="N", help="with --json: indent the JSON by N spaces"
    )
    p.set_defaults(func=_run)
    p = sub.add_parser(
        "serve",
        help="serve several requests (JSON lines, each with an arrival step) in one continuous "
        "batch; print each as it finishes",
    )
    p.add_argument("package", metavar="PKG", help="the package folder")
    p.add_argument(
        "--requests",
        metavar="FILE",
        required=True,
        help='JSON lines, one request each: {"prompt": [...] or "text", "max_new_tokens": N, '
        '"arrival": STEP, ...} (- reads standard input)',
    )
    p.add_argument("--slots", metavar="N", help="requests the batch holds at once")
    p.add_argument("--executor", choices=["ort", "native"], default="ort")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument(
        "--kv-budget-bytes",
        metavar="N",
        help="the KV bytes the batch may hold; a request waits until its KV fits",
    )
    p.add_argument("--trace", action="store_true", help="also print every batch step")
    p.add_argument("--json", action="store_true", help="print JSON lines")
    p.set_defaults(func=_serve)
    p = sub.add_parser(
        "lower", help="print the workflow a bare decoder is lowered to (model.io, genai_config)"
    )
    p.add_argument("package", metavar="PKG", help="the package folder")
    _draft_flag(p)
    p.set_defaults(func=_lower)
    p = sub.add_parser(
        "capabilities", help="print the capabilities, adapter ABIs and contracts supported"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_capabilities)
    return parser


def _indent(text: str) -> int:
    if not _INTEGER.match(text.strip()) or not 0 <= int(text) <= 16:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number from 0 to 16")
    return int(text)


def _report(exc: ReferenceRuntimeError, as_json: bool) -> None:
    """One paragraph on stderr (or ``{"error": ...}`` on stdout with ``--json``)."""
    if as_json:
        error = exc.to_json()
        if isinstance(exc, PackageError):
            error["violations"] = [
                {**v.to_json(), "kind": RULES[v.code].kind} for v in exc.violations
            ]
        print(json.dumps({"error": error}, indent=2))
        return
    if isinstance(exc, PackageError):
        count = len(exc.violations)
        lines = [f"error: package {exc.package} was refused, {count} violation{'s' * (count != 1)}"]
        for v in exc.violations:
            lines.append(f"  {v.code}  {v.location}")
            lines.append(f"        {v.message}")
            lines.append(f"        fix: {v.hint}")
    else:
        # a usage mistake shows a code only when a rule names it (e.g. an unusable KV budget)
        code = f" [{exc.code}]" if exc.code in RULES or not isinstance(exc, UsageError) else ""
        lines = [f"error{code}: {exc.message}"]
        if exc.location:
            lines.append(f"  at: {exc.location}")
        if exc.hint:
            lines.append(f"  fix: {exc.hint}")
    print("\n".join(lines), file=sys.stderr)


def _said(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def main(argv: list[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # names from a document may not be encodable
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    as_json = False
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # --help and --version print and exit 0
            return int(exc.code or 0)
        as_json = getattr(args, "json", False)
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe is reported here, not at exit
        return code
    except UsageError as exc:
        _report(exc, as_json)
        return EXIT_USAGE
    except ReferenceRuntimeError as exc:  # a refused package or request, a failed run
        _report(exc, as_json)
        return EXIT_REFUSED
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): nothing more to say, and nothing to flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_REFUSED
    except Exception as exc:
        if debug:
            raise
        print(
            f"{PROG}: internal error ({_said(exc)}). This is a bug in {PROG}; rerun with "
            "--debug to see where it happened, and report it.",
            file=sys.stderr,
        )
        return EXIT_BUG


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
