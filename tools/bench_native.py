"""Time each upstream package under the native executor, ONNX Runtime, and onnx.reference's
ReferenceEvaluator, end to end and executor only.

    python tools/bench_native.py [--upstream ../shared/upstream-fixtures] [--samples 5]

Two tables, each the median of ``--samples`` samples per package and executor (a sample
repeats the workload for at least 20 ms and takes the mean, so workloads of microseconds are
timed too), with the ratios reference/native and native/ORT and a total row (the sum of the
medians, and the ratios of the totals):

- **end to end**: every request of the package through ``Engine.run``, driven by the same
  workflow interpreter under each executor. The interpreter's own cost is the same for the
  three and dilutes the executor comparison.
- **executor only**: the ONNX component calls of one run of the package's requests (the inputs
  and requested outputs of every ``session.run`` the interpreter makes on an ONNX Runtime
  session, recorded on an ORT engine) replayed directly through each executor's session for
  the same component. Components that are not ONNX graphs (adapters, runtime contracts) are
  left out: they are the same code under every executor.

Then it reports the targets, each met / not met with its figure: native >= 10x faster than
onnx.reference (judged on the executor-only total and per package), and native within 3x of
ONNX Runtime on the decoder (judged on the decoder's end-to-end row). The ReferenceEvaluator
executor exists only here, as a yardstick: the runtime never uses onnx.reference. Progress
goes to stderr, the summary to stdout.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from reference_runtime import Engine
from reference_runtime.executors.base import Session
from reference_runtime.executors.ort import OrtSession

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.test_native_upstream import REQUESTS  # noqa: E402
from tests.test_upstream_runs import GatherElements  # noqa: E402

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "upstream-fixtures"
REFERENCE_TARGET = 10.0  # native at least this many times faster than onnx.reference
ORT_TARGET = 3.0  # native at most this many times slower than ONNX Runtime on the decoder
ORT_TARGET_PACKAGE = "decoder"


class ReferenceSession(Session):
    executor = "onnx.reference"

    def __init__(self, artifact: Path):
        self.component = artifact.stem
        fmt = "textproto" if artifact.name.endswith(".textproto") else None
        model = onnx.load(str(artifact), format=fmt)
        # onnx.reference's own GatherElements fails above 64 choices (np.choose).
        self.evaluator = ReferenceEvaluator(model, new_ops=[GatherElements])

    def run(self, inputs, outputs):
        results = self.evaluator.run(list(outputs), dict(inputs))
        return {name: np.asarray(value) for name, value in zip(outputs, results, strict=True)}


class RecordingSession(Session):
    """An ONNX Runtime session that records every call made through it (inputs copied, so a
    later in-place update cannot change the record) before running it."""

    def __init__(self, session: OrtSession, name: str, calls: list):
        self.session, self.name, self.calls = session, name, calls
        self.executor = session.executor
        self.component = session.component

    def _record(self, inputs, outputs) -> None:
        copied = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
        self.calls.append((self.name, copied, list(outputs)))

    def run(self, inputs, outputs):
        self._record(inputs, outputs)
        return self.session.run(inputs, outputs)


def swap_sessions(engine: Engine, replace) -> Engine:
    """Replace every ONNX Runtime session of a fresh ``engine`` (one that has run nothing, so
    its interpreter has compiled nothing against the old sessions) by ``replace(name,
    session)``."""
    for name, session in list(engine._sessions.items()):
        if isinstance(session, OrtSession):
            engine._sessions[name] = replace(name, session)
    engine._interpreter.sessions = engine._sessions
    return engine


def reference_engine(path: Path) -> Engine:
    """An ORT engine whose ONNX sessions are swapped for ReferenceEvaluator ones."""
    engine = Engine.from_dir(path, executor="ort")
    return swap_sessions(
        engine, lambda name, _: ReferenceSession(engine.package.artifact_path(name))
    )


def record_calls(path: Path, requests) -> list[tuple[str, dict, list]]:
    """(component, inputs, requested outputs) of every ONNX component call of one run of
    ``requests``, in call order."""
    calls: list = []
    engine = swap_sessions(
        Engine.from_dir(path, executor="ort"),
        lambda name, session: RecordingSession(session, name, calls),
    )
    for request in requests:
        engine.run(**request)
    return calls


SAMPLE_SECONDS = 0.02  # a sample repeats a workload at least this long, then takes the mean


def median_of(samples: int, once) -> float:
    """The median over ``samples`` of the time of one ``once()``; each sample repeats it enough
    times to last ``SAMPLE_SECONDS`` (a workload of a few microseconds is not timed alone)."""
    start = time.perf_counter()
    once()  # warm up (plans compile, caches fill)
    once()
    repeats = max(1, int(SAMPLE_SECONDS / max((time.perf_counter() - start) / 2, 1e-9)))
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        for _ in range(repeats):
            once()
        times.append((time.perf_counter() - start) / repeats)
    return statistics.median(times)


def end_to_end(engine: Engine, requests, samples: int) -> float:
    def once():
        for request in requests:
            engine.run(**request)

    return median_of(samples, once)


def replay(sessions, calls, samples: int) -> float:
    def once():
        for name, inputs, outputs in calls:
            sessions[name].run(inputs, outputs)

    return median_of(samples, once)


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def table(title: str, rows: list[tuple], calls: dict[str, int] | None = None) -> list[str]:
    """Rows of (package, native, ort, reference) seconds and a total row; with ``calls``, a
    column of recorded component calls (a package without any shows dashes)."""
    total = ("total", *(sum(row[i] for row in rows) for i in (1, 2, 3)))
    head = f"{'package':<14} {'calls':>6} " if calls is not None else f"{'package':<14} "
    lines = [
        title,
        f"{head}{'native':>9} {'ort':>9} {'reference':>10} {'ref/native':>11} {'native/ort':>11}",
    ]
    for i, (name, native, ort, ref) in enumerate([*rows, total]):
        if i == len(rows):
            lines.append("-" * len(lines[1]))
        line = f"{name:<14} "
        if calls is not None:
            count = sum(calls.values()) if name == "total" else calls[name]
            line += f"{count:>6} "
            if not count:
                lines.append(line + f"{'-':>9} {'-':>9} {'-':>10} {'-':>11} {'-':>11}")
                continue
        lines.append(
            line + f"{native * 1e3:>9.2f} {ort * 1e3:>9.2f} {ref * 1e3:>10.2f} "
            f"{ratio(ref, native):>10.1f}x {ratio(native, ort):>10.2f}x"
        )
    return lines


def targets(end_rows, exec_rows, calls: dict[str, int]) -> list[str]:
    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    lines = ["targets"]
    speedup = ratio(sum(r[3] for r in exec_rows), sum(r[1] for r in exec_rows))
    lines.append(
        f"  native >= {REFERENCE_TARGET:g}x faster than onnx.reference (executor only): "
        f"{verdict(speedup >= REFERENCE_TARGET)} on the total ({speedup:.1f}x); per package:"
    )
    for name, native, _, ref in exec_rows:
        if not calls[name]:
            lines.append(f"    {name:<14} {'-':>7}   no ONNX component calls")
            continue
        speedup = ratio(ref, native)
        lines.append(f"    {name:<14} {speedup:>6.1f}x   {verdict(speedup >= REFERENCE_TARGET)}")
    decoder = [r for r in end_rows if r[0] == ORT_TARGET_PACKAGE]
    if decoder:
        _, native, ort, _ = decoder[0]
        slowdown = ratio(native, ort)
        lines.append(
            f"  native within {ORT_TARGET:g}x of ORT on the {ORT_TARGET_PACKAGE} (end to end): "
            f"{verdict(slowdown <= ORT_TARGET)} ({slowdown:.2f}x)"
        )
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", type=Path, default=DEFAULT)
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args(argv)
    if not args.upstream.is_dir():
        print(f"no upstream packages at {args.upstream}", file=sys.stderr)
        return 2
    end_rows, exec_rows, counts = [], [], {}
    for i, (name, requests) in enumerate(sorted(REQUESTS.items()), 1):
        path = args.upstream / name
        native = Engine.from_dir(path, executor="native")
        ort = Engine.from_dir(path, executor="ort")
        ref = reference_engine(path)
        print(f"[{i}/{len(REQUESTS)}] {name}: end to end", file=sys.stderr)
        end_rows.append(
            (name, *(end_to_end(e, requests, args.samples) for e in (native, ort, ref)))
        )
        calls = record_calls(path, requests)
        counts[name] = len(calls)
        print(f"[{i}/{len(REQUESTS)}] {name}: {len(calls)} component calls", file=sys.stderr)
        exec_rows.append(
            (name, *(replay(e._sessions, calls, args.samples) for e in (native, ort, ref)))
        )
    samples = f"median of {args.samples} samples, ms per run"
    lines = [
        *table(f"end to end: each package's requests through Engine.run ({samples})", end_rows),
        "",
        *table(
            f"executor only: the recorded ONNX component calls replayed ({samples})",
            exec_rows,
            counts,
        ),
        "",
        *targets(end_rows, exec_rows, counts),
    ]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
