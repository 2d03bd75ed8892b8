"""Family A, parsing: unknown, removed and missing keys, vocabularies, types, duplicates,
syntax. Mirrors ``reference_runtime/package/parse.py`` and ``structure.py``."""

from __future__ import annotations

from ..mutations import Delete, GrowFile, Mutation, ReplaceText, Set, Variant

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

MUTATIONS = (
    Mutation("A01", "kv_decoder", (Set((*WF, "components", "model", "device"), "cuda"),),
             "pipeline.workflow.components.model.device", "unknown component key"),
    Mutation("A02", "kv_decoder", (Set(("kv_cache",), {"layers": 1}),),
             "kv_cache", "removed top-level kv_cache"),
    Mutation("A03", "kv_decoder", (Delete((*WF, "steps", 0, "continue_when")),),
             "pipeline.workflow.steps[0].continue_when", "loop without continue_when"),
    Mutation("A04", "kv_decoder", (Set((*WF, "steps", 2, "kind"), "transfer"),),
             "pipeline.workflow.steps[2].kind", "authored transfer step"),
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
)  # fmt: skip


# Valid spellings of the one revision this runtime reads: each still loads.
VARIANTS = (
    Variant("kv_decoder", (Set(("schema_version",), "1"),), "schema_version 1"),
    Variant("kv_decoder", (Set(("schema_version",), "v1.0.0"),), "schema_version v1.0.0"),
    Variant("kv_decoder", (Set(("schema_version",), "1.0"),), "schema_version 1.0"),
    Variant("kv_decoder", (Set(("schema_version",), "v1.0"),), "schema_version v1.0"),
    Variant("kv_decoder", (Delete(("schema_version",)),), "no schema_version"),
)
