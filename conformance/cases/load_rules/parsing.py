"""Family A, parsing: unknown, removed and missing keys, vocabularies, types, duplicates,
syntax. Mirrors ``reference_runtime/package/parse.py`` and ``structure.py``."""

from __future__ import annotations

from ...package_reader import format_location
from ..mutations import (
    AsJson,
    Delete,
    GrowFile,
    Insert,
    Mutation,
    ReplaceText,
    Set,
    Variant,
    WriteFile,
    load_document,
)

WF = ("pipeline", "workflow")
# 9**6 list items from a few hundred bytes of aliases
_ALIAS_BOMB = (
    "schema_version: v1\nb0: &b0 ["
    + ", ".join(["1"] * 9)
    + "]\n"
    + "".join(f"b{i}: &b{i} [" + ", ".join([f"*b{i - 1}"] * 9) + "]\n" for i in range(1, 6))
)

# A value PyYAML matches as a timestamp but cannot construct (month 13), written long.
_BAD_DATE = "2001-13-45 10:00:00." + "0" * 40
# An integer within the digit limit as written (hexadecimal) whose value has 1,001 digits.
_HEX_LIMIT = "0x" + format(10**1000, "x")
# A list nested too deep, then more nodes than the limit allows: refused for the depth, where
# the document first breaks a limit.
_DEEP_THEN_LARGE = "[" * 70 + "]" * 70 + "\ny: [" + "1, " * 100_001 + "1]"

# The parser's limits at their edge (reference_runtime/package/limits.py), in both spellings:
# the metadata file's text begins with these lines, YAML's and JSON's.
_YAML_TOP = "schema_version: v1\n"
_JSON_TOP = '"schema_version": "v1",\n'
# kv_decoder's sampler takes scalar parameters of any name, so they make a document of any
# size that still loads: one entry is two nodes (its key and its value).
_PARAMETERS = (*WF, "components", "sampler", "contract", "parameters")
_NODES = 1249  # the nodes of kv_decoder's document (keys, values and list items)


def _parameters(**more) -> Set:
    return Set(_PARAMETERS, {"mode": "greedy", **more})


def _many_parameters(nodes: int) -> tuple:
    """Edits giving kv_decoder's document exactly ``nodes`` nodes (one capability repeated
    where the count is odd)."""
    extra = nodes - _NODES
    ops: tuple = (_parameters(**{f"p{i}": i for i in range(extra // 2)}),)
    if extra % 2:
        ops += (Insert((*WF, "manifest", "capabilities"), 0, "workflow_ssa"),)
    return ops


def _nested(levels: int, inner: str = "1") -> str:
    """A value ``x`` whose innermost scalar sits ``levels`` levels below the top (the
    top-level mapping is level 0, ``x``'s list level 1)."""
    return "[" * (levels - 1) + inner + "]" * (levels - 1)


def _yaml_x(value: str) -> ReplaceText:
    return ReplaceText(_YAML_TOP, f"{_YAML_TOP}x: {value}\n")


def _json_x(value: str) -> ReplaceText:
    return ReplaceText(_JSON_TOP, f'{_JSON_TOP}  "x": {value},\n')


# An anchored list whose number sits 40 levels below it (41 below the top, as x's value).
_ANCHORED = "&a " + _nested(41)
# With `y: [*b]`, kv_decoder's document then counts 1,249 + 4 + 2 * 49,373 + 1 = 100,000
# nodes, its aliases expanded (50,627 as written).
_ANCHORED_LIST = "&b [" + ", ".join(["1"] * 49_373) + "]"
_DIGITS_1000 = int("9" * 1000)
_DIGITS_1001 = int("1" + "0" * 1000)
_STRING = "a" * 2**20
_YAML_MODE = "            mode: greedy\n"  # the sampler's parameter, in kv_decoder's YAML
_JSON_STEP = '      "steps": [\n        {\n          "kind": "loop",\n'  # kv_decoder's first step
_JSON_END = '      "float32"\n    ]\n  }\n}'  # the end of kv_decoder's JSON
_YAML_END = "  required_dtypes:\n  - float32\n"  # the end of kv_decoder's YAML

MUTATIONS = (
    Mutation("A01", "kv_decoder", (Set((*WF, "components", "model", "device"), "cuda"),),
             "pipeline.workflow.components.model.device", "unknown component key"),
    Mutation("A02", "kv_decoder", (Set(("kv_cache",), {"layers": 1}),),
             "kv_cache", "removed top-level kv_cache"),
    Mutation("A03", "kv_decoder", (Delete((*WF, "steps", 0, "continue_when")),),
             "pipeline.workflow.steps[0].continue_when", "loop without continue_when"),
    Mutation("A04", "kv_decoder", (Set((*WF, "steps", 2, "kind"), "transfer"),),
             "pipeline.workflow.steps[2].kind", "authored transfer step"),
    # a refused value too long to quote whole is still refused with its own code
    Mutation("A04", "kv_decoder", (Set((*WF, "steps", 2, "kind"), "transfer_" * 9),),
             "pipeline.workflow.steps[2].kind", "step kind of 81 characters"),
    # a near miss is refused like any other (the message suggests the spelling meant)
    Mutation("A01", "kv_decoder", (Set((*WF, "components", "model", "implementaton"), {}),),
             "pipeline.workflow.components.model.implementaton", "misspelt component key"),
    Mutation("A04", "kv_decoder", (Set((*WF, "steps", 2, "kind"), "emitt"),),
             "pipeline.workflow.steps[2].kind", "misspelt step kind"),
    Mutation("A04", "kv_decoder", (Set((*WF, "steps", 2, "kind"), ["emit"]),),
             "pipeline.workflow.steps[2].kind", "step kind a list"),
    Mutation("A05", "kv_decoder",
             (Set((*WF, "inputs", "request.seed", "contract", "rank"), "one" * 27),),
             'pipeline.workflow.inputs["request.seed"].contract.rank', "rank a string of 81 characters"),
    # output roles are upstream's (tokens, text, image, video, audio, tensor, event)
    Mutation("A04", "static_cache", (Set((*WF, "outputs", "logits", "role"), "logits"),),
             "pipeline.workflow.outputs.logits.role", "output role logits"),
    Mutation("A04", "static_cache", (Set((*WF, "outputs", "logits", "role"), "embeddings"),),
             "pipeline.workflow.outputs.logits.role", "output role embeddings"),
    Mutation("A04", "media", (Set((*WF, "outputs", "audio", "media", "container"), "mp3"),),
             "pipeline.workflow.outputs.audio.media.container", "media container mp3"),
    Mutation("A05", "kv_decoder", (Set((*WF, "inputs", "request.seed", "contract", "rank"), -1),),
             'pipeline.workflow.inputs["request.seed"].contract.rank', "negative rank"),
    Mutation("A05", "kv_decoder",
             (Set((*WF, "inputs", "package.max_context", "default"), [[64]]),),
             'pipeline.workflow.inputs["package.max_context"].default', "nested literal list"),
    Mutation("A05", "kv_decoder", (Set((*WF, "inputs"), []),),
             "pipeline.workflow.inputs", "workflow inputs a list"),
    # upstream: a branch case is one step; its steps written as a bare list are refused
    Mutation("A05", "branching",
             (Set((*WF, "steps", 1, "cases", "1"),
                  load_document("branching")["pipeline"]["workflow"]["steps"][1]["cases"]["1"]["steps"]),),
             'pipeline.workflow.steps[1].cases["1"]', "branch case written as a list of steps"),
    # and so is any step written as a list of steps (here the loop's emit, in a list of one)
    Mutation("A05", "kv_decoder",
             (Set((*WF, "steps", 0, "steps", 2),
                  [load_document("kv_decoder")["pipeline"]["workflow"]["steps"][0]["steps"][2]]),),
             "pipeline.workflow.steps[0].steps[2]", "loop step written as a list"),
    Mutation("A05", "kv_decoder",
             (Delete((*WF, "steps", 0, "setup", 1, "cases", "true")),
              Set((*WF, "steps", 0, "setup", 1, "default"),
                  [load_document("kv_decoder")["pipeline"]["workflow"]["steps"][0]["setup"][1]
                   ["cases"]["true"]])),
             "pipeline.workflow.steps[0].setup[1].default", "branch default written as a list"),
    # ... and a step written as a scalar is one A05, not also the rule of the list holding it
    # (D27) or of the branch's cases (D35)
    Mutation("A05", "kv_decoder", (Set((*WF, "steps", 0, "steps", 0), 5),),
             "pipeline.workflow.steps[0].steps[0]", "loop step written as a number"),
    Mutation("A05", "kv_decoder", (Set((*WF, "steps", 0, "setup", 1, "cases", "true"), "bias"),),
             "pipeline.workflow.steps[0].setup[1].cases.true", "branch case written as a string"),
    # a number field reads an integer as a float, which holds at most about 1.8e308
    Mutation("A05", "kv_decoder", (Set(("generation", "defaults", "temperature"), 10**400),),
             "generation.defaults.temperature", "temperature an integer beyond a float's range"),
    Mutation("A05", "kv_decoder", (Set((*WF, "steps", 0, "steps", 0, "outputs", "default"), 5),),
             "pipeline.workflow.steps[0].steps[0].outputs.default",
             "invoke output port named default bound to a number"),
    # Counts upstream bounds below by 1 (`schemars(range(min = 1))`): 0 is a schema violation.
    Mutation("A05", "model_io_decoder", (Set(("model", "max_sequence_length"), 0),),
             "model.max_sequence_length", "max_sequence_length 0"),
    Mutation("A05", "model_io_decoder", (Set(("model", "vocab_size"), 0),),
             "model.vocab_size", "model vocab_size 0"),
    Mutation("A06", "kv_decoder",
             (Set(("model", "io"), {"token_input": "input_ids", "logits_output": "logits"}),),
             "model.io", "model.io beside the workflow"),
    Mutation("A76", "kv_decoder", (ReplaceText("schema_version: v1\n",
                                               "schema_version: v1\nschema_version: v1\n"),),
             "schema_version", "duplicate top-level key"),
    Mutation("A77", "kv_decoder", (ReplaceText("schema_version: v1\n", "schema_version: [v1\n"),),
             "<document>", "YAML syntax error"),
    Mutation("A77", "kv_decoder",
             (ReplaceText("schema_version: v1\n", f"schema_version: v1\nx: {_BAD_DATE}\n"),),
             "<document>", "long date that is no date"),
    Mutation("A77", "kv_decoder",
             (ReplaceText("schema_version: v1\n", f"schema_version: v1\nx: {_HEX_LIMIT}\n"),),
             "<document>", "hexadecimal integer of 10 to the 1000"),
    Mutation("A77", "kv_decoder", (ReplaceText(_YAML_END, f"{_YAML_END}x: [1\n"),),
             "<document>", "YAML list left open at the end of the file"),
    Mutation("A77", "kv_decoder",
             (WriteFile("inference_metadata.yaml", b"# nothing but a comment\n"),),
             "<document>", "a metadata file holding no document"),
    Mutation("A77", "kv_decoder", (WriteFile("inference_metadata.yaml", b"- schema_version\n"),),
             "<document>", "a metadata file holding a list"),
    Mutation("A77", "genai_decoder", (WriteFile("genai_config.json", b'{"model": '),),
             '["genai_config.json"]', "genai_config.json cut short"),
    Mutation("A77", "kv_decoder", (_yaml_x('"a\x07"'),),
             "<document>", "a control character in the YAML text"),
    Mutation("A77", "kv_decoder", (_yaml_x("&r [1, *r]"),),
             "<document>", "a list that holds itself through an alias"),
    Mutation("A76", "kv_decoder",
             (ReplaceText("    steps:\n    - kind: loop\n", "    steps:\n    - kind: loop\n      kind: loop\n"),),
             "pipeline.workflow.steps[0].kind", "duplicate key in a list item"),
    Mutation("A76", "kv_decoder",
             (AsJson(), ReplaceText(_JSON_STEP, _JSON_STEP + '          "kind": "loop",\n')),
             "pipeline.workflow.steps[0].kind", "duplicate key in a list item in JSON"),
    Mutation("A76", "kv_decoder",
             (AsJson(), ReplaceText(_JSON_TOP, _JSON_TOP + _JSON_TOP)),
             "schema_version", "duplicate top-level key in JSON"),
    Mutation("A05", "kv_decoder", (ReplaceText(_YAML_MODE, f"{_YAML_MODE}            null: x\n"),),
             f"{format_location(_PARAMETERS)}.null", "parameter named by the YAML null"),
    Mutation("A05", "kv_decoder", (ReplaceText(_YAML_MODE, f"{_YAML_MODE}            true: x\n"),),
             f"{format_location(_PARAMETERS)}.true", "parameter named by the YAML true"),
    # ... and where the schema knows every key: the key is refused once, as a key (A05), not
    # again as an unknown key (A01)
    Mutation("A05", "kv_decoder",
             (ReplaceText("    steps:\n    - kind: loop\n", "    steps:\n    - kind: loop\n      true: x\n"),),
             "pipeline.workflow.steps[0].true", "step key named by the YAML true"),
    Mutation("A94", "kv_decoder", (Set(("schema_version",), "v1.2"),),
             "schema_version", "schema_version of a later revision"),
    Mutation("A94", "kv_decoder", (Set(("schema_version",), "v2"),),
             "schema_version", "schema_version of the next major revision"),
    Mutation("A94", "kv_decoder", (Set(("schema_version",), "1.0.1"),),
             "schema_version", "schema_version of a later patch revision"),
    Mutation("A94", "kv_decoder", (Set(("schema_version",), "v0.9"),),
             "schema_version", "schema_version of an earlier revision"),
    Mutation("A04", "kv_decoder", (Set(("schema_version",), "version one"),),
             "schema_version", "schema_version that is no version"),
    Mutation("A05", "kv_decoder", (Set(("schema_version",), 1),),
             "schema_version", "schema_version a number"),
    # A98-A102: the parser's limits (reference_runtime/package/limits.py)
    Mutation("A98", "kv_decoder", (GrowFile("inference_metadata.yaml", 17 * 2**20),),
             "<document>", "metadata file of 17 MiB"),
    Mutation("A98", "genai_decoder", (GrowFile("genai_config.json", 17 * 2**20),),
             '["genai_config.json"]', "genai_config.json of 17 MiB"),
    Mutation("A99", "kv_decoder", (ReplaceText("schema_version: v1\n", _ALIAS_BOMB),),
             "<document>", "alias bomb"),
    Mutation("A100", "kv_decoder",
             (ReplaceText("schema_version: v1\n", "schema_version: v1\nx: " + "[" * 70 + "]" * 70 + "\n"),),
             "<document>", "list nested 70 deep"),
    Mutation("A100", "kv_decoder",
             (ReplaceText("schema_version: v1\n", f"schema_version: v1\nx: {_DEEP_THEN_LARGE}\n"),),
             "<document>", "list nested 70 deep before too many nodes"),
    Mutation("A101", "kv_decoder",
             (ReplaceText("schema_version: v1\n", "schema_version: v1\nx: " + "a" * (2**20 + 1) + "\n"),),
             "<document>", "string of a million characters"),
    Mutation("A102", "kv_decoder",
             (ReplaceText("schema_version: v1\n", "schema_version: 1" + ":59" * 400 + "\n"),),
             "<document>", "base-60 integer of 1201 characters"),
    # Just over each limit, in YAML and in JSON (the values at the limit load: VARIANTS)
    Mutation("A98", "kv_decoder", (GrowFile("inference_metadata.yaml", 16 * 2**20 + 1),),
             "<document>", "metadata file of 16 MiB and one byte"),
    Mutation("A98", "kv_decoder",
             (AsJson(), GrowFile("inference_metadata.json", 16 * 2**20 + 1)),
             "<document>", "JSON metadata file of 16 MiB and one byte"),
    Mutation("A99", "kv_decoder", _many_parameters(100_001),
             "<document>", "100,001 nodes"),
    Mutation("A99", "kv_decoder", (*_many_parameters(100_001), AsJson()),
             "<document>", "100,001 nodes in JSON"),
    Mutation("A100", "kv_decoder", (_yaml_x(_nested(65)),),
             "<document>", "a number 65 levels deep"),
    Mutation("A100", "kv_decoder", (AsJson(), _json_x(_nested(65))),
             "<document>", "a number 65 levels deep in JSON"),
    Mutation("A100", "kv_decoder",
             (AsJson(), ReplaceText(_JSON_END, f'{_JSON_END[:-2]},\n  "x": {_nested(65)}\n}}')),
             "<document>", "a number 65 levels deep at the end of the document in JSON"),
    Mutation("A100", "kv_decoder", (AsJson(), _json_x(_nested(64, '{"a": 1}'))),
             "<document>", "an object key 65 levels deep in JSON"),
    Mutation("A100", "kv_decoder",
             (_yaml_x(_nested(65) + "\ny: [" + "1, " * 100_001 + "1]"),),
             "<document>", "a number 65 levels deep before too many nodes"),
    Mutation("A100", "kv_decoder",
             (AsJson(), _json_x(_nested(65) + ',\n  "y": [' + "1, " * 100_001 + "1]")),
             "<document>", "a number 65 levels deep before too many nodes in JSON"),
    # after every mapping of the document has closed: depth is counted down as well as up
    Mutation("A100", "kv_decoder",
             (ReplaceText(_YAML_END, f"{_YAML_END}x: {_nested(65)}\ny: [" + "1, " * 100_001 + "1]\n"),),
             "<document>", "a number 65 levels deep at the end of the document before too many nodes"),
    # an anchored list of 49,373 numbers used again through an alias: 100,000 nodes in all
    Mutation("A01", "kv_decoder", (_yaml_x(f"{_ANCHORED_LIST}\ny: [*b]"),),
             "x", "unknown keys holding 100,000 nodes once an alias is expanded"),
    Mutation("A99", "kv_decoder", (_yaml_x(f"{_ANCHORED_LIST}\ny: [*b, 1]"),),
             "<document>", "100,001 nodes once an alias is expanded"),
    # an alias puts its anchor's 40 levels 25 levels down: 65 deep once expanded
    Mutation("A100", "kv_decoder", (_yaml_x(_ANCHORED + "\ny: " + "[" * 24 + "*a" + "]" * 24),),
             "<document>", "an alias expanding 65 levels deep"),
    # 64 levels is within the limit: the document is refused for its unknown key alone
    Mutation("A01", "kv_decoder", (_yaml_x(_ANCHORED + "\ny: " + "[" * 23 + "*a" + "]" * 23),),
             "x", "unknown keys holding an alias expanding 64 levels deep"),
    Mutation("A01", "kv_decoder", (_yaml_x(_nested(64)),),
             "x", "unknown key holding a number 64 levels deep"),
    Mutation("A01", "kv_decoder", (AsJson(), _json_x(_nested(64))),
             "x", "unknown key holding a number 64 levels deep in JSON"),
    Mutation("A101", "kv_decoder", (_parameters(text=_STRING + "a"),),
             '<document>', "parameter string of 1,048,577 characters"),
    Mutation("A101", "kv_decoder", (_parameters(text=_STRING + "a"), AsJson()),
             '<document>', "parameter string of 1,048,577 characters in JSON"),
    Mutation("A101", "kv_decoder", (_parameters(**{_STRING + "a": 1}),),
             '<document>', "parameter name of 1,048,577 characters"),
    Mutation("A102", "kv_decoder", (_parameters(width=_DIGITS_1001),),
             "<document>", "parameter integer of 1001 digits"),
    Mutation("A102", "kv_decoder", (_parameters(width=-_DIGITS_1001), AsJson()),
             "<document>", "negative parameter integer of 1001 digits in JSON"),
    Mutation("A102", "kv_decoder", (_yaml_x("1." + "0" * 999),),
             "<document>", "number of 1001 characters"),
    Mutation("A102", "kv_decoder", (_yaml_x(f"!!int {_DIGITS_1001}"),),
             "<document>", "integer of 1001 digits tagged int"),
)  # fmt: skip

VARIANTS = (
    Variant(
        "kv_decoder", (GrowFile("inference_metadata.yaml", 16 * 2**20),), "metadata file of 16 MiB"
    ),
    # its last byte closes the document: a reader that stops short of the limit breaks it
    Variant(
        "kv_decoder",
        (AsJson(), GrowFile("inference_metadata.json", 16 * 2**20)),
        "JSON metadata file of 16 MiB",
    ),
    Variant("kv_decoder", _many_parameters(100_000), "100,000 nodes"),
    Variant("kv_decoder", (*_many_parameters(100_000), AsJson()), "100,000 nodes in JSON"),
    Variant("kv_decoder", (_parameters(text=_STRING),), "parameter string of 1,048,576 characters"),
    Variant(
        "kv_decoder",
        (_parameters(text=_STRING), AsJson()),
        "parameter string of 1,048,576 characters in JSON",
    ),
    Variant("kv_decoder", (_parameters(**{_STRING: 1}),), "parameter name of 1,048,576 characters"),
    Variant("kv_decoder", (_parameters(width=_DIGITS_1000),), "parameter integer of 1000 digits"),
    Variant(
        "kv_decoder",
        (_parameters(width=-_DIGITS_1000), AsJson()),
        "negative parameter integer of 1000 digits in JSON",
    ),
    Variant(
        "kv_decoder",
        (ReplaceText(_YAML_MODE, f"{_YAML_MODE}            width: 1.{'0' * 998}\n"),),
        "parameter number of 1000 characters",
    ),
    Variant(
        "kv_decoder",
        (ReplaceText(_YAML_MODE, f"{_YAML_MODE}            width: !!int {_DIGITS_1000}\n"),),
        "parameter integer of 1000 digits tagged int",
    ),
    # JSON's number grammar cannot backtrack (YAML's patterns can): only its integers are bounded
    Variant(
        "kv_decoder",
        (_parameters(width=0.5), AsJson(), ReplaceText('"width": 0.5', f'"width": 0.{"5" * 1000}')),
        "parameter number of 1002 characters in JSON",
    ),
    Variant(
        "kv_decoder",
        (Set(("generation", "defaults", "temperature"), 2),),
        "temperature written as an integer",
    ),
    Variant("kv_decoder", (AsJson(),), "metadata in JSON"),
    # JSON allows tabs wherever it allows spaces; YAML does not (a YAML parser refuses this)
    Variant(
        "kv_decoder",
        (AsJson(), ReplaceText("\n  ", "\n\t", -1)),
        "metadata in JSON indented with tabs",
    ),
    # valid spellings of the one revision this runtime reads
    Variant("kv_decoder", (Set(("schema_version",), "1"),), "schema_version 1"),
    Variant("kv_decoder", (Set(("schema_version",), "v1.0.0"),), "schema_version v1.0.0"),
    Variant("kv_decoder", (Set(("schema_version",), "1.0"),), "schema_version 1.0"),
    Variant("kv_decoder", (Set(("schema_version",), "v1.0"),), "schema_version v1.0"),
    Variant("kv_decoder", (Delete(("schema_version",)),), "no schema_version"),
)
