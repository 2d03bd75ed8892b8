"""Mutate every fixture and upstream package and count how the runtime takes each result.

    python tools/fuzz_packages.py --cases N [--jobs J] [--seed S] [--timeout SECONDS]
                                  [--memory-mb MB] [--upstream DIR] [--keep DIR] [--json]
    python tools/fuzz_packages.py --bombs

Case ``i`` copies one base package (the fixture packages and, when present, the format's
upstream example packages, read in place from ``../shared/upstream-fixtures`` beside the
repository or from ``--upstream``; absent, they are skipped with the reason) and damages the
copy once (``tests/hostile.py``: document structure, text, bytes, ONNX protos, external data,
files, parser bombs), deterministically from ``--seed`` and ``i``. Then, in a worker
subprocess: ``validate_package``, ``load_package`` and, when the package is valid,
``Engine.from_dir`` on ONNX Runtime and on the native executor.

Each case ends as one of:

- ``accepted``: valid, and built on ONNX Runtime; on the native executor it built too, or was
  refused with a coded error (an operator that executor does not implement: counted apart);
- ``refused``: refused with the package error (``PackageError``, every violation coded);
- ``crash``: anything else raised (by validation, loading or building), validation and loading
  disagreeing, or a package that validates but does not build;
- ``hang``: the worker passed ``--timeout`` seconds on the case (it is killed and replaced);
- ``memory``: the worker passed ``--memory-mb`` (its address space is limited to that).

It prints the counts, the cases per second, the peak resident memory of any worker (after
loading the runtime, which is most of it), and each crash with the command that reproduces it
(``--only I``); ``--progress`` also prints each crash, hang or memory blow-up as it happens.
Interrupted (Ctrl-C, SIGTERM), it prints the same summary of the cases done so far. The exit
status is 0 iff there is no crash, hang or memory blow-up (130 when interrupted without one).

``--bombs`` validates each parser bomb of ``tests/hostile.py`` (50 MB and 15 MB JSON and YAML
lists, deep nesting, a 15 MB string, a 900 KB base-60 integer, an alias bomb) alone in a fresh
process, and prints the rule it was refused with, the seconds validation took and the peak
memory of that process.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the repository: tests/hostile.py, fixtures/

DEFAULT_UPSTREAM = REPO.parent / "shared" / "upstream-fixtures"
OUTCOMES = ("accepted", "refused", "crash", "hang", "memory")


def bases(upstream: Path) -> tuple[list[tuple[str, Path]], str | None]:
    """(name, folder) of every base package, and why upstream packages are skipped (or None)."""
    fixtures = REPO / "fixtures" / "packages"
    found = [(f"fixtures/{p.name}", p) for p in sorted(fixtures.iterdir()) if p.is_dir()]
    skipped = None
    if upstream.is_dir():
        found += [(f"upstream/{p.name}", p) for p in sorted(upstream.iterdir()) if p.is_dir()]
    else:
        skipped = f"upstream packages skipped: {upstream} is absent"
    return found, skipped


# ------------------------------------------------------------------ the worker


def run_case(index: int, seed: int, base: Path, scratch: Path, keep: Path | None) -> dict:
    """Mutate a copy of ``base`` and put it through validation, loading and both engines."""
    from hostile import mutate  # tests/hostile.py

    from reference_runtime.engine import Engine
    from reference_runtime.errors import PackageError, ReferenceRuntimeError
    from reference_runtime.package import load_package, validate_package

    rng = random.Random(f"{seed}:{index}")
    case_dir = scratch / f"case{index}"
    root = case_dir / base.name
    shutil.copytree(base, root, symlinks=True)
    for path in root.rglob("*"):  # upstream files are read-only: the copy must be writable
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    family, what = mutate(root, rng)
    result = {"case": index, "family": family, "mutation": what[:300]}
    stage = "validate"
    try:
        violations = validate_package(root)
        stage = "load"
        try:
            load_package(root)
            loaded = True
        except PackageError:
            loaded = False
        if loaded == bool(violations):
            raise AssertionError(
                f"validate_package gave {len(violations)} violation(s) but load_package "
                f"{'loaded' if loaded else 'refused'} the package"
            )
        if violations:
            bad = [v for v in violations if not (v.code and v.message and v.hint)]
            if bad:
                raise AssertionError(f"a violation without code, message or hint: {bad[0]}")
            result["outcome"] = "refused"
            result["codes"] = sorted({v.code for v in violations})
        else:
            stage = "Engine.from_dir(ort)"
            try:
                Engine.from_dir(root)
            except ReferenceRuntimeError as exc:
                raise AssertionError(f"validated, then refused when built: {exc}") from exc
            stage = "Engine.from_dir(native)"
            try:
                Engine.from_dir(root, executor="native")
            except ReferenceRuntimeError as exc:  # an operator it lacks: coded, unsupported
                result["native_refused"] = exc.code
            result["outcome"] = "accepted"
    except MemoryError:
        result["outcome"] = "memory"
        result["error"] = f"MemoryError in {stage}"
    except BaseException as exc:  # the property under test: nothing but PackageError escapes
        if isinstance(exc, KeyboardInterrupt):
            raise
        result["outcome"] = "crash"
        frames = traceback.extract_tb(exc.__traceback__)
        where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
        text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        result["error"] = f"{stage}: {type(exc).__name__}: {text} ({where})"
        if keep is not None:
            shutil.copytree(root, keep / f"case{index}", symlinks=True, dirs_exist_ok=True)
    finally:
        shutil.rmtree(case_dir, ignore_errors=True)
    result["peak_mb"] = peak_mb()
    return result


def worker(memory_mb: int, keep: str | None) -> None:
    """Read ``index seed base`` lines on stdin; write one JSON result line per case."""
    sys.path.insert(0, str(REPO / "tests"))
    if memory_mb:
        limit = memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    scratch = Path(tempfile.mkdtemp(prefix="fuzz-packages-"))
    keep_dir = Path(keep) if keep else None
    import reference_runtime.engine  # noqa: F401  (loaded once, before the first case)

    print(json.dumps({"ready": True}), flush=True)
    try:
        for line in sys.stdin:
            index, seed, base = line.rstrip("\n").split(" ", 2)
            result = run_case(int(index), int(seed), Path(base), scratch, keep_dir)
            print(json.dumps(result), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def peak_mb() -> float:
    """This process's peak resident memory: VmHWM where Linux has it (ru_maxrss can carry the
    peak of the process that started this one), ru_maxrss elsewhere."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(folder: str) -> None:
    """Validate one package; print the seconds it took and the worker's peak memory."""
    from reference_runtime.package import validate_package

    before = peak_mb()
    start = time.perf_counter()
    violations = validate_package(folder)
    seconds = time.perf_counter() - start
    peak = peak_mb()
    codes = sorted({v.code for v in violations})
    print(json.dumps({"seconds": seconds, "codes": codes, "base_mb": before, "peak_mb": peak}))


def bombs() -> list[dict]:
    """Each parser bomb of tests/hostile.py, validated alone in a fresh process."""
    sys.path.insert(0, str(REPO / "tests"))
    from hostile import BOMBS, plant_bomb

    rows = []
    for name in sorted(BOMBS):
        with tempfile.TemporaryDirectory(prefix="fuzz-bomb-") as scratch:
            root = Path(scratch) / "bomb"
            root.mkdir()
            what = plant_bomb(root, name)
            command = [sys.executable, os.fspath(Path(__file__).resolve()), "--measure", str(root)]
            done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=300)
            row = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {}
            rows.append({"bomb": name, "what": what, **row})
    return rows


# ------------------------------------------------------------------ the pool


class Worker:
    def __init__(self, args):
        command = [sys.executable, os.fspath(Path(__file__).resolve()), "--worker"]
        command += ["--memory-mb", str(args.memory_mb)]
        if args.keep:
            command += ["--keep", args.keep]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
            cwd=REPO,
        )
        self.case: tuple | None = None
        self.started = 0.0
        self.ready = False

    def send(self, case: tuple) -> None:
        self.case = case
        self.started = time.monotonic()
        self.process.stdin.write(f"{case[0]} {case[1]} {case[2]}\n")
        self.process.stdin.flush()

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


def _drive(args, pool: list, pending: list, results: list, names: dict, total: int) -> None:
    """Hand the pending cases to the workers until every one has a result."""

    def done(result: dict) -> None:
        results.append(result)
        if args.progress and result["outcome"] in ("crash", "hang", "memory"):
            print(f"  case {result['case']}: {result['outcome']}: {result.get('error')}",
                  file=sys.stderr, flush=True)  # fmt: skip
        if args.progress and len(results) % 100 == 0:
            print(f"  {len(results)}/{total} cases", file=sys.stderr, flush=True)

    while pending or any(w.case for w in pool):
        for i, w in enumerate(pool):
            if w.process.poll() is not None and (w.case or w.ready or pending):
                if w.case:  # died on a case: memory or a hard crash of the interpreter
                    code = w.process.returncode
                    outcome = "memory" if code in (-9, -6, 137) else "crash"
                    done({"case": w.case[0], "outcome": outcome, "family": "?",
                          "mutation": "?", "error": f"worker died with status {code}"})  # fmt: skip
                pool[i] = w = Worker(args)
            if w.ready and w.case is None and pending:
                w.send(pending.pop())
        streams = {w.process.stdout: w for w in pool if w.process.poll() is None}
        readable, _, _ = select.select(list(streams), [], [], 0.5)
        for stream in readable:
            w = streams[stream]
            line = stream.readline()
            if not line:
                continue
            message = json.loads(line)
            if message.get("ready"):
                w.ready = True
                continue
            message["base"] = names.get(str(w.case[2]), str(w.case[2]))
            w.case = None
            done(message)
        now = time.monotonic()
        for i, w in enumerate(pool):
            if w.case and now - w.started > args.timeout:
                done({"case": w.case[0], "outcome": "hang", "family": "?", "mutation": "?",
                      "base": names.get(str(w.case[2])), "error": f"over {args.timeout} s"})  # fmt: skip
                w.kill()
                pool[i] = Worker(args)


def fuzz(args) -> dict:
    found, skipped = bases(Path(args.upstream))
    cases = [(i, args.seed, found[i % len(found)][1]) for i in range(args.cases)]
    if args.only is not None:
        cases = [(args.only, args.seed, found[args.only % len(found)][1])]
    names = {str(path): name for name, path in found}
    pending = list(reversed(cases))
    results: list[dict] = []
    pool = [Worker(args) for _ in range(min(args.jobs, len(cases)) or 1)]
    start = time.monotonic()
    try:
        _drive(args, pool, pending, results, names, len(cases))
        interrupted = False
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the summary of the cases done so far
        interrupted = True
        for w in pool:
            w.kill()
    for w in pool:
        if w.process.poll() is None:
            w.process.stdin.close()
            w.process.wait()
    seconds = time.monotonic() - start
    counts = {k: sum(r["outcome"] == k for r in results) for k in OUTCOMES}
    return {
        "cases": len(results),
        "of": len(cases),
        "interrupted": interrupted,
        "bases": len(found),
        "skipped": skipped,
        "seed": args.seed,
        "counts": counts,
        "seconds": round(seconds, 1),
        "cases_per_second": round(len(results) / seconds, 2) if seconds else None,
        "peak_mb": round(max((r.get("peak_mb", 0) for r in results), default=0), 1),
        "native_refused": sum("native_refused" in r for r in results),
        "families": {
            f: {k: sum(r["outcome"] == k and r["family"] == f for r in results) for k in OUTCOMES}
            for f in sorted({r["family"] for r in results})
        },
        "failures": sorted(
            (r for r in results if r["outcome"] in ("crash", "hang", "memory")),
            key=lambda r: r["case"],
        ),
    }


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per case")
    parser.add_argument("--memory-mb", type=int, default=2048, help="address space per worker")
    parser.add_argument("--upstream", default=os.fspath(DEFAULT_UPSTREAM))
    parser.add_argument("--keep", help="copy each crashing package into this folder")
    parser.add_argument("--only", type=int, help="run case I alone (to reproduce it)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--progress", action="store_true")
    parser.add_argument(
        "--bombs", action="store_true", help="measure each parser bomb alone, then exit"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.memory_mb, args.keep)
        return 0
    if args.measure:
        measure(args.measure)
        return 0
    if args.bombs:
        rows = bombs()
        for r in rows:
            print(f"{r['bomb']:16} {r['what']:40} refused {','.join(r.get('codes', [])) or '?':6} "
                  f"in {r.get('seconds', float('nan')):.3f} s; peak {r.get('peak_mb', 0):.0f} MB "
                  f"(the runtime loaded: {r.get('base_mb', 0):.0f} MB)")  # fmt: skip
        return 0 if all(r.get("codes") for r in rows) else 1
    signal.signal(signal.SIGTERM, _interrupt)
    summary = fuzz(args)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        c = summary["counts"]
        if summary["skipped"]:
            print(summary["skipped"])
        if summary["interrupted"]:
            print(f"interrupted: {summary['cases']} of {summary['of']} cases done")
        print(
            f"{summary['cases']} cases on {summary['bases']} base packages (seed {summary['seed']}): "
            f"{c['accepted']} accepted, {c['refused']} refused, {c['crash']} crashes, "
            f"{c['hang']} hangs, {c['memory']} memory blow-ups"
        )
        print(
            f"of the accepted, {summary['native_refused']} refused (coded) by the native executor"
        )
        print(f"{summary['seconds']} s ({summary['cases_per_second']} cases/s); peak worker "
              f"memory {summary['peak_mb']} MB")  # fmt: skip
        for family, row in summary["families"].items():
            print(f"  {family:16} " + ", ".join(f"{k} {v}" for k, v in row.items() if v))
        for r in summary["failures"]:
            print(f"{r['outcome']}: case {r['case']} ({r.get('base')}; {r['family']}: "
                  f"{r['mutation']}): {r.get('error')}")  # fmt: skip
            print(f"  reproduce: python tools/fuzz_packages.py --seed {summary['seed']} "
                  f"--cases {args.cases} --only {r['case']}")  # fmt: skip
    return 1 if summary["failures"] else 130 if summary["interrupted"] else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the reader went away (e.g. `| head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
