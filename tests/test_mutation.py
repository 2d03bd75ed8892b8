"""The suite has teeth: mutants of the reference runtime (tools/mutation.py, from outside the
runtime) must fail certification.

The CI sample (tools/mutation_floor.yaml: generated mutants pinned by id, plus every
hand-written one) is certified here, and its kill rate must not fall below the committed floor;
``python tools/mutation.py`` runs the whole set and writes the report."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conformance.cases.catalogue import catalogue
from conformance.certify import certify

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("mutation_tool", ROOT / "tools" / "mutation.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


mutation = _tool()
PACKAGE_DIR = ROOT / "reference_runtime"


@pytest.fixture(scope="module")
def everything():
    """Every mutant of the whole runtime, hand-written ones included."""
    return mutation.generate(PACKAGE_DIR, ("",), mutation.OPERATORS, True)


def points(source: str) -> list[tuple[str, str, str]]:
    """(operator, the replaced text, its replacement) for each mutation point of ``source``."""
    finder = mutation._Finder(source)
    return [(op, ast.unparse(node), replacement) for node, replacement, op, *_ in finder.points]


SNIPPET = '''
"""A module docstring: never mutated."""
LIMIT: int = 3


def f(x: int, y: list[int] = None) -> bool:
    """A docstring."""
    if x < 0:
        raise ValueError("negative")
    y.append(x + 1)
    total = sum(y[1:x])
    return not (x == "a" and total)
'''


def test_a_searched_string_becomes_one_nothing_is_in():
    """``"iu"`` searched in: a string of other letters could still hold ``"i"`` (the mutant
    would change nothing); the empty string holds no kind letter. A string searched for
    becomes one no text holds."""
    found = points('def g(k, line):\n    return k in "iu" or "\\t" not in line\n')
    assert ("constant", "'iu'", "''") in found
    assert ("constant", "'\\t'", repr(mutation.NOTHING_EQUALS)) in found
    assert ("constant", "'iu'", repr(mutation.NOTHING_EQUALS)) not in found


def test_the_generator_mutates_code_never_annotations_or_docstrings():
    found = points(SNIPPET)
    ops = {op for op, *_ in found}
    assert ops == {"arithmetic", "comparison", "boolean", "constant", "off_by_one",
                   "removed_statement", "removed_check"}  # fmt: skip
    assert ("comparison", "x < 0", "(x <= 0)") in found
    assert ("removed_check", "x < 0", "False") in found
    assert ("removed_statement", "y.append(x + 1)", "pass") in found
    assert ("arithmetic", "x + 1", "(x - 1)") in found
    assert ("off_by_one", "x", "(x + 1)") in found
    assert ("constant", "3", "4") in found
    assert ("constant", "'a'", repr(mutation.NOTHING_EQUALS)) in found
    assert ("boolean", "not (x == 'a' and total)", "(x == 'a' and total)") in found
    touched = " ".join(text for _, text, _ in found)
    assert "int" not in touched.split() and "docstring" not in touched and "list" not in touched


def test_the_schema_keywords_of_a_model_field_are_never_mutated():
    found = points(
        "@dataclass(frozen=True)\n"
        "class C(Node):\n"
        "    n: int = fld(16, rule='G64', schema={'minimum': 0})\n"
        "    m: Any = fld(None, any_schema={'minItems': 1})\n"
    )
    assert sorted((op, text) for op, text, _ in found) == [("constant", "16"), ("constant", "True")]


def test_mutant_ids_are_unique_and_stable(everything):
    first = everything
    second = mutation.generate(PACKAGE_DIR, ("",), mutation.OPERATORS, True)
    ids = [m.id for m in first]
    assert len(ids) == len(set(ids)) > 1000
    assert ids == [m.id for m in second]
    for m in first[:: max(1, len(first) // 50)]:
        original = (PACKAGE_DIR / m.file).read_text()
        assert m.source != original
        ast.parse(m.source)  # every mutant is a valid program


def test_the_sample_is_seeded_and_keeps_every_hand_written_mutant(everything):
    a = mutation.sample(everything, 20, 7)
    assert [m.id for m in a] == [m.id for m in mutation.sample(everything, 20, 7)]
    assert [m.id for m in a] != [m.id for m in mutation.sample(everything, 20, 8)]
    hand = [m for m in a if m.operator == "hand_written"]
    assert len(a) == 20 + len(hand) and len(hand) == len(mutation.HAND_WRITTEN)
    # Dropping a mutant from the pool leaves the others' selection alone.
    dropped = next(m for m in a if m.operator != "hand_written")
    rest = mutation.sample([m for m in everything if m is not dropped], 19, 7)
    assert {m.id for m in rest} == {m.id for m in a} - {dropped.id}


def test_every_hand_written_mutant_applies_and_names_a_catching_case():
    ids = {c.id for c in catalogue()}
    mutants = mutation.generate(PACKAGE_DIR, ("",), ("hand_written",), True)
    assert [m.id for m in mutants] == [f"hand:{h.name}" for h in mutation.HAND_WRITTEN]
    for fault, m in zip(mutation.HAND_WRITTEN, mutants, strict=True):
        assert fault.caught_by[1] in ids, f"{fault.name}: no case {fault.caught_by[1]}"
        assert m.source.count(fault.new) >= 1 and fault.old not in m.source.replace(fault.new, "")


def test_a_hand_written_mutant_that_no_longer_applies_is_refused(monkeypatch):
    stale = mutation.HandWritten("stale", "sessions.py", "no such code", "x", "stale", ("", ""))
    monkeypatch.setattr(mutation, "HAND_WRITTEN", (stale,))
    with pytest.raises(mutation.MutationError, match="occurs 0 times"):
        mutation.generate(PACKAGE_DIR, ("",), ("hand_written",), True)


def _sources(mutants):
    return {f: (PACKAGE_DIR / f).read_text() for f in {m.file for m in mutants}}


def test_the_equivalent_mutants_are_mutants_each_with_a_reason(everything):
    equivalent = mutation.read_equivalent(mutation.EQUIVALENT_FILE)
    ids = {m.id for m in everything}
    stale = sorted(set(equivalent) - ids)
    assert not stale, f"tools/mutation_equivalent.yaml lists mutants that no longer exist: {stale}"
    assert all(entry.why.strip() and entry.judged_on for entry in equivalent.values())


def test_each_equivalent_names_the_change_it_was_judged_on(everything):
    """Mutant ids are positional: when code changes, an entry's id can name another mutant,
    which must be judged again."""
    equivalent = mutation.read_equivalent(mutation.EQUIVALENT_FILE)
    problems = mutation.drifted_equivalents(equivalent, everything, _sources(everything))
    assert not problems, "\n".join(problems)


def test_an_equivalent_whose_id_names_another_change_is_refused(everything, tmp_path):
    """An entry judged on one change whose id now names another (the code moved under it)
    makes the tool refuse to run, naming the entry and asking for it to be re-judged."""
    equivalent = mutation.read_equivalent(mutation.EQUIVALENT_FILE)
    mid = next(iter(equivalent))
    by_id = {m.id: m for m in everything}
    # As if the entry had been judged on the next mutant of its module (before code moved).
    other = next(m for m in everything if m.file == by_id[mid].file and m.id != mid)
    judged = mutation.judged_text((PACKAGE_DIR / other.file).read_text(), other)
    drifted = {mid: mutation.Equivalent(equivalent[mid].why, judged)}
    assert drifted[mid].judged_on != equivalent[mid].judged_on
    (problem,) = mutation.drifted_equivalents(drifted, everything, _sources(everything))
    assert repr(mid) in problem and "re-judge it" in problem and "--pin" in problem
    # The tool refuses to run with such an entry (exit status 2, the problem on stderr).
    path = tmp_path / "mutation_equivalent.yaml"
    entry = mutation.pin(by_id[mid], (PACKAGE_DIR / by_id[mid].file).read_text(), "judged")
    path.write_text(entry.replace("judged_on:", "judged_on:\n    - '+not this change'", 1))
    code = (
        "import sys, importlib.util; from pathlib import Path; "
        "spec = importlib.util.spec_from_file_location('m', sys.argv[1]); "
        "m = importlib.util.module_from_spec(spec); sys.modules['m'] = m; "
        "spec.loader.exec_module(m); m.EQUIVALENT_FILE = Path(sys.argv[2]); "
        "sys.exit(m.main(['--list', '--target', sys.argv[3]]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "tools" / "mutation.py"), str(path),
         by_id[mid].file],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert repr(mid) in done.stderr and "re-judge it" in done.stderr


def test_pin_prints_an_entry_the_equivalents_file_reads(everything, tmp_path):
    m = next(m for m in everything if m.operator == "comparison")
    path = tmp_path / "eq.yaml"
    path.write_text(mutation.pin(m, (PACKAGE_DIR / m.file).read_text(), "because") + "\n")
    (entry,) = mutation.read_equivalent(path).values()
    assert entry.why == "because"
    assert entry.judged_on == mutation.judged_text((PACKAGE_DIR / m.file).read_text(), m)
    assert [line[0] for line in entry.judged_on if line[0] != " "] == ["-", "+"]
    assert not mutation.drifted_equivalents({m.id: entry}, everything, _sources(everything))


@pytest.mark.parametrize(
    "text",
    [
        "some/mutant: ''\n",
        "some/mutant: a reason without the change\n",
        "some/mutant: {why: '', judged_on: ['-a', '+b']}\n",
        "some/mutant: {why: reason, judged_on: []}\n",
        "some/mutant: {why: reason, judged_on: ['-a'], extra: 1}\n",
        "- a list\n",
    ],
)
def test_a_malformed_equivalents_file_is_refused(tmp_path, text):
    path = tmp_path / "eq.yaml"
    path.write_text(text)
    with pytest.raises(mutation.MutationError, match="why.*judged_on"):
        mutation.read_equivalent(path)


def test_every_suite_of_the_catalogue_is_tried_by_a_module_group():
    """A suite no group names would certify no mutant: its cases could never kill one."""
    suites = {c.suite for c in catalogue()}
    grouped = {s for _, _, runs in mutation.GROUPS for _, names in runs for s in names}
    assert not suites - grouped, f"suites no group of tools/mutation.py tries: {suites - grouped}"
    assert not grouped - suites, f"GROUPS name suites the catalogue lacks: {grouped - suites}"


@pytest.mark.parametrize(
    ("module", "suite"),
    [
        ("workflow/admission.py", "kv_admission"),
        ("engine.py", "kv_admission"),
        ("sessions.py", "component_sessions"),
        ("executors/ort.py", "component_sessions"),
        ("executors/native/graph.py", "component_sessions"),
        ("workflow/batching.py", "continuous_batching"),
        ("executors/batching.py", "continuous_batching"),
        ("package/runtime_contracts.py", "continuous_batching"),
        ("workflow/interpreter.py", "sampling"),
        ("executors/speculative.py", "golden"),
        ("executors/decoding.py", "sampling"),
        ("workflow/compiled.py", "executor"),  # the invocation counters of the compiled invoke
        ("workflow/interpreter.py", "executor"),  # and of the plain one
    ],
)
def test_the_modules_a_suite_judges_are_certified_by_it(module, suite):
    _, runs = mutation.group_of(module)
    assert any(suite in names for _, names in runs), (module, runs)


def test_an_unknown_target_is_refused():
    with pytest.raises(mutation.MutationError, match="names no module"):
        mutation.target_files(PACKAGE_DIR, ("no_such_module.py",))


def test_the_kill_rate_counts_timeouts_as_killed_and_leaves_out_equivalents():
    def outcome(status):
        return mutation.Outcome("m", "f.py", 1, "constant", "", status)

    outcomes = [outcome(s) for s in ("killed", "timeout", "survived", "equivalent")]
    assert mutation.rate(outcomes) == (2, 3, pytest.approx(2 / 3))


def test_fail_fast_certification_stops_at_the_first_failure():
    cases = [c for c in catalogue() if c.suite == "fail_closed"][:4]
    spec = "python:tests.test_conformance:refuses_everything"
    _, results = certify(spec, {}, 1, None, progress=False, cases=cases, fail_fast=True)
    assert [r.status for r in results] == ["failed"]
    _, results = certify(spec, {}, 1, None, progress=False, cases=cases)
    assert [r.status for r in results] == ["failed"] * 4


NESTED = """
class C:
    def method(self, x):
        def inner(y):
            return y + 1
        return inner(x) * 2


square = lambda v: v * v
LIMIT = 1 + 2
"""


def test_each_mutation_point_knows_its_outermost_function():
    """The warm path patches the code of the outermost function holding a change (a nested
    function's code is a constant of it); module- and class-level code has none."""
    finder = mutation._Finder(NESTED)
    tops = {
        ast.unparse(node): (top, import_time) for node, *_, import_time, _, top in finder.points
    }
    assert tops["y + 1"] == (("method", 3), False)
    assert tops["inner(x) * 2"] == (("method", 3), False)
    assert tops["v * v"] == (("<lambda>", 9), False)
    assert tops["1 + 2"] == (None, True)


def test_a_helper_naming_no_rule_takes_the_rules_of_its_callers():
    source = (
        "def check(x):\n"
        "    if not _flag(x):\n"
        "        add('D32')\n"
        "def _flag(x):\n"
        "    return x is None\n"
        "def other():\n"
        "    return 'E41'\n"
    )
    codes = mutation._rule_codes(source)
    assert codes[1] == codes[4] == {"D32"}
    assert codes[6] == {"E41"}
    assert codes[None] == {"D32", "E41"}


def test_line_ranges_round_trip():
    lines = [1, 2, 3, 7, 9, 10]
    assert mutation._ranges(lines) == "1-3,7,9-10"
    assert mutation._lines(mutation._ranges(lines)) == lines
    assert mutation._lines("") == []


def test_the_control_run_selects_the_cases_that_run_a_mutants_lines():
    """A mutant runs only on the cases that ran one of its lines, cheapest first; on every
    case when its code runs at import or when a runtime opens; on none when no case runs it."""

    class Imported:  # what the warm parent ran at import
        def ran_at_import(self, m):
            return m.span == (1, 1)

    control = mutation.Control(Imported(), print)
    a, b, c = ("s", "a"), ("s", "b"), ("s", "c")
    control.seconds = {a: 3.0, b: 1.0, c: 2.0}
    control.covers["f.py"].update({10: [a, b], 11: [c], 12: [a]})
    control.at_open["f.py"] = {30}

    def mutant(span, import_time=False):
        return mutation.Mutant("m", "f.py", span[0], 0, span[1], "constant", "", "", import_time,
                               None, span=span)  # fmt: skip

    everything = [a, b, c, ("s", "failed in the control run")]
    assert control.select(mutant((10, 10)), everything) == [b, a]
    assert control.select(mutant((11, 12)), everything) == [c, a]
    assert control.select(mutant((11, 11)), [a, b]) == []
    assert control.select(mutant((20, 21)), everything) == []
    assert control.select(mutant((20, 20), import_time=True), everything) == [b, c, a]
    assert control.select(mutant((1, 1)), everything) == [b, a, c]  # a runs lines 10 and 12
    assert control.select(mutant((29, 31)), everything) == [b, c, a]
    # in turn with the cheapest: the cases running the lines near the change that few run
    control.covers["f.py"].update({40: [a, b, c], 45: [a], 60: [c]})
    assert control.select(mutant((40, 40)), everything) == [b, a, c]


def test_the_cases_that_killed_a_neighbour_are_tried_first(monkeypatch):
    """A mutant tries first the cases that killed mutants of its function (latest first), then
    of its module, at most ``HINTS`` of them and only among its own cases; the rest keep their
    order."""
    control = mutation.Control(None, print)
    pairs = [("s", c) for c in "abcdefg"]

    def mutant(file, function):
        return mutation.Mutant("m", file, 1, 0, 1, "constant", "", "", False, function)

    assert control.hinted(mutant("f.py", 10), pairs) == pairs
    control.killed(mutant("f.py", 10), ("s", "e"))
    control.killed(mutant("f.py", 20), ("s", "f"))
    control.killed(mutant("f.py", 10), ("s", "c"))
    control.killed(mutant("g.py", 10), ("s", "g"))
    control.killed(mutant("f.py", 20), ("s", "b"))
    order = "".join(c for _, c in control.hinted(mutant("f.py", 10), pairs))
    assert order == "ceb" + "adfg"  # its function's killers (c, e), then its module's (b)
    monkeypatch.setattr(mutation, "HINTS", 1)
    assert [c for _, c in control.hinted(mutant("f.py", 20), pairs)][:2] == ["b", "a"]
    monkeypatch.undo()
    assert [c for _, c in control.hinted(mutant("f.py", 10), pairs[:2])] == ["b", "a"]
    assert [c for _, c in control.hinted(mutant("h.py", 10), pairs)] == list("abcdefg")


def _run_tool(tmp_path, *args):
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "mutation.py"), "--report-dir", str(tmp_path),
         *args],
        capture_output=True, text=True, cwd=ROOT, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    report = json.loads((tmp_path / "mutation.json").read_text())
    return {m["id"]: m for m in report["mutants"]}, done.stderr


SCATTER = "workflow/scatter.py::check_scatter_bounds::"


def test_the_warm_path_gives_the_cold_paths_verdicts(tmp_path):
    """Patching a function's code into the runtime imported once (warm) certifies a mutant as
    importing its mutated module afresh (cold, ``--cold``) does."""
    sample = ["hand:session_not_saved", "hand:native_falls_back_to_ort",
              SCATTER + "comparison#12", SCATTER + "comparison#4"]  # fmt: skip
    args = [f"--mutant={m}" for m in sample] + [
        "--case=golden/scatter*", "--case=golden/session_counter/*",
        "--case=executor/counting_loop/*", "--no-coverage", "--max-cases=6", "--jobs=2",
    ]  # fmt: skip
    warm, _ = _run_tool(tmp_path / "warm", *args)
    cold, _ = _run_tool(tmp_path / "cold", *args, "--cold")
    verdicts = {m: (warm[m]["status"], warm[m]["case"]) for m in sample}
    assert verdicts == {m: (cold[m]["status"], cold[m]["case"]) for m in sample}
    assert {m: warm[m]["path"] for m in sample} == {
        "hand:session_not_saved": "warm",
        "hand:native_falls_back_to_ort": "cold: module or class level",
        SCATTER + "comparison#12": "warm",
        SCATTER + "comparison#4": "warm",
    }
    assert {cold[m]["path"] for m in sample} == {"cold: --cold"}
    # Both paths can kill: the session is not saved, and the scatter lengths check inverted.
    assert verdicts["hand:session_not_saved"] == ("killed", "golden/session_counter/three_runs")
    assert verdicts[SCATTER + "comparison#12"][0] == "killed"


def test_coverage_runs_only_the_cases_that_execute_a_mutant_and_is_cached(tmp_path):
    """The control run records the lines each case runs: a mutant no case reaches survives at
    no cost; a second run reuses the control run from the report folder."""
    args = ["--target=workflow/scatter.py", "--case=golden/scatter_cache/*", "--jobs=2",
            f"--mutant={SCATTER}comparison#12", f"--mutant={SCATTER}removed_statement#0"]  # fmt: skip
    first, log = _run_tool(tmp_path, *args)
    assert "no cache control-" in log
    (cache,) = tmp_path.glob("control-*.json.gz")
    # `continue`: scatter_cache's one component writes its one group (scatter_pair's skips)
    unreached = first[SCATTER + "removed_statement#0"]
    assert (unreached["status"], unreached["note"], unreached["cases_run"]) == (
        "survived", "no case executes it", 0)  # fmt: skip
    killed = first[SCATTER + "comparison#12"]
    assert killed["status"] == "killed" and killed["case"].startswith("golden/scatter_cache/")
    second, log = _run_tool(tmp_path, *args)
    assert f"reused {cache}" in log
    assert {m: (o["status"], o["case"]) for m, o in second.items()} == {
        m: (o["status"], o["case"]) for m, o in first.items()
    }


def test_each_case_records_the_cached_computations_it_needs(tmp_path):
    """ONNX Runtime's operator registry is computed once a process (``functools.cache``): the
    control run clears it before each case, so the case that needs it last (an operator set
    imported past the newest version, the one the mutant stops checking) records its lines
    too, not only the first case of the process, and is a candidate for the mutant."""
    registry = "package/ort_operators.py::_registry::removed_statement#1"
    got, _ = _run_tool(tmp_path, "--target=package/ort_operators.py", f"--mutant={registry}",
                       "--case=fail_closed/C125-kv_decoder-com.microsoft_*", "--jobs=1")  # fmt: skip
    assert (got[registry]["status"], got[registry]["case"]) == (
        "killed",
        "fail_closed/C125-kv_decoder-com.microsoft_imported_beyond_its_newest_version",
    )


def test_the_ci_sample_kill_rate_holds_the_floor(tmp_path):
    """Certifies the committed sample's mutants (a subprocess: the tool imports its own copy of
    the runtime) and compares the kill rate with the floor, which may only rise."""
    floor = yaml.safe_load(mutation.FLOOR_FILE.read_text())
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "mutation.py"), "--floor",
         "--report-dir", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=900,
    )  # fmt: skip
    report = json.loads((tmp_path / "mutation.json").read_text())
    survivors = [f"{m['id']}: {m['description']}" for m in report["mutants"]
                 if m["status"] == "survived"]  # fmt: skip
    assert report["kill_rate"] >= floor["floor"], (
        f"kill rate {report['kill_rate']} below the floor {floor['floor']}; survivors: {survivors}"
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    by_id = {m["id"]: m for m in report["mutants"]}
    assert set(floor["mutants"]) <= set(by_id)  # the pinned sample, whatever else the code has
    for fault in mutation.HAND_WRITTEN:
        got = by_id[f"hand:{fault.name}"]
        assert (got["status"], got["case"]) == ("killed", fault.caught_by[1]), got
