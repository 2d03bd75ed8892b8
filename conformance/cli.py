"""The ``conformance`` command line (also ``python -m conformance``).

    conformance certify --runtime SPEC [--expectations FILE] [--report-dir DIR] [--strict]
                        [--jobs N] [--suite NAME]... [-k PATTERN]...
    conformance list [--suite NAME]... [-k PATTERN]... [--json]
    conformance show CASE_ID --dest DIR [--force]

Every mistake is one paragraph on stderr (what, where, the fix) and an exit status: 2 for a
usage mistake (an unknown runtime, suite, case or option; an unreadable expectations file; a
report folder that cannot be written), 1 when certification fails or the runtime does not
start, 130 when interrupted (Ctrl-C: a partial report marked interrupted is still written).
Everything is checked before the first case runs. ``--debug`` shows the traceback of an
unexpected error instead of the paragraph.
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch
import json
import os
import shlex
import shutil
import sys
from collections import Counter
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from . import goldens
from .cases.catalogue import Case, catalogue
from .cases.drafts import ATTACHED
from .certify import (
    STATUSES,
    certify,
    check_run,
    exit_status,
    read_expectations,
    report_json,
    report_junit,
    report_markdown,
)
from .package_reader import DocumentError, parse_text, read_text
from .protocol import encode_value
from .runtimes import open_runtime

PROG = "conformance"


class UsageError(Exception):
    """A mistake in how the command was called: exit status 2."""


class Failed(Exception):
    """The command could not do its work (e.g. the runtime does not start): exit status 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def _version() -> str:
    try:
        return version("onnx-genai-reference-runtime")
    except PackageNotFoundError:
        return "unknown"


# ------------------------------------------------------------------ selection


def select(suites: list[str] | None, patterns: list[str] | None) -> list[Case]:
    """The catalogue's cases in ``suites`` (all when none) whose id matches one of ``patterns``
    (a substring, or a shell-style pattern when it holds ``*``, ``?`` or ``[``); a suite that
    does not exist, or a selection with no case, is a usage mistake."""
    cases = catalogue()
    known = sorted({c.suite for c in cases})
    for suite in suites or ():
        if suite not in known:
            raise UsageError(f"no suite {suite!r}: the suites are {', '.join(known)}")
    chosen = [c for c in cases if not suites or c.suite in suites]
    if patterns:
        chosen = [c for c in chosen if any(_matches(c.id, p) for p in patterns)]
    if not chosen:
        what = " and ".join(
            part
            for part in (
                f"suite(s) {', '.join(suites)}" if suites else "",
                f"-k {' / '.join(patterns)}" if patterns else "",
            )
            if part
        )
        raise UsageError(
            f"no case matches {what}: list the cases with 'conformance list' and choose again"
        )
    return chosen


def _matches(case_id: str, pattern: str) -> bool:
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatchcase(case_id, pattern)
    return pattern in case_id


def find_case(case_id: str) -> Case:
    cases = catalogue()
    for case in cases:
        if case.id == case_id:
            return case
    close = difflib.get_close_matches(case_id, [c.id for c in cases], n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    raise UsageError(
        f"no case {case_id!r}{hint}: list the case ids with 'conformance list' (or -k PATTERN)"
    )


# ------------------------------------------------------------------ certify


def open_checked(spec: str):
    """The runtime ``spec`` names, opened and described: every way it cannot start is a
    paragraph (usage for a spec that names nothing, failure for a runtime that does not start)."""
    base = spec.removesuffix(":plain")
    forms = (
        "reference, reference:native (either with :plain), python:MODULE:FACTORY or exec:COMMAND"
    )
    if spec.startswith("python:"):
        parts = spec.split(":", 2)
        if len(parts) != 3 or not parts[1] or not parts[2]:
            raise UsageError(f"runtime {spec!r}: write python:MODULE:FACTORY")
    elif spec.startswith("exec:"):
        if not spec[len("exec:") :].strip():
            raise UsageError(f"runtime {spec!r}: write exec:COMMAND (the command to start)")
    elif base not in ("reference", "reference:ort", "reference:native"):
        raise UsageError(f"unknown runtime {spec!r}: use {forms}")
    try:
        runtime = open_runtime(spec)
    except ModuleNotFoundError as exc:
        raise UsageError(
            f"runtime {spec!r}: cannot import module {exc.name!r}; check the module path and "
            "that it is installed"
        ) from None
    except AttributeError as exc:
        raise UsageError(f"runtime {spec!r}: {exc}; name a factory the module defines") from None
    except (FileNotFoundError, PermissionError) as exc:
        raise UsageError(
            f"runtime {spec!r}: cannot start the command ({exc.strerror}: "
            f"{exc.filename}); check it is installed and on PATH"
        ) from None
    except Exception as exc:
        raise Failed(f"runtime {spec!r} did not start: {_said(exc)}") from None
    try:
        info = runtime.describe()
    except Exception as exc:
        if hasattr(runtime, "shutdown"):
            runtime.shutdown()
        raise Failed(f"runtime {spec!r} did not describe itself: {_said(exc)}") from None
    if not isinstance(info, dict):
        raise Failed(f"runtime {spec!r}: describe() returned {type(info).__name__}, not a dict")
    return runtime


def _said(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def read_expectations_file(path: str | None) -> dict:
    if not path:
        return {}
    try:
        document = parse_text(read_text(Path(path)), "expectations.yaml")
    except DocumentError as exc:
        raise UsageError(f"expectations {path}: {exc}; give a YAML file") from None
    try:
        return read_expectations(document)
    except ValueError as exc:
        raise UsageError(
            f"expectations {path}: {exc} (docs/conformance.md: Expected failures)"
        ) from None


def writable_dir(path: str) -> Path:
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".conformance-write-check"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(
            f"--report-dir {path}: cannot write reports there ({exc.strerror}); choose a "
            "folder you can write"
        ) from None
    return out


def cmd_certify(args) -> int:
    expectations = read_expectations_file(args.expectations)
    cases = select(args.suite, args.k)
    out = writable_dir(args.report_dir)
    runtime = open_checked(args.runtime)
    suites = set(args.suite) if args.suite else None
    header, results = certify(
        args.runtime, expectations, args.jobs, suites, cases=cases, runtime=runtime
    )
    # The tripwire against a shrunken catalogue applies to whole-catalogue runs only.
    selection = suites if suites is not None else (set(args.k) if args.k else None)
    problems = check_run(header, results, expectations, selection)
    (out / "report.json").write_text(
        json.dumps(report_json(header, results, problems), indent=2) + "\n"
    )
    (out / "report.md").write_text(report_markdown(header, results, problems))
    (out / "junit.xml").write_text(report_junit(header, results))
    total = Counter(r.status for r in results)
    print(f"{'status':<16} cases")
    for status in STATUSES:
        print(f"{status:<16} {total[status]}")
    for problem in problems:
        print(f"problem: {problem.message}")
    failed = [r for r in results if r.status == "failed"]
    if failed:
        print()
        print(f"short summary: {len(failed)} failed")
        for r in failed:
            print(f"FAILED {r.case.id} ({r.kind}): {r.got.splitlines()[0][:160] if r.got else ''}")
            print(f"    reproduce: conformance show {r.case.id} --dest ./case")
    print(f"reports: {out / 'report.md'}, {out / 'report.json'}, {out / 'junit.xml'}")
    if header.get("interrupted"):
        print(f"{PROG}: interrupted; the reports above are partial", file=sys.stderr)
        return 130
    return exit_status(results, problems, args.strict)


# ------------------------------------------------------------------ list


def cmd_list(args) -> int:
    cases = select(args.suite, args.k)
    if args.json:
        rows = [
            {
                "id": c.id,
                "suite": c.suite,
                "features": list(c.features),
                "rule": c.rule,
                "expected": c.expected,
            }  # fmt: skip
            for c in cases
        ]
        print(json.dumps(rows, indent=1))
        return 0
    width = max(len(c.id) for c in cases)
    for c in cases:
        print(f"{c.id:<{width}}  {', '.join(c.features)}")
    by_suite = Counter(c.suite for c in cases)
    print(f"{len(cases)} cases ({', '.join(f'{s} {n}' for s, n in sorted(by_suite.items()))})")
    return 0


# ------------------------------------------------------------------ show

WRITTEN = ("package", "case.json", "requests", "requests.json", "expected.json", "reproduce.sh",
           "reproduce.py")  # fmt: skip

# Runs a shown case's requests exactly (sessions and sampling included) through the reference
# runtime's API; reproduce.sh holds the closest command lines.
REPRODUCE_PY = '''"""Runs the requests of requests.json through the reference runtime, as certification does
(one session for the requests whose session_id is "new" / "same"; a session_action resets or
closes it), and prints each result or refusal; compare with expected.json."""

import json
import sys
from pathlib import Path

import numpy as np

from reference_runtime import Engine, ReferenceRuntimeError

here = Path(__file__).resolve().parent
executor = sys.argv[1] if len(sys.argv) > 1 else "ort"
# a case's load options (kv_admission: {"kv_budget_bytes": N}; attached_draft: {"draft":
# folder}, relative to this one) go to Engine.from_dir
options = json.loads((here / "case.json").read_text()).get("options") or {}
if "draft" in options:
    options["draft"] = here / options["draft"]
engine = Engine.from_dir(here / "package", executor=executor, **options)
session = None
for i, request in enumerate(json.loads((here / "requests.json").read_text())):
    inputs = {name: np.load(here / spec["file"]) for name, spec in request["inputs"].items()}
    sid = request.get("session_id")
    action = request.get("session_action")
    try:
        if sid == "new":
            session = sid = engine.create_session()
        elif sid == "same":
            sid = session
        if action is not None:  # "reset" or "close": not a run
            getattr(engine, f"{action}_session")(sid)
            print(f"request {i}: session {action}")
            continue
        result = engine.run(
            prompt=request.get("prompt"), inputs=inputs,
            max_new_tokens=request.get("max_new_tokens"), seed=request.get("seed"),
            greedy=request.get("greedy", True), stop_on_eos=request.get("stop_on_eos", True),
            session_id=sid, overrides=request.get("overrides"),
        )
    except ReferenceRuntimeError as exc:
        print(f"request {i}: refused {exc.code}: {exc.message}")
        continue
    print(f"request {i}: tokens {result.tokens} finish_reasons {result.finish_reasons}")
    for name, value in result.outputs.items():
        print(f"  {name}: {value!r}")
'''


def cmd_show(args) -> int:
    case = find_case(args.case_id)
    dest = Path(args.dest)
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"--dest {dest}: it is a file; give a folder")
    if dest.is_dir() and any(dest.iterdir()):
        if not args.force:
            raise UsageError(
                f"--dest {dest}: the folder is not empty; give a new folder, or --force to "
                "replace what 'conformance show' writes there"
            )
        for name in WRITTEN:
            target = dest / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
    try:
        dest.mkdir(parents=True, exist_ok=True)
        written = write_case(case, dest)
    except OSError as exc:
        raise UsageError(f"--dest {dest}: cannot write there ({exc.strerror})") from None
    for path in written:
        print(path)
    return 0


def write_case(case: Case, dest: Path) -> list[Path]:
    """The case's package under ``dest/package``, what it expects, its requests (inputs as .npy
    files) and a script of ``reference-runtime`` commands that reproduce it."""
    built = case.build(dest / ".build")
    package = dest / "package"
    shutil.move(str(built), package)
    written = [package, dest / "case.json"]
    draft = (case.options or {}).get("draft")
    if draft is not None:  # attached_draft: the draft's copy, beside the target's
        shutil.move(str(built.parent / ATTACHED / draft), dest / "draft")
        written.append(dest / "draft")
    shutil.rmtree(dest / ".build", ignore_errors=True)
    info = {"id": case.id, "suite": case.suite, "features": list(case.features),
            "rule": case.rule, "expected": case.expected}  # fmt: skip
    if case.options:
        info["options"] = {**case.options, **({"draft": "draft"} if draft else {})}  # to load
    (dest / "case.json").write_text(json.dumps(info, indent=2) + "\n")
    commands = []
    budget = (case.options or {}).get("kv_budget_bytes")
    flag = "" if budget is None else f" --kv-budget-bytes {budget}"
    flag += "" if draft is None else " --draft draft"
    if case.run is None:
        if budget is None:
            commands.append("reference-runtime validate package" + flag)
        else:  # refused when the engine loads, before any request
            commands.append(f"reference-runtime run package{flag} --json")
    else:
        requests = []
        for i, request in enumerate(case.run.requests):
            requests.append(_request_json(request, dest / "requests" / str(i)))
            commands.append(_run_command(request, i).replace(" --json", f"{flag} --json", 1))
        (dest / "requests.json").write_text(json.dumps(requests, indent=2) + "\n")
        written += [dest / "requests.json"]
        if (dest / "requests").exists():
            written.append(dest / "requests")
        golden = goldens.load(case.run.id)
        if golden is not None:
            (dest / "expected.json").write_text(json.dumps(golden, indent=2) + "\n")
            written.append(dest / "expected.json")
        (dest / "reproduce.py").write_text(REPRODUCE_PY)
        written.append(dest / "reproduce.py")
    lines = ["#!/bin/sh", f"# Reproduces conformance case {case.id}: {case.expected}"]
    if case.run is not None:
        lines.append("# Exactly, every request in order: python3 reproduce.py [ort|native]")
    lines += ["set -x", *commands]
    script = dest / "reproduce.sh"
    script.write_text("\n".join(lines) + "\n")
    script.chmod(0o755)
    return [*written, script]


def _request_json(request: dict, folder: Path) -> dict:
    out = {}
    for key, value in request.items():
        if key == "inputs":
            out["inputs"] = {}
            for name, array in (value or {}).items():
                folder.mkdir(parents=True, exist_ok=True)
                path = folder / f"{name}.npy"
                np.save(path, np.asarray(array), allow_pickle=False)
                out["inputs"][name] = {"file": str(path.relative_to(folder.parents[1])),
                                       **encode_value(np.asarray(array))}  # fmt: skip
        else:
            out[key] = value.tolist() if isinstance(value, np.ndarray) else value
    return out


def _override_flags(overrides) -> list[str] | None:
    """``--override TARGET=REPLACEMENT`` per entry, or None where the flag cannot spell the
    request's overrides (a value that is no mapping of names to names)."""
    if not isinstance(overrides, dict):
        return [] if overrides is None else None
    spelled = []
    for target, replacement in overrides.items():
        if not all(isinstance(n, str) and n for n in (target, replacement)) or "=" in target:
            return None
        spelled.append(f"--override {shlex.quote(f'{target}={replacement}')}")
    return spelled


def _plain(value):
    """Token rows as plain lists (an array, or a list of rows of any lengths)."""
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return np.asarray(value).tolist()


def _run_command(request: dict, index: int) -> str:
    if request.get("session_action") is not None:
        return (f"# request {index} {request['session_action']}s the session: "
                "reproduce.py runs it exactly")  # fmt: skip
    parts = ["reference-runtime run package"]
    prompt = request.get("prompt")
    if prompt is not None:
        rows = prompt if isinstance(prompt, str) else _plain(prompt)  # rows may be ragged
        parts.append(f"--prompt '{json.dumps(rows, separators=(',', ':'))}'")
    for name in request.get("inputs") or {}:
        parts.append(f"--input '{name}=@requests/{index}/{name}.npy'")
    if request.get("max_new_tokens") is not None:
        parts.append(f"--max-new-tokens {request['max_new_tokens']}")
    if request.get("seed") is not None:
        parts.append(f"--seed {request['seed']}")
    if request.get("stop_on_eos") is False:
        parts.append("--no-stop-on-eos")
    overrides = request.get("overrides")
    flags = _override_flags(overrides)
    parts += flags or []
    parts.append("--json")
    command = " ".join(parts)
    notes = []
    if overrides is not None and flags is None:
        notes.append(f"carries overrides {json.dumps(overrides)}, which --override cannot spell")
    if request.get("session_id") is not None:
        notes.append("belongs to a session, which the command line cannot continue")
    if request.get("greedy") is False:
        notes.append("is sampled, with the package's default settings here")
    if notes:
        return f"# request {index} {' and '.join(notes)}: reproduce.py runs it exactly\n{command}"
    return command


# ------------------------------------------------------------------ main


def parser() -> argparse.ArgumentParser:
    top = _Parser(prog=PROG, description="Certify a runtime of ONNX GenAI workflow packages.")
    top.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    top.add_argument("--debug", action="store_true", help="show tracebacks of unexpected errors")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def selection(p):
        p.add_argument("--suite", action="append", help="only this suite (repeatable)")
        p.add_argument("-k", action="append", metavar="PATTERN",
                       help="only case ids containing PATTERN (or matching it, with * ? [ ]); "
                            "repeatable")  # fmt: skip

    p = sub.add_parser("certify", help="run the suite against a runtime and write reports")
    p.add_argument("--runtime", required=True,
                   help="reference | reference:native (either with :plain) | "
                        "python:MODULE:FACTORY | exec:COMMAND")  # fmt: skip
    p.add_argument("--expectations", help="YAML {case id: reason | {reason, kind, match}} of "
                   "expected failures")  # fmt: skip
    p.add_argument("--report-dir", default="conformance-report")
    p.add_argument("--strict", action="store_true", help="stale expectations fail the run")
    p.add_argument("--jobs", type=_positive, default=os.cpu_count() or 2)
    selection(p)
    p.set_defaults(func=cmd_certify)
    p = sub.add_parser("list", help="list the cases (id and features)")
    selection(p)
    p.add_argument("--json", action="store_true", help="one JSON list of the cases")
    p.set_defaults(func=cmd_list)
    p = sub.add_parser("show", help="write a case (package, requests, expected results, the "
                       "commands that reproduce it) to a folder")  # fmt: skip
    p.add_argument("case_id")
    p.add_argument("--dest", required=True)
    p.add_argument("--force", action="store_true", help="replace what an earlier show wrote")
    p.set_defaults(func=cmd_show)
    return top


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    try:
        args = parser().parse_args(argv)
        return args.func(args)
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except Failed as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): nothing more to say, and nothing to flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:
        if debug:
            raise
        print(
            f"{PROG}: internal error ({_said(exc)}). This is a bug in {PROG}, not in your "
            "runtime; rerun with --debug to see where it happened, and report it.",
            file=sys.stderr,
        )
        return 3
