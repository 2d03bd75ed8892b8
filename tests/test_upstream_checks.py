"""The semantic-checks crosswalk: the upstream loader's checks (``validation.rs``) against our
rule catalogue.

Every check the upstream loader makes (read by ``upstream_checks.py``) is accounted for exactly
once: either in the ``upstream`` notes of the load-time rule that makes it, or in
``UPSTREAM_NOT_COVERED`` with the reason it is not (a gap to close, a deliberate departure, or
a check of upstream's own compiled form). A check upstream adds, renames or drops fails here
until the catalogue says where it stands.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from reference_runtime.package.rules.catalogue import (
    RULE_LIST,
    RULES,
    RUN_RULE_LIST,
    UPSTREAM_NOT_COVERED,
)
from tests.conftest import SHARED
from tests.upstream_checks import check_id, normalise, read_checks, split_id

VALIDATION_RS = SHARED / "spec" / "upstream" / "validation.rs"

ID = re.compile(r"^[a-z_][a-z0-9_]*: \S(.*\S)?$")
SUFFIX = re.compile(r" #([0-9]+)$")
REASON = re.compile(r"^(gap|departure|internal): \S")
PROPOSED = re.compile(r"\bproposed ([A-H][0-9]{2})\b")


@pytest.fixture(scope="module")
def upstream_checks():
    if not VALIDATION_RS.is_file():
        pytest.skip(
            f"the format's upstream source ({VALIDATION_RS}) is absent; set ONNX_GENAI_SHARED"
        )
    return read_checks(VALIDATION_RS)


def _noted() -> list[str]:
    """Every id the catalogue lists: the rules' notes, then the checks no rule makes."""
    return [i for rule in (*RULE_LIST, *RUN_RULE_LIST) for i in rule.upstream] + list(
        UPSTREAM_NOT_COVERED
    )


# ---------------------------------------------------------------------- the reader


def test_reader_finds_every_upstream_check(upstream_checks):
    ids = [c.ident for c in upstream_checks]
    assert len(ids) > 250
    assert len(set(ids)) == len(ids)
    for known in (
        "validate_workflow: workflow component name is invalid: '{}'",
        "validate_runtime_dtype: {} declares rank {} but has {} shape dimensions",
        "validate_workflow_node: {} emits undeclared output '{}'",
        "require_workflow_value: {} references value '{}' before definition",
        # joined across a Rust line continuation
        "validate_state_update: state service group '{}' uses a sequence update but declares "
        "no sequence_axis",
        # the same template twice in one function
        "validate_adapter_service: {}.rank must be greater than zero when present",
        "validate_adapter_service: {}.rank must be greater than zero when present #2",
        # reported by `validate` itself, not through errors.push
        "validate_structure_and_capabilities: {}",
    ):
        assert known in ids, known
    for check in upstream_checks:
        assert ID.match(check.ident), check.ident
        assert check.ident.startswith(check_id(check.function, check.template))
        assert "  " not in check.template and "\n" not in check.template
        assert not re.search(r"\{[^}]", check.template.replace("{}", "")), check.template


def test_reader_normalises_rust_literals(tmp_path):
    source = tmp_path / "validation.rs"
    source.write_text(
        '// errors.push(format!("a comment {x}"));\n'
        "fn outer(errors: &mut Vec<String>) {\n"
        "    let slash = '/'; let brace = '{';\n"
        "    fn inner<'a>(path: &'a str, errors: &mut Vec<String>) {\n"
        '        errors.push(format!("{path} is \\\n'
        '                             bad: {:?}  {value:?}", 1));\n'
        "    }\n"
        '    errors.push("plain {not a placeholder}".to_string());\n'
        '    errors.push(format!("{path} is bad: {:?} {}", 1, 2));\n'
        '    /* errors.push(format!("nested /* comment */ {x}")); */\n'
        '    let raw = r#"errors.push("inside a raw string")"#;\n'
        '    errors.push(format!(r"raw \\n {x}"));\n'
        "}\n",
        encoding="utf-8",
    )
    checks = read_checks(source)
    assert [c.ident for c in checks] == [
        "inner: {} is bad: {} {}",
        "outer: plain {not a placeholder}",
        "outer: {} is bad: {} {}",
        "outer: raw \\n {}",  # a raw string keeps its backslash
    ]
    assert [c.line for c in checks] == [5, 8, 9, 12]


def test_normalise_collapses_space_and_placeholders():
    assert normalise("  a {path}\n  b {:?} {{literal}} ") == "a {} b {} {{literal}}"
    assert split_id("fn_name: a: b #2") == ("fn_name", "a: b #2")


# ---------------------------------------------------------------------- the crosswalk


def test_catalogue_notes_are_well_formed():
    """Checked without the upstream source: ids have the reader's form, are listed once, only
    load-time rules carry them, and every reason says what kind of difference it is."""
    noted = _noted()
    twice = sorted(i for i, n in Counter(noted).items() if n > 1)
    assert not twice, f"listed more than once: {twice}"
    for ident in noted:
        assert isinstance(ident, str) and ID.match(ident), ident
        function, template = split_id(ident)
        assert template == normalise(template), ident
        assert not re.search(r"\{[^}]", template.replace("{}", "")), ident
        suffix = SUFFIX.search(template)
        assert suffix is None or int(suffix.group(1)) >= 2, ident
    for rule in RUN_RULE_LIST:
        assert not rule.upstream, (
            f"{rule.code} is a run-time rule: an upstream load-time check it catches only at "
            "run time belongs in UPSTREAM_NOT_COVERED"
        )
    for ident, reason in UPSTREAM_NOT_COVERED.items():
        assert isinstance(reason, str) and REASON.match(reason), (ident, reason)
        assert "\n" not in reason and "  " not in reason, reason
        if reason.startswith("gap:"):
            proposed = PROPOSED.findall(reason)
            assert proposed, f"a gap names the code it should be refused with: {ident}"
            assert set(proposed) <= set(RULES), reason


def test_every_upstream_check_is_accounted_for(upstream_checks):
    extracted = {c.ident for c in upstream_checks}
    noted = set(_noted())
    missing = sorted(extracted - noted)
    stale = sorted(noted - extracted)
    assert not missing, (
        "upstream checks the catalogue does not place (add each to the `upstream` notes of the "
        "rule that makes it, or to UPSTREAM_NOT_COVERED with a reason):\n  " + "\n  ".join(missing)
    )
    assert not stale, (
        "catalogue notes that name no upstream check (renamed or removed upstream):\n  "
        + "\n  ".join(stale)
    )


def test_coverage_counts(upstream_checks):
    total = len(upstream_checks)
    covered = sum(len(rule.upstream) for rule in RULE_LIST)
    kinds = Counter(reason.split(":", 1)[0] for reason in UPSTREAM_NOT_COVERED.values())
    print(
        f"\nupstream checks: {total}; covered by load-time rules: {covered}; not covered: "
        + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    )
    assert covered + sum(kinds.values()) == total
    assert covered > total // 2
