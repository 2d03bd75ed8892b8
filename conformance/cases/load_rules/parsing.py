"""Family A, parsing: unknown, removed and missing keys, vocabularies, types, duplicates,
syntax. Mirrors ``reference_runtime/package/parse.py`` and ``structure.py``."""

from __future__ import annotations

from ..mutations import Delete, Mutation, ReplaceText, Set

WF = ("pipeline", "workflow")

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
    Mutation("A94", "kv_decoder", (Set(("schema_version",), "v1.2"),),
             "schema_version", "schema_version of a later revision"),
)  # fmt: skip
