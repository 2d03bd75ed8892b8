"""A: parsing (unknown, removed and missing keys, vocabularies, types, duplicates, syntax)."""

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
    Mutation("A05", "kv_decoder", (Set((*WF, "inputs", "request.seed", "contract", "rank"), -1),),
             'pipeline.workflow.inputs["request.seed"].contract.rank', "negative rank"),
    Mutation("A06", "kv_decoder",
             (Set(("model", "io"), {"token_input": "input_ids", "logits_output": "logits"}),),
             "model.io", "model.io beside the workflow"),
    Mutation("A76", "kv_decoder", (ReplaceText("schema_version: v1\n",
                                               "schema_version: v1\nschema_version: v1\n"),),
             "schema_version", "duplicate top-level key"),
    Mutation("A77", "kv_decoder", (ReplaceText("schema_version: v1\n", "schema_version: [v1\n"),),
             "<document>", "YAML syntax error"),
)  # fmt: skip
