"""Every load-time rule code is refused, exactly, by at least one mutation of a valid package."""

from __future__ import annotations

import pytest

from conformance.cases.catalogue import catalogue
from conformance.cases.load_rules import BASES, MUTATIONS, VARIANTS
from fixtures import package_path
from reference_runtime.package import validate_package
from reference_runtime.package.rules.catalogue import LOAD_RULES, RULES
from reference_runtime.package.rules.enforcement import Site, describe, enforcement_sites


@pytest.mark.parametrize("base", BASES)
def test_base_package_is_valid(base):
    assert validate_package(package_path(base)) == []


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.ident)
def test_variant_is_valid(variant, tmp_path):
    violations = validate_package(variant.materialise(tmp_path))
    assert violations == [], "\n".join(map(str, violations))


def test_variants_are_valid_edits_of_known_bases_each_named_once():
    assert {v.base for v in VARIANTS} <= set(BASES)
    assert all(v.ops for v in VARIANTS)
    idents = [v.ident for v in VARIANTS]
    assert len(idents) == len(set(idents)), sorted(i for i in idents if idents.count(i) > 1)


def test_case_ids_are_unique():
    ids = [case.id for case in catalogue()]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.ident)
def test_mutation_is_refused_with_its_code(mutation, tmp_path):
    root = mutation.materialise(tmp_path)
    violations = validate_package(root)
    report = "\n".join(map(str, violations)) or "(no violations)"
    assert {v.code for v in violations} == {mutation.code, *mutation.also}, report
    assert mutation.location in [v.location for v in violations], report


def test_every_rule_code_has_a_negative_test():
    covered = {m.code for m in MUTATIONS}
    missing = sorted(set(LOAD_RULES) - covered)
    assert not missing, f"rule codes without a mutation: {missing}"


def test_mutations_only_use_known_codes_and_bases():
    assert {m.code for m in MUTATIONS} | {c for m in MUTATIONS for c in m.also} <= set(RULES)
    assert {m.base for m in MUTATIONS} <= set(BASES)


def test_every_rule_code_has_an_enforcement_site():
    sites = enforcement_sites()
    missing = sorted(code for code in RULES if not sites[code])
    assert not missing, f"rule codes reported nowhere in the code or the schema: {missing}"


def test_enforcement_sites_name_functions_and_schema_fields():
    sites = enforcement_sites()
    assert Site("package/rules/scope.py", "Names.use") in sites["B13"]
    assert Site("package/rules/loops.py", "_check_max_iterations") in sites["D30"]
    assert Site("package/revisions.py", "select") in sites["A94"]  # Violation("A94", ...)
    assert Site("schema", "WorkflowStep::Branch.cases") in sites["D35"]  # x-rule
    assert Site("schema", "WorkflowBranchOutput.default") in sites["D36"]
    assert describe((Site("schema", "T.a"), Site("m.py", "f"), Site("schema", "T.b"))) == (
        "Enforced in: `m.py` (`f`); schema (`T.{a, b}`)"
    )
