"""Finding and parsing the metadata file: hostile input, discovery, and the report's order."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import yaml

from fixtures import package_path
from reference_runtime.errors import PackageError, UsageError
from reference_runtime.package import load_package, structure, validate_package
from reference_runtime.package.limits import MAX_DEPTH
from reference_runtime.package.parse import parse_metadata
from reference_runtime.package.rules.context import DocumentOrder

YAML = "inference_metadata.yaml"
YML = "inference_metadata.yml"
JSON = "inference_metadata.json"


def write(tmp_path: Path, content: str | bytes, name: str = YAML) -> Path:
    """A package folder holding only a metadata file."""
    root = tmp_path / "pkg"
    root.mkdir(exist_ok=True)
    target = root / name
    if isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(content, encoding="utf-8")
    return root


def copy_base(tmp_path: Path, base: str = "kv_decoder") -> Path:
    root = tmp_path / base
    shutil.copytree(package_path(base), root)
    return root


def codes(violations) -> list[str]:
    return [v.code for v in violations]


def only(violations, code: str):
    (found,) = [v for v in violations if v.code == code]
    return found


def nested_flow(depth: int) -> str:
    return "schema_version: v1\nmodel: " + "{a: " * depth + "1" + "}" * depth + "\n"


def nested_block(depth: int) -> str:
    lines = ["schema_version: v1", "model:"]
    lines += ["  " * (i + 1) + f"k{i}:" for i in range(depth)]
    lines.append("  " * (depth + 1) + "leaf")
    return "\n".join(lines) + "\n"


def billion_laughs(levels: int = 9, fanout: int = 9) -> str:
    lines = ["schema_version: v1", "a0: &a0 [" + ", ".join(['"lol"'] * fanout) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * fanout) + "]")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ duplicate keys


def test_duplicate_yaml_key_is_a76_at_the_key_with_both_lines(tmp_path):
    root = copy_base(tmp_path)
    path = root / YAML
    text = path.read_text()
    original = "model:\n  max_sequence_length: 64\n"
    assert original in text
    text = text.replace(original, original + "  max_sequence_length: 64\n")
    path.write_text(text)
    lines = text.splitlines()
    first = lines.index("  max_sequence_length: 64") + 1
    second = first + 1

    violations = validate_package(root)

    assert codes(violations) == ["A76"], violations
    (v,) = violations
    assert v.location == "model.max_sequence_length"
    assert f"lines {first} and {second}" in v.message
    assert v.hint


def test_duplicate_yaml_key_in_a_nested_list_item(tmp_path):
    root = write(tmp_path, "schema_version: v1\nmodel:\n  x:\n  - {k: 1, k: 2}\n")
    v = only(validate_package(root), "A76")
    assert v.location == "model.x[0].k"
    assert "lines 4 and 4" in v.message


def test_duplicate_json_key_is_a76(tmp_path):
    root = copy_base(tmp_path, "lora")
    path = root / JSON
    text = path.read_text()
    original = '"schema_version": "v1",'
    assert text.count(original) == 1
    path.write_text(text.replace(original, original + ' "schema_version": "v1",'))

    violations = validate_package(root)

    assert codes(violations) == ["A76"], violations
    assert violations[0].location == "schema_version"
    assert "twice" in violations[0].message


# ------------------------------------------------------------------ hostile documents


def test_billion_laughs_is_refused_quickly(tmp_path):
    root = write(tmp_path, billion_laughs())
    start = time.perf_counter()
    violations = validate_package(root)
    elapsed = time.perf_counter() - start
    assert codes(violations) == ["A99"], violations
    assert "expands" in violations[0].message
    # A hang, not a speed target: generous enough for a loaded CI machine.
    assert elapsed < 10, f"took {elapsed:.2f}s"


def test_a_small_alias_bomb_where_it_is_validated_is_refused_quickly(tmp_path):
    # 9**6 = 531441 list items inside an input default, which the schema validator descends
    # into; under the old one-million node limit this 300-byte file took ~30 s to validate.
    root = copy_base(tmp_path)
    path = root / YAML
    flow = "&b0 [" + ", ".join(["1"] * 9) + "]"
    for i in range(1, 6):
        flow = f"&b{i} [{flow}, " + ", ".join([f"*b{i - 1}"] * 8) + "]"
    old = "        required: false\n        default: 4\n"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, f"        required: false\n        default: {flow}\n", 1))
    start = time.perf_counter()
    violations = validate_package(root)
    elapsed = time.perf_counter() - start
    assert codes(violations) == ["A99"], violations
    assert elapsed < 20, f"took {elapsed:.2f}s"  # the old limit made this ~30 s unloaded


@pytest.mark.parametrize(
    "text",
    ["a: &x\n  b: *x\n", "&x [*x]\n", "a: &x\n- 1\n- *x\n"],
    ids=["mapping", "top-level-list", "list"],
)
def test_self_referential_alias_is_a77(tmp_path, text):
    violations = validate_package(write(tmp_path, text))
    assert codes(violations) == ["A77"], violations
    assert "refers to itself" in violations[0].message


@pytest.mark.parametrize("style", ["flow", "block", "json"])
def test_a_document_nested_1000_levels_is_a100(tmp_path, style):
    if style == "json":
        root = write(tmp_path, '{"model": ' + "[" * 1000 + "]" * 1000 + "}", JSON)
    else:
        root = write(tmp_path, nested_flow(1000) if style == "flow" else nested_block(1000))
    violations = validate_package(root)  # no RecursionError
    assert codes(violations) == ["A100"], violations
    assert "nested" in violations[0].message


@pytest.mark.parametrize("name", [YAML, JSON])
def test_depth_limit_counts_levels_exactly(tmp_path, name):
    def doc(depth):  # the innermost list sits `depth` levels below the top mapping
        if name == JSON:
            return '{"model": ' + "[" * depth + "]" * depth + "}"
        return "model: " + "[" * depth + "]" * depth + "\n"

    root = write(tmp_path, doc(MAX_DEPTH), name)
    assert "A100" not in codes(validate_package(root))
    root = write(tmp_path, doc(MAX_DEPTH + 1), name)
    assert codes(validate_package(root)) == ["A100"]


def test_depth_through_aliases_is_counted(tmp_path):
    deep = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    assert "A100" not in codes(validate_package(write(tmp_path, f"a: &d {deep}\nb: *d\n")))
    root = write(tmp_path, f"a: &d {deep}\nb:\n  c:\n    d: *d\n")
    violations = validate_package(root)
    assert codes(violations) == ["A100"], violations
    assert "nested" in violations[0].message


def test_deep_literal_default_does_not_exhaust_the_stack(tmp_path):
    # The schema validator recurses into nested literal lists; at the old depth limit of 200 a
    # 170-deep default raised RecursionError from jsonschema.
    root = copy_base(tmp_path)
    path = root / YAML
    old = "        required: false\n        default: 4\n"
    deep = "[" * 170 + "1" + "]" * 170
    path.write_text(
        path.read_text().replace(old, f"        required: false\n        default: {deep}\n")
    )
    violations = validate_package(root)
    assert codes(violations) == ["A100"], violations


@pytest.mark.parametrize(
    ("text", "words", "code"),
    [
        ("schema_version: " + "9" * 5000 + "\n", "1000 digits", "A102"),
        ("schema_version: 0x" + "f" * 5000 + "\n", "1000 digits", "A102"),
        ("schema_version: 1" + ":0" * 3000 + "\n", "1000 digits", "A102"),
        ("schema_version: 2001-13-45\n", "month", "A77"),
        ("2001-02-30: 1\n", "day is out of range", "A77"),
    ],
    ids=["decimal", "hex", "sexagesimal", "bad-date", "bad-date-key"],
)
def test_unreadable_yaml_values_are_refused_at_their_line(tmp_path, text, words, code):
    violations = validate_package(write(tmp_path, text))
    assert codes(violations) == [code], violations
    assert "line 1" in violations[0].message
    assert words in violations[0].message


def test_huge_json_integer_is_a102(tmp_path):
    root = write(tmp_path, '{"schema_version": ' + "9" * 5000 + "}", JSON)
    violations = validate_package(root)
    assert codes(violations) == ["A102"], violations
    assert "digits" in violations[0].message


# ------------------------------------------------------------------ not a document


@pytest.mark.parametrize(
    "content", ["", "\n\n", "# only a comment\n"], ids=["empty", "blank", "comment"]
)
def test_empty_file_is_a77(tmp_path, content):
    violations = validate_package(write(tmp_path, content))
    assert codes(violations) == ["A77"], violations
    assert "empty" in violations[0].message


def test_empty_json_file_is_a77(tmp_path):
    assert codes(validate_package(write(tmp_path, "", JSON))) == ["A77"]


@pytest.mark.parametrize("content", ["- a\n- b\n", "just a string\n", "42\n", "null\n"])
def test_top_level_must_be_a_mapping(tmp_path, content):
    violations = validate_package(write(tmp_path, content))
    assert codes(violations) == ["A77"], violations
    assert "mapping at the top" in violations[0].message or "empty" in violations[0].message


def test_json_top_level_list_is_a77(tmp_path):
    violations = validate_package(write(tmp_path, "[1, 2]", JSON))
    assert codes(violations) == ["A77"], violations
    assert "mapping at the top" in violations[0].message


@pytest.mark.parametrize("name", [YAML, JSON])
def test_invalid_utf8_is_a77(tmp_path, name):
    violations = validate_package(write(tmp_path, b"schema_version: v1\nmodel: \xff\xfe\n", name))
    assert codes(violations) == ["A77"], violations
    assert "UTF-8" in violations[0].message


def test_invalid_yaml_names_the_line(tmp_path):
    root = write(tmp_path, "schema_version: v1\nmodel:\n  name: a\n   bad: b\n")
    violations = validate_package(root)
    assert codes(violations) == ["A77"], violations
    assert "not valid YAML at line 4" in violations[0].message


def test_invalid_json_names_the_line(tmp_path):
    root = write(tmp_path, '{"schema_version": "v1",\n "model": }\n', JSON)
    violations = validate_package(root)
    assert codes(violations) == ["A77"], violations
    assert "not valid JSON at line 2" in violations[0].message


def test_unsafe_yaml_tags_are_refused(tmp_path):
    root = write(tmp_path, "schema_version: !!python/object/apply:os.system ['true']\n")
    violations = validate_package(root)
    assert codes(violations) == ["A77"], violations


# ------------------------------------------------------------------ non-string keys


def test_unquoted_true_case_key_is_a05_with_a_hint_to_quote_it(tmp_path):
    root = copy_base(tmp_path)
    path = root / YAML
    text = path.read_text()
    assert "          'true':\n" in text
    path.write_text(text.replace("          'true':\n", "          true:\n", 1))

    violations = validate_package(root)

    assert codes(violations) == ["A05"], violations
    (v,) = violations
    assert v.location == "pipeline.workflow.steps[0].setup[1].cases.true"
    assert "'true'" in v.message
    assert "quote" in v.hint.lower()


@pytest.mark.parametrize(
    ("key", "written"), [("~", "null"), ("null", "null"), ("1.5", "1.5"), ("no", "false")]
)
def test_other_non_string_keys_are_a05_and_say_how_to_quote(tmp_path, key, written):
    violations = validate_package(write(tmp_path, f"schema_version: v1\n{key}: 1\n"))
    assert codes(violations) == ["A05"], violations
    assert violations[0].location in (written, f'["{written}"]')
    assert f"quote it: '{written}'" in violations[0].message


# ------------------------------------------------------------------ discovery


def test_yml_metadata_is_found(tmp_path):
    root = copy_base(tmp_path)
    (root / YAML).rename(root / YML)
    assert validate_package(root) == []
    assert load_package(root).metadata_path.name == YML


def test_json_metadata_is_found(tmp_path):
    root = copy_base(tmp_path)
    document, problems = parse_metadata(root / YAML)
    assert problems == []
    (root / YAML).unlink()
    (root / JSON).write_text(json.dumps(document, indent=2))
    assert validate_package(root) == []
    assert load_package(root).metadata_path.name == JSON


def test_yaml_wins_over_json(tmp_path):
    root = copy_base(tmp_path)
    (root / JSON).write_text("{ this is not json")
    assert validate_package(root) == []
    assert load_package(root).metadata_path.name == YAML


def test_yaml_is_read_even_when_a_valid_json_sits_beside_it(tmp_path):
    root = copy_base(tmp_path)
    document, _ = parse_metadata(root / YAML)
    (root / JSON).write_text(json.dumps(document))
    (root / YAML).write_text("schema_version: [\n")
    violations = validate_package(root)
    assert codes(violations) == ["A77"], violations
    assert YAML in violations[0].message


def test_yml_wins_over_json(tmp_path):
    root = copy_base(tmp_path)
    (root / YAML).rename(root / YML)
    (root / JSON).write_text("{ this is not json")
    assert validate_package(root) == []


def test_no_metadata_file_is_h74(tmp_path):
    root = tmp_path / "empty"
    root.mkdir()
    violations = validate_package(root)
    assert codes(violations) == ["H74"], violations


# ------------------------------------------------------------------ the report


def plant_two(root: Path) -> None:
    """An A04 near the top and an A01 near the bottom: code order is the reverse of
    document order."""
    path = root / YAML
    text = path.read_text()
    original = "      role: tokens\n"
    assert original in text
    text = text.replace(original, "      role: bogus\n", 1)
    original = "  chat:\n    kind: generation\n"
    assert original in text
    text = text.replace(original, original + "    bogus: 1\n")
    path.write_text(text)


def test_violations_come_back_in_document_order(tmp_path):
    root = copy_base(tmp_path)
    plant_two(root)
    violations = validate_package(root)
    assert [(v.code, v.location) for v in violations] == [
        ("A04", "pipeline.workflow.outputs.tokens.role"),
        ("A01", "profiles.chat.bogus"),
    ]


def test_semantic_violations_come_back_in_document_order(tmp_path):
    # Two dangling references found by the rules (not the schema), planted so that the late one
    # is in a section the rules visit first.
    root = copy_base(tmp_path)
    path = root / YAML
    text = path.read_text()
    text = text.replace("        initializer: setup.present\n", "        initializer: nowhere.a\n")
    text = text.replace("      continue_when: package.once\n", "      continue_when: nowhere.b\n")
    path.write_text(text)
    violations = validate_package(root)
    assert violations, "the planted dangling references were accepted"
    document, _ = parse_metadata(path)
    order = DocumentOrder(document)
    keys = [order(v.path) for v in violations]
    assert keys == sorted(keys), [str(v) for v in violations]
    locations = [v.location for v in violations]
    early = [i for i, loc in enumerate(locations) if loc.startswith("pipeline.workflow.state")]
    late = [i for i, loc in enumerate(locations) if loc.startswith("pipeline.workflow.steps[1]")]
    assert early and late, locations
    assert max(early) < min(late)


def test_the_report_is_deterministic(tmp_path):
    root = copy_base(tmp_path)
    plant_two(root)
    (root / "model.onnx").write_bytes(b"not a model")
    first = [v.to_json() for v in validate_package(root)]
    second = [v.to_json() for v in validate_package(root)]
    assert first == second
    with pytest.raises(PackageError) as one:
        load_package(root)
    with pytest.raises(PackageError) as two:
        load_package(root)
    assert str(one.value) == str(two.value)
    assert [v.to_json() for v in one.value.violations] == first


def test_many_violations_sort_in_linear_time(tmp_path):
    # Sorting violations by document position once looked each key up in a list: quadratic.
    # Compare 2000 and 20000 violations: linear work grows ~10x, quadratic ~100x. A ratio is
    # robust to how loaded the machine is; an absolute bound is not.
    def timed(n: int) -> float:
        (tmp_path / str(n)).mkdir()
        root = write(tmp_path / str(n), "".join(f"k{i}: 1\n" for i in range(n)))
        start = time.perf_counter()
        violations = validate_package(root)
        elapsed = time.perf_counter() - start
        assert len(violations) == n
        assert [v.location for v in violations[:3]] == ["k0", "k1", "k2"]
        assert violations[-1].location == f"k{n - 1}"
        return elapsed

    small, large = timed(2_000), timed(20_000)
    assert large / small < 40, f"{small:.2f}s for 2000, {large:.2f}s for 20000"


# ------------------------------------------------------------------ usage errors


@pytest.mark.parametrize("function", [validate_package, load_package])
def test_missing_path_is_a_usage_error(tmp_path, function):
    with pytest.raises(UsageError, match="does not exist"):
        function(tmp_path / "nowhere")


@pytest.mark.parametrize("function", [validate_package, load_package])
def test_file_path_is_a_usage_error(tmp_path, function):
    root = copy_base(tmp_path)
    with pytest.raises(UsageError, match="not a folder"):
        function(root / YAML)


@pytest.mark.parametrize("value", ["[v1]", "{v: 1}"])
def test_a_list_or_mapping_where_a_vocabulary_word_is_expected_is_a04(tmp_path, value):
    # The schema reports enum failures; looking the value up among removed values must not
    # hash it (TypeError: unhashable type).
    root = copy_base(tmp_path)
    path = root / YAML
    text = path.read_text().replace("      role: tokens\n", f"      role: {value}\n", 1)
    path.write_text(text)
    violations = validate_package(root)
    assert codes(violations) == ["A04"], violations
    assert violations[0].location == "pipeline.workflow.outputs.tokens.role"


@pytest.mark.parametrize("value", ["[v1]", "{v: 1}", "3"])
def test_a_schema_version_that_is_not_a_string_is_a05(tmp_path, value):
    root = copy_base(tmp_path)
    path = root / YAML
    path.write_text(path.read_text().replace("schema_version: v1\n", f"schema_version: {value}\n"))
    violations = validate_package(root)
    assert codes(violations) == ["A05"], violations
    assert violations[0].location == "schema_version"


@pytest.mark.parametrize("value", ["v1", "'1.0'", "v1.0", "'1'"])
def test_the_implemented_revision_is_read(tmp_path, value):
    root = copy_base(tmp_path)
    path = root / YAML
    path.write_text(path.read_text().replace("schema_version: v1\n", f"schema_version: {value}\n"))
    assert validate_package(root) == []


def test_an_absent_schema_version_is_the_implemented_revision(tmp_path):
    root = copy_base(tmp_path)
    path = root / YAML
    path.write_text(path.read_text().replace("schema_version: v1\n", ""))
    assert validate_package(root) == []


@pytest.mark.parametrize("value", ["v1.2", "v1.6", "'1.1'", "v2", "'2.0'", "v0.9"])
def test_another_revision_is_refused_never_misread(tmp_path, value):
    """A document of another revision (onnx-genai 0.1.0.dev6 writes v1.2 ... v1.6, where
    `rank` gave way to `shape`) is refused once, naming what this runtime reads, and is not
    validated as this revision (which would bury the cause under unrelated violations)."""
    root = copy_base(tmp_path)
    path = root / YAML
    text = path.read_text().replace("schema_version: v1\n", f"schema_version: {value}\n")
    text = text.replace("          rank: 1\n", "", 1)  # a later revision's contract: no rank
    path.write_text(text)
    violations = validate_package(root)
    assert codes(violations) == ["A94"], violations
    (v,) = violations
    assert v.location == "schema_version"
    assert "v1" in v.message and "'1.0'" in v.message and "revision" in v.message


def test_a_schema_version_that_is_no_version_is_a04(tmp_path):
    root = copy_base(tmp_path)
    path = root / YAML
    path.write_text(path.read_text().replace("schema_version: v1\n", "schema_version: banana\n"))
    assert codes(validate_package(root)) == ["A04"]


def test_an_unreadable_metadata_file_is_a77(tmp_path, monkeypatch):
    root = write(tmp_path, "schema_version: v1\n")

    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "open", refuse)
    violations = validate_package(root)
    assert codes(violations) == ["A77"], violations
    assert "Permission denied" in violations[0].message


def test_metadata_symlink_leading_outside_is_refused(tmp_path):
    import os

    root = tmp_path / "pkg"
    shutil.copytree(package_path("kv_decoder"), root)
    outside = tmp_path / "elsewhere.yaml"
    (root / "inference_metadata.yaml").rename(outside)
    os.symlink(outside, root / "inference_metadata.yaml")
    (violation,) = validate_package(root)
    assert violation.code == "H74" and "outside the package" in violation.message


def test_selection_shape_unlike_rank_is_b07_not_a_crash(tmp_path):
    root = tmp_path / "lora"
    shutil.copytree(package_path("lora"), root)
    metadata = root / "inference_metadata.json"
    doc = json.loads(metadata.read_text())
    del doc["pipeline"]["workflow"]["inputs"]["request.adapter_segments"]["contract"]["shape"][0]
    metadata.write_text(json.dumps(doc))
    # B07 for the shape unlike the rank; G65 because a selection input must be [batch, 2]
    assert {v.code for v in validate_package(root)} == {"B07", "G65"}


def test_a_list_of_steps_as_a_branch_case_is_one_clear_violation(tmp_path):
    """Upstream's branch arms are single steps; the old list form gets one violation per arm
    saying so, with the fix (a sequence step)."""
    root = tmp_path / "br"
    shutil.copytree(package_path("branching"), root)
    path = root / YAML
    doc = yaml.safe_load(path.read_text())
    branch = doc["pipeline"]["workflow"]["steps"][1]
    branch["cases"]["0"] = [branch["cases"]["0"]]
    branch["default"] = [branch["default"]]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    violations = validate_package(root)
    assert [(v.code, v.location) for v in violations] == [
        ("A05", 'pipeline.workflow.steps[1].cases["0"]'),
        ("A05", "pipeline.workflow.steps[1].default"),
    ]
    assert all("one step" in v.message and "sequence" in v.hint for v in violations)


def test_a_tab_in_yaml_indentation_is_named(tmp_path):
    root = tmp_path / "pkg"
    shutil.copytree(package_path("counting_loop"), root)
    path = root / "inference_metadata.yaml"
    lines = path.read_text().splitlines()
    lines[2] = "\t" + lines[2].lstrip()
    path.write_text("\n".join(lines) + "\n")
    (violation,) = validate_package(root)
    assert violation.code == "A77"
    assert "line 3" in violation.message and "tab character" in violation.message


def test_a_folder_without_a_metadata_document_says_where_to_point(tmp_path):
    (violation,) = validate_package(tmp_path)
    assert violation.code == "H74" and "no metadata file" in violation.message
    assert "package folder" in violation.hint and "artifact" not in violation.hint


WF_STEPS = ("pipeline", "workflow", "steps")


@pytest.mark.parametrize(
    ("path", "slot"),
    [
        ((*WF_STEPS, 2), "an entry of a steps list"),
        ((*WF_STEPS, 0, "setup", 1), "an entry of a setup list"),
        ((*WF_STEPS, 0, "steps", 1, "cases", "true"), "a branch case"),
        ((*WF_STEPS, 1, "default"), "a branch default"),
        ((*WF_STEPS, 1, "cases", "1", "steps", 0), "an entry of a steps list"),
        # a case keyed "outputs" (refused for its key) still holds one step
        ((*WF_STEPS, 1, "cases", "outputs", "steps", 0, "default"), "a branch default"),
        # a phi's case and default, and an invoke's output port named `default`, name values
        ((*WF_STEPS, 1, "outputs", "y", "cases", "true"), None),
        ((*WF_STEPS, 1, "outputs", "y", "default"), None),
        ((*WF_STEPS, 0, "steps", 0, "outputs", "default"), None),
        ((*WF_STEPS,), None),
        ((*WF_STEPS, 1, "cases"), None),
        (("pipeline", "workflow", "inputs", "steps"), None),
    ],
)
def test_one_step_slots_follow_the_path_from_the_workflow(path, slot):
    """A scalar or a list where one step is due is described by where it stands, found by
    walking the path (not by the names near its end)."""
    assert structure._one_step(path) == slot
