"""The benchmark tools run end to end on tiny workloads (their figures are not judged here: a
benchmark reports ratios measured in one run; these tests only keep the tools working)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "tools"


def tool(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_bench_peers_on_the_tiny_decoder(capsys):
    bench = tool("bench_peers")
    assert bench.main(["--models", "tiny", "--rounds", "1", "--new-tokens", "4"]) == 0
    out = capsys.readouterr().out
    assert "| tiny | short (prompt 8) | ours (ort) |" in out
    assert "| tiny | short (prompt 8) | ours (native) |" in out
    assert "mismatch" not in out


def test_bench_peers_reports_a_runner_with_other_tokens_as_a_mismatch(monkeypatch):
    bench = tool("bench_peers")
    wrong = bench.Runner("wrong", lambda folder: lambda prompt, new: [5] * new)
    monkeypatch.setattr(bench, "peers", lambda: ([wrong], {}))
    report = bench.run(["tiny"], 3, 1, 16, None, lambda message: None)
    (workload,) = report["workloads"]
    assert set(workload["mismatch"]) == {"wrong"}
    assert "wrong" not in workload["per_token_s"]
    assert "mismatch: other tokens" in bench.table(report)


def test_bench_interpreter_runs(upstream_dir, capsys):
    bench = tool("bench_interpreter")
    code = bench.main(["--package", str(upstream_dir / "decoder"), "--tokens", "4",
                       "--samples", "1", "--rounds", "1"])  # fmt: skip
    assert code in (0, 1)  # 1: the target not met on this machine, which a benchmark may say
    assert "ratio" in capsys.readouterr().out


@pytest.mark.parametrize("samples", [1])
def test_bench_native_runs(upstream_dir, capsys, samples):
    bench = tool("bench_native")
    assert bench.main(["--upstream", str(upstream_dir), "--samples", str(samples)]) == 0
    assert "native within 3x of ORT on the decoder" in capsys.readouterr().out


def test_bench_speculative_runs(capsys):
    bench = tool("bench_speculative")
    assert bench.main(["--new-tokens", "8", "--rounds", "1", "--width", "2"]) == 0
    out = capsys.readouterr().out
    assert "| block/high |" in out and "| chained/low |" in out and "| lowered/low |" in out
    assert "| NO |" not in out


def test_bench_batching_runs(capsys):
    bench = tool("bench_batching")
    code = bench.main(["--requests", "3", "--new-tokens", "3", "--samples", "1", "--slots", "2",
                       "--executors", "ort"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out  # 1 would mean the served tokens differ from the one-by-one tokens
    assert "| ort | slots 2 |" in out
    assert "mismatch" not in out


def test_bench_batching_reports_other_tokens_as_a_mismatch(monkeypatch, capsys):
    bench = tool("bench_batching")
    monkeypatch.setattr(bench, "batched", lambda engine, requests, slots: (1.0, [[0]] * 3))
    code = bench.main(["--requests", "3", "--new-tokens", "2", "--samples", "1", "--slots", "2",
                       "--executors", "ort"])  # fmt: skip
    assert code == 1
    assert "mismatch: other tokens" in capsys.readouterr().out
