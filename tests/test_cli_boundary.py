"""The `reference-runtime` command's error boundary: every mistake is a paragraph and an exit
status (2 usage, 1 refused), never a traceback; Ctrl-C exits 130; a closed pipe is quiet;
`--version` and `python -m reference_runtime` work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reference_runtime.cli as cli
from fixtures import package_path
from reference_runtime.cli import main

ROOT = Path(__file__).resolve().parents[1]


def call(argv, capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # pragma: no cover - main never exits; it returns
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


ARITHMETIC = str(package_path("arithmetic_decoder"))
BRANCHING = str(package_path("branching"))


@pytest.mark.parametrize(
    "argv, code, says",
    [
        ([], 2, "required"),
        (["nosuch"], 2, "invalid choice"),
        (["run"], 2, "PKG"),
        (["run", ARITHMETIC, "--bogus"], 2, "unrecognized arguments"),
        (["run", ARITHMETIC, "--executor", "gpu"], 2, "invalid choice"),
        (["run", ARITHMETIC, "--tokens", "[[1]]", "--text", "x"], 2, "were both given"),
        (["run", ARITHMETIC, "--input", "oops"], 2, "is not NAME=VALUE"),
        (["run", ARITHMETIC, "--tokens", "[[1]]", "--indent", "2"], 2, "without --json"),
        (["run", ARITHMETIC, "--json", "--indent", "x"], 2, "--indent"),
        (["run", ARITHMETIC, "--tokens", "[[1]]", "--temperature", "nan"], 1, "--temperature"),
        (["run", ARITHMETIC, "--tokens", "[[1,"], 1, "is not JSON token rows"),
        (["run", "no/such/folder", "--tokens", "[[1]]"], 2, "does not exist"),
        (["inspect", "no/such/folder"], 2, "does not exist"),
        (["lower", ARITHMETIC], 2, "is not a bare decoder"),
        (["lower", "no/such/folder"], 2, "does not exist"),
        (["validate", "no/such/folder"], 2, "does not exist"),
    ],
)  # fmt: skip
def test_each_mistake_is_one_paragraph_and_an_exit_status(argv, code, says, capsys, tmp_path,
                                                          monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    got, out, err = call(argv, capsys)
    assert got == code, err
    assert says in err
    assert "Traceback" not in out + err
    assert "\n\n" not in err.strip() and err.count("\n") <= 3, err  # one paragraph


def test_a_refused_package_lists_its_violations_on_every_command(tmp_path, capsys):
    from conformance.cases.load_rules import MUTATIONS

    mutation = next(m for m in MUTATIONS if m.code == "A03")
    root = str(mutation.materialise(tmp_path))
    for argv in (["run", root, "--tokens", "[[1]]"], ["inspect", root]):
        code, out, err = call(argv, capsys)
        assert code == 1, err
        assert "was refused, 1 violation" in err
        assert mutation.code in err and mutation.location in err and "fix:" in err


def test_debug_shows_the_traceback_of_a_bug_only_when_asked(monkeypatch, capsys):
    def broken(args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(cli, "_capabilities", broken)
    code, out, err = call(["capabilities"], capsys)
    assert code == 3
    assert "internal error (ZeroDivisionError: a bug)" in err and "--debug" in err
    assert "Traceback" not in out + err
    with pytest.raises(ZeroDivisionError):
        main(["--debug", "capabilities"])


def test_ctrl_c_exits_130_without_a_traceback(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.Engine, "from_dir", interrupted)
    code, out, err = call(["run", ARITHMETIC, "--tokens", "[[1]]"], capsys)
    assert code == 130
    assert err == "reference-runtime: interrupted\n" and out == ""


def test_a_closed_pipe_is_quiet():
    """`reference-runtime capabilities | head -0`: the reader is gone before anything is
    written."""
    read, write = os.pipe()
    os.close(read)
    try:
        run = subprocess.run(
            [sys.executable, "-m", "reference_runtime", "capabilities"],
            cwd=ROOT, stdout=write, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    finally:
        os.close(write)
    assert run.returncode == 1
    assert run.stderr == ""


def test_version_and_python_dash_m():
    run = subprocess.run([sys.executable, "-m", "reference_runtime", "--version"], cwd=ROOT,
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("reference-runtime ") and run.stdout.strip() != (
        "reference-runtime"
    )


# ------------------------------------------------------------------ hostile arguments

PACKAGES = [str(package_path(name)) for name in
            ("arithmetic_decoder", "branching", "counting_loop", "media", "genai_decoder",
             "native_gap", "session_counter")]  # fmt: skip
FLAGS = ["--tokens", "--prompt", "--text", "--input", "--override", "--max-new-tokens", "--seed",
         "--greedy", "--temperature", "--top-k", "--top-p", "--min-p", "--no-stop-on-eos",
         "--json", "--indent", "--out", "--executor", "--device", "--plain", "--debug",
         "--version", "--help"]  # fmt: skip
VALUES = ["[[1,2]]", "[[-1]]", "[[1.5]]", "[]", "[[", "nan", "inf", "1e3", "-5", "0", "3",
          "99999999999999999999", "x=[1]", "start=[1]", "start=@x.npy", "negate=true",
          "mode=[0]", "x=[[1,2]]", "native", "cuda", "sampler=x", "hello"]  # fmt: skip
WORDS = st.one_of(
    st.sampled_from(FLAGS + VALUES),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=10),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    command=st.sampled_from(["run", "inspect", "validate", "lower", "capabilities", "nosuch"]),
    package=st.sampled_from([*PACKAGES, "missing", "file.txt", "empty"]),
    words=st.lists(WORDS, max_size=8),
)
def test_hostile_arguments_never_give_a_traceback(command, package, words, capsys, tmp_path,
                                                  monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)  # relative paths (--out, @file.npy) land under tmp_path
    (tmp_path / "file.txt").write_text("not a package\n")
    (tmp_path / "empty").mkdir(exist_ok=True)
    # no path outside tmp_path and the fixture packages
    words = [w.replace("/", "_").replace("\\", "_").replace("~", "_") for w in words]
    words = [w.replace("..", "__") for w in words]  # never the folder above tmp_path
    argv = [command, package, *words]
    code, out, err = call(argv, capsys)
    assert code in (0, 1, 2), (argv, err)
    assert "Traceback" not in out + err, argv
    if code != 0:
        assert (err + out).strip(), argv  # it says why
