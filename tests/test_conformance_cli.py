"""The ``conformance`` command line: every mistake is a paragraph and an exit status, never a
traceback; everything is checked before the first case runs; Ctrl-C writes a partial report;
``list`` and ``show`` reproduce cases."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.cli import main

ROOT = Path(__file__).resolve().parents[1]


def call(argv, capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # --help / --version print and exit 0
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv, code, says",
    [
        (["certify", "--runtime", "foo"], 2, "unknown runtime 'foo'"),
        (["certify", "--runtime", "python:nonexistent_module:make"], 2, "cannot import module"),
        (["certify", "--runtime", "python:json:no_such_factory"], 2, "no_such_factory"),
        (["certify", "--runtime", "python:onlytwo"], 2, "python:MODULE:FACTORY"),
        (["certify", "--runtime", "exec:no-such-binary-anywhere"], 2, "cannot start the command"),
        (["certify", "--runtime", "exec:false", "--suite", "acceptance"], 1, "did not start"),
        (["certify", "--runtime", "python:os:getcwd", "--suite", "acceptance"], 1,
         "did not describe itself"),
        (["certify", "--runtime", "reference", "--suite", "nosuch"], 2, "no suite 'nosuch'"),
        (["certify", "--runtime", "reference", "-k", "no-such-case-at-all"], 2, "no case matches"),
        (["certify", "--runtime", "reference", "--jobs", "0"], 2, "--jobs"),
        (["certify", "--runtime", "reference", "--expectations", "no/such.yaml"], 2,
         "cannot read it"),
        (["certify"], 2, "--runtime"),
        (["show", "acceptance/kv_decode", "--dest", "x"], 2, "did you mean acceptance/kv_decoder"),
        (["list", "--suite", "nosuch"], 2, "no suite"),
        (["nosuch"], 2, "invalid choice"),
        ([], 2, "required"),
    ],
)  # fmt: skip
def test_each_mistake_is_one_paragraph_and_an_exit_status(argv, code, says, capsys, tmp_path,
                                                          monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    got, out, err = call(argv, capsys)
    assert got == code, err
    assert says in err
    assert "Traceback" not in out + err
    assert err.count("\n") <= 2, err  # one paragraph (argparse adds its usage line)


def test_unreadable_expectations_and_report_dir_are_refused_before_any_case(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [unclosed\n")
    code, _, err = call(["certify", "--runtime", "reference", "--expectations", str(bad)], capsys)
    assert code == 2 and "not valid YAML at line" in err
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("some/case: {reason: x, kind: nonsense}\n")
    code, _, err = call(["certify", "--runtime", "reference", "--expectations", str(wrong)], capsys)
    assert code == 2 and "kind 'nonsense'" in err
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = call(["certify", "--runtime", "python:os:getcwd", "--report-dir",
                         str(blocker / "reports")], capsys)  # fmt: skip
    assert code == 2 and "cannot write reports there" in err  # before the runtime is opened


RUNTIMES = ["foo", "python:", "python:nonexistent_module:x", "python:os:getcwd", "exec:",
            "exec:no-such-binary-anywhere", "reference:bogus", "reference:native:plain:x"]  # fmt: skip
WORDS = st.one_of(
    st.sampled_from(["certify", "list", "show", "--runtime", "--suite", "-k", "--jobs",
                     "--expectations", "--report-dir", "--strict", "--json", "--dest", "--force",
                     "--version", "acceptance", "golden", "nosuch", "0", "-1", "1" * 30]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
)  # fmt: skip


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    command=st.sampled_from(["certify", "list", "show", "--version", "nosuch"]),
    words=st.lists(WORDS, max_size=6),
    runtime=st.sampled_from(RUNTIMES),
)
def test_hostile_arguments_never_give_a_traceback(command, words, runtime, capsys, tmp_path):
    argv = [command, *words]
    # Never a real runtime or an arbitrary program; folders only under tmp_path.
    argv = [runtime if a.startswith(("exec:", "python:", "reference")) else a for a in argv]
    argv = [a.replace("/", "_") for a in argv]
    for i, a in enumerate(argv[:-1]):
        if a in ("--runtime",):
            argv[i + 1] = runtime
        if a in ("--dest", "--report-dir", "--expectations"):
            argv[i + 1] = str(tmp_path / argv[i + 1].replace("\x00", ""))
    if command == "certify" and "--runtime" not in argv:
        argv += ["--runtime", runtime]
    if command == "show" and "--dest" not in argv:
        argv += ["--dest", str(tmp_path / "dest")]
    code, out, err = call(argv, capsys)
    assert code in (0, 1, 2), (argv, err)
    assert "Traceback" not in out + err, argv


def test_list_selects_by_suite_and_pattern(capsys):
    code, out, _ = call(["list", "--suite", "golden", "-k", "session_counter", "--json"], capsys)
    assert code == 0
    rows = json.loads(out)
    assert rows and all(r["suite"] == "golden" and "session_counter" in r["id"] for r in rows)
    code, out, _ = call(["list", "-k", "golden/session_counter/*_runs"], capsys)
    assert code == 0 and "golden/session_counter/three_runs" in out


def test_show_writes_what_reproduces_a_run_case(tmp_path, capsys):
    dest = tmp_path / "case"
    case_id = "golden/session_counter/three_runs"
    assert call(["show", case_id, "--dest", str(dest)], capsys)[0] == 0
    assert {p.name for p in dest.iterdir()} >= {
        "package", "case.json", "requests.json", "expected.json", "reproduce.py", "reproduce.sh"
    }  # fmt: skip
    assert json.loads((dest / "case.json").read_text())["id"] == case_id
    expected = json.loads((dest / "expected.json").read_text())
    assert expected["case"] == "session_counter/three_runs"
    run = subprocess.run([sys.executable, "reproduce.py"], cwd=dest, capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert [line.split()[-1] for line in run.stdout.splitlines() if "count:" in line] == [
        "dtype=int64)"
    ] * 3
    assert "array([3]" in run.stdout  # the third run of one session counts 3
    # A non-empty folder is refused, unless --force.
    code, _, err = call(["show", case_id, "--dest", str(dest)], capsys)
    assert code == 2 and "not empty" in err
    (dest / "mine.txt").write_text("kept")
    assert call(["show", case_id, "--dest", str(dest), "--force"], capsys)[0] == 0
    assert (dest / "mine.txt").read_text() == "kept"


def test_show_saves_request_inputs_as_npy(tmp_path, capsys):
    from conformance.cases.catalogue import catalogue

    case = next(
        c for c in catalogue() if c.suite == "golden" and c.run and c.run.requests[0].get("inputs")
    )
    dest = tmp_path / "case"
    assert call(["show", case.id, "--dest", str(dest)], capsys)[0] == 0
    name, value = next(iter(case.run.requests[0]["inputs"].items()))
    assert np.array_equal(np.load(dest / "requests" / "0" / f"{name}.npy"), value)
    assert f"--input '{name}=@requests/0/{name}.npy'" in (dest / "reproduce.sh").read_text()


def test_show_writes_a_drafted_case_with_its_draft_and_ragged_prompt(tmp_path, capsys):
    dest = tmp_path / "case"
    case_id = "drafted/genai_decoder+genai_draft/greedy_ragged_batch"
    assert call(["show", case_id, "--dest", str(dest)], capsys)[0] == 0
    assert (dest / "draft" / "genai_config.json").is_file()
    assert json.loads((dest / "case.json").read_text())["options"] == {"draft": "draft"}
    script = (dest / "reproduce.sh").read_text()
    assert "--prompt '[[5,6,7],[9],[10,11,12,13,14,15]]'" in script  # rows of three lengths
    assert "--draft draft --json" in script
    run = subprocess.run([sys.executable, "reproduce.py"], cwd=dest, capture_output=True,
                         text=True, check=True)  # fmt: skip
    want = json.loads((dest / "expected.json").read_text())["results"][0]["tokens"]
    assert f"tokens {want}" in run.stdout


def test_python_dash_m_and_version():
    run = subprocess.run([sys.executable, "-m", "conformance", "--version"], cwd=ROOT,
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0 and run.stdout.startswith("conformance ")


def _as_from_a_terminal():
    """In the child, before it runs: SIGINT as a shell started from a terminal leaves it (the
    default action, unblocked), whatever this test process inherited or a library loaded into
    it set."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_writes_a_partial_report_and_exits_130(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "conformance", "certify", "--runtime", "reference", "--jobs", "1",
         "--report-dir", str(tmp_path)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_as_from_a_terminal,
    )  # fmt: skip
    for line in process.stderr:  # the first progress line: cases are running
        if line.startswith("["):
            break
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in out + err
    assert "interrupted" in err
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["interrupted"] is True
    assert 0 < len(report["cases"]) < report["selected"]
    assert [p["kind"] for p in report["problems"]] == ["interrupted"]
