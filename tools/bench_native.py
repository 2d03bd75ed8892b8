"""End-to-end time of each upstream package under the native executor, ONNX Runtime, and
onnx.reference's ReferenceEvaluator, all driven through the same workflow interpreter.

    python tools/bench_native.py [--upstream ../shared/upstream-fixtures] [--samples 5]

The ReferenceEvaluator executor exists only here, as a yardstick (the runtime never uses
onnx.reference). Reports the median of ``--samples`` runs per executor and the ratios; targets:
native >= 10x faster than onnx.reference, and within 3x of ONNX Runtime on the decoder loop.
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
from reference_runtime.executors.ort import OrtSession

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.test_native_upstream import REQUESTS  # noqa: E402
from tests.test_upstream_runs import GatherElements  # noqa: E402

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "upstream-fixtures"


class ReferenceSession:
    executor = "onnx.reference"

    def __init__(self, artifact: Path):
        fmt = "textproto" if artifact.name.endswith(".textproto") else None
        model = onnx.load(str(artifact), format=fmt)
        # onnx.reference's own GatherElements fails above 64 choices (np.choose).
        self.evaluator = ReferenceEvaluator(model, new_ops=[GatherElements])

    def run(self, inputs, outputs):
        results = self.evaluator.run(list(outputs), dict(inputs))
        return {name: np.asarray(value) for name, value in zip(outputs, results, strict=True)}


def reference_engine(path: Path) -> Engine:
    """An ORT engine whose ONNX sessions are swapped for ReferenceEvaluator ones."""
    engine = Engine.from_dir(path, executor="ort")
    for name, session in list(engine._sessions.items()):
        if isinstance(session, OrtSession):
            engine._sessions[name] = ReferenceSession(engine.package.artifact_path(name))
    engine._interpreter.sessions = engine._sessions
    engine._interpreter.plans.clear()
    return engine


def median_time(engine: Engine, requests, samples: int) -> float:
    for request in requests:  # warm up
        engine.run(**request)
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        for request in requests:
            engine.run(**request)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", type=Path, default=DEFAULT)
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args(argv)
    if not args.upstream.is_dir():
        print(f"no upstream packages at {args.upstream}", file=sys.stderr)
        return 2
    rows = []
    for i, (name, requests) in enumerate(sorted(REQUESTS.items()), 1):
        print(f"[{i}/{len(REQUESTS)}] {name}", file=sys.stderr)
        path = args.upstream / name
        native = median_time(Engine.from_dir(path, executor="native"), requests, args.samples)
        ort = median_time(Engine.from_dir(path, executor="ort"), requests, args.samples)
        ref = median_time(reference_engine(path), requests, args.samples)
        rows.append((name, native, ort, ref))
    print(f"median of {args.samples} runs of each package's requests (ms)")
    print(
        f"{'package':<14} {'native':>9} {'ort':>9} {'reference':>10} {'ref/native':>11} {'native/ort':>11}"
    )
    for name, native, ort, ref in rows:
        print(f"{name:<14} {native * 1e3:>9.2f} {ort * 1e3:>9.2f} {ref * 1e3:>10.2f} "
              f"{ref / native:>10.1f}x {native / ort:>10.2f}x")  # fmt: skip
    print("targets: ref/native >= 10x; native/ort <= 3x on the decoder")
    return 0


if __name__ == "__main__":
    sys.exit(main())
