"""Family F, speculative decoding: components, rollback state, effects, chained proposals.
Mirrors ``reference_runtime/package/rules/speculative.py``."""

from __future__ import annotations

from ..mutations import Delete, Insert, Mutation, Set, Variant, load_document
from .steps import literal_input

SP = ("speculative",)
S0 = ("pipeline", "workflow", "steps", 0)  # speculative's decode loop
PE = (*SP, "proposal_execution")
DC = ("pipeline", "workflow", "serving", "state_service", "groups", "draft_cache")
GDC = "pipeline.workflow.serving.state_service.groups.draft_cache"
SPN = ("pipeline", "workflow", "components", "speculate")
SPP = (*SPN, "contract", "parameters")
SPC = "pipeline.workflow.components.speculate"
GR = ("pipeline", "workflow", "serving", "state_service", "groups")
GRP = "pipeline.workflow.serving.state_service.groups"
AUX_GROUP = {
    "kind": "recurrent",
    "layout": "bh",
    "update": {"kind": "replace"},
    "capabilities": {"rollback_positions": 1},
}

# speculative's decode loop nested in a loop of its own (the serving values then live inside
# the outer loop: E50): the speculative region is the innermost loop invoking both components
_NESTED = (
    Set(("pipeline", "workflow", "inputs", "package.once"), literal_input("bool", default=False)),
    Set(
        ("pipeline", "workflow", "steps"),
        [
            {
                "kind": "loop",
                "max_iterations": "request.max_tokens",
                "continue_when": "package.once",
                "steps": load_document("speculative")["pipeline"]["workflow"]["steps"],
            }
        ],
    ),
)

TIMER_AFTER = {
    "implementation": {"kind": "adapter", "abi": "onnx-genai.telemetry", "version": "1"},
    "ports": {"inputs": {}, "outputs": {"timestamp": {"dtype": "int64", "rank": 0}}},
    "contract": {"id": "onnx-genai.telemetry", "version": "1",
                 "bindings": {"timestamp": "timestamp"}, "parameters": {"action": "start"}},
    "effects": ["audit"],
}  # fmt: skip

MUTATIONS = (
    # F59: proposer and target
    Mutation("F59", "speculative", (Set((*SP, "proposer"), "drafter"),),
             "speculative.proposer", "unknown proposer"),
    Mutation("F59", "speculative", (Set((*SP, "target"), "Verifier"),),
             "speculative.target", "unknown target"),
    Mutation("F59", "speculative", (Set((*SP, "proposer"), ""),),
             "speculative.proposer", "empty proposer"),
    # a speculative section names components of a workflow: a document without one (here
    # a model.io package's, its model.io deleted) has none to name
    Mutation("F59", "model_io_decoder",
             (Delete(("model", "io")), Set(SP, load_document("speculative")["speculative"])),
             "speculative", "speculative section without a workflow", also=("H74",)),
    Mutation("F59", "speculative_block", (Set((*SP, "proposer"), "drafter"),),
             "speculative.proposer", "unknown proposer of a speculative block"),
    Mutation("F115", "speculative_block", (Insert((*SP, "rollback_state"), 2, "generated"),),
             "speculative.rollback_state[2]", "rollback cell outside every service group"),
    Mutation("F115", "speculative_block",
             (Set(("pipeline", "workflow", "components", "target", "implementation"),
                  {"kind": "binding"}),),
             "speculative.target", "a binding target of a speculative block",
             also=("C25",)),  # the draft is then the one ONNX component, and names no tokens
    # F60: rollback state
    Mutation("F60", "speculative", (Insert((*SP, "rollback_state"), 2, "draft_cache_state"),),
             "speculative.rollback_state[2]", "unknown rollback cell"),
    Mutation("F60", "speculative",
             (Set((*GR, "aux"), AUX_GROUP), Insert((*SP, "rollback_state"), 2, "aux")),
             f"{GRP}.aux.capabilities.rollback_positions",
             "group named in rollback_state rolls back too little"),
    Mutation("F60", "speculative", (Set((*DC, "capabilities", "rollback_positions"), 1),),
             f"{GDC}.capabilities.rollback_positions", "rollback_positions below width"),
    # a rollback cell in an undeclared group: E47 alone (the group has nothing to check)
    Mutation("E47", "speculative",
             (Set(("pipeline", "workflow", "state", "draft_state", "service_group"), "draft_kv"),),
             "pipeline.workflow.state.draft_state.service_group",
             "rollback cell in an undeclared service group"),
    Mutation("F60", "speculative", (Delete((*DC, "capabilities", "rollback_positions")),),
             f"{GDC}.capabilities.rollback_positions", "group cannot roll back"),
    Mutation("F60", "speculative",
             (Set(("pipeline", "workflow", "serving", "state_service", "groups", "aux"), AUX_GROUP),
              Set((*DC, "capabilities", "cascade"), ["aux"])),
             "pipeline.workflow.serving.state_service.groups.aux.capabilities.rollback_positions",
             "cascaded group rolls back too little"),
    Mutation("F60", "speculative",
             (Set((*GR, "aux"), {**AUX_GROUP, "capabilities": {"rollback_positions": 8,
                                                              "cascade": ["aux2"]}}),
              Set((*GR, "aux2"), AUX_GROUP),
              Set((*DC, "capabilities", "cascade"), ["aux"])),
             f"{GRP}.aux2.capabilities.rollback_positions",
             "group two cascades away rolls back too little"),
    # the rollback walk follows cascades only into declared groups
    Mutation("E51", "speculative", (Set((*DC, "capabilities", "cascade"), ["nope"]),),
             f"{GDC}.capabilities.cascade[0]", "rolled-back group cascading to no group"),
    # F61: effects in the speculative region
    Mutation("F61", "speculative",
             (Set(("pipeline", "workflow", "effects", "grammar", "speculation_safety", "max_depth"), 1),),
             "pipeline.workflow.effects.grammar.speculation_safety", "rewindable less than width"),
    Mutation("F61", "speculative",
             (*_NESTED,
              Set(("pipeline", "workflow", "effects", "grammar", "speculation_safety", "max_depth"), 1)),
             "pipeline.workflow.effects.grammar.speculation_safety",
             "rewindable less than width in a nested speculative loop", also=("E50",)),
    Mutation("F61", "speculative",
             (Delete(("pipeline", "workflow", "effects", "grammar", "speculation_safety")),),
             "pipeline.workflow.effects.grammar.speculation_safety", "no speculation_safety"),
    Mutation("F61", "speculative",
             (Set(("pipeline", "workflow", "effects", "grammar", "speculation_safety"),
                  {"kind": "none"}),),
             "pipeline.workflow.effects.grammar.speculation_safety", "speculation_safety none"),
    # the region is the innermost loop invoking both proposer and target: a loop nested in it
    # that invokes only the target does not narrow it, so an unsafe effect beside it counts
    Mutation("F61", "speculative",
             (Set(("pipeline", "workflow", "components", "stamp"), TIMER_AFTER),
              Set(("pipeline", "workflow", "effects", "audit"),
                  {"retry": "idempotent", "speculation_safety": {"kind": "none"}}),
              Insert((*S0, "steps"), 4,
                     {"kind": "loop", "continue_when": "package.not_done",
                      "max_iterations": "request.max_tokens",
                      "steps": [{"kind": "invoke", "component": "verifier",
                                 "inputs": {"tokens": "draft.proposal"},
                                 "outputs": {"scores": "again.scores",
                                             "hidden": "again.hidden"}}]}),
              Insert((*S0, "steps"), 0,
                     {"kind": "invoke", "component": "stamp", "inputs": {},
                      "outputs": {"timestamp": "timing.stamp"}})),
             "pipeline.workflow.effects.audit.speculation_safety",
             "unsafe effect beside a loop that invokes only the target"),
    # F62: chained proposals
    Mutation("F62", "speculative", (Set((*PE, "token_embedding_input"), ""),),
             "speculative.proposal_execution.token_embedding_input",
             "empty token_embedding_input"),
    Mutation("F62", "speculative",
             (Set((*PE, "token_embedding_input"), "embeddings"),
              Set((*SP, "port_bindings", "target_hidden_context"), "embeddings")),
             "speculative.proposal_execution.token_embedding_input",
             "token_embedding_input not a proposer input"),
    Mutation("F62", "speculative", (Set((*PE, "logits_output"), ""),),
             "speculative.proposal_execution.logits_output", "empty logits_output"),
    Mutation("F62", "speculative", (Set((*PE, "logits_output"), "proposal_logits"),),
             "speculative.proposal_execution.logits_output", "logits_output not a proposer output"),
    Mutation("F62", "speculative",
             (Delete((*PE, "recurrent")), Delete((*PE, "folded_carry_output")),
              Delete((*PE, "folded_carry_seed")), Delete((*PE, "token_embedding"))),
             "speculative.proposal_execution", "neither recurrent state nor folded carry"),
    Mutation("F62", "speculative",
             (Insert((*PE, "recurrent"), 1,
                     {"state": "draft_state", "input": "draft_state",
                      "output": "next_draft_state"}),),
             "speculative.proposal_execution.recurrent[1].state", "duplicated recurrent cell"),
    Mutation("F62", "speculative", (Set((*PE, "recurrent", 0, "state"), "draft_cache"),),
             "speculative.proposal_execution.recurrent[0].state", "unknown recurrent cell"),
    Mutation("F62", "speculative", (Delete((*SP, "rollback_state", 0)),),
             "speculative.proposal_execution.recurrent[0].state", "recurrent cell not rolled back"),
    Mutation("F62", "speculative", (Set((*PE, "recurrent", 0, "output"), "carry"),),
             "speculative.proposal_execution.recurrent[0].state", "recurrent ports unlike the alias"),
    Mutation("F62", "speculative",
             (Set((*DC, "ports", "draft", "draft_state", "access"), "read_only"),),
             "speculative.proposal_execution.recurrent[0].state", "alias not read_write"),
    # F63: folded carry
    Mutation("F63", "speculative", (Set((*PE, "folded_carry_output"), "next_carry"),),
             "speculative.proposal_execution.folded_carry_output", "carry not a proposer output"),
    Mutation("F63", "speculative", (Set((*SP, "port_bindings", "target_hidden_context"), "draft_state"),),
             "speculative.port_bindings.target_hidden_context",
             "hidden context unlike token_embedding_input"),
    Mutation("F63", "speculative", (Delete((*SP, "port_bindings", "target_hidden_context")),),
             "speculative.port_bindings.target_hidden_context", "no target_hidden_context"),
    Mutation("F63", "speculative", (Delete((*PE, "folded_carry_seed")),),
             "speculative.proposal_execution.folded_carry_seed", "no seed"),
    Mutation("F63", "speculative", (Set((*PE, "folded_carry_seed", "component"), "draft"),),
             "speculative.proposal_execution.folded_carry_seed", "seed from the proposer"),
    Mutation("F63", "speculative", (Set((*PE, "folded_carry_seed", "output"), "hiddens"),),
             "speculative.proposal_execution.folded_carry_seed", "seed not a target output"),
    Mutation("F63", "speculative", (Delete((*PE, "token_embedding")),),
             "speculative.proposal_execution.token_embedding", "no token_embedding"),
    Mutation("F63", "speculative", (Set((*PE, "token_embedding", "component"), "draft"),),
             "speculative.proposal_execution.token_embedding.component",
             "token_embedding not from the target"),
    # a target that is no ONNX graph has no embedding table (the block refuses it too, F115)
    Mutation("F63", "speculative_folded",
             (Set(("pipeline", "workflow", "components", "target", "implementation"),
                  {"kind": "binding"}),),
             "speculative.proposal_execution.token_embedding.component",
             "token_embedding from a binding target", also=("F115",)),
    Mutation("F63", "speculative", (Set((*PE, "token_embedding", "table"), ""),),
             "speculative.proposal_execution.token_embedding.table", "empty table"),
    Mutation("F63", "speculative", (Set((*PE, "token_embedding", "table"), "lm_head"),),
             "speculative.proposal_execution.token_embedding.table", "table not an initializer"),
    # F115: a speculative-block component the package does not resolve
    Mutation("F115", "speculative_block", (Delete(SP),),
             f"{SPC}.contract.id", "no speculative section"),
    Mutation("F115", "speculative_block", (Set((*SPP, "target_logits_output"), "scores"),),
             f"{SPC}.contract.parameters.target_logits_output", "logits not a target output"),
    Mutation("F115", "speculative_block", (Set((*SPP, "target_logits_output"), ""),),
             f"{SPC}.contract.parameters.target_logits_output", "logits output empty"),
    Mutation("F115", "speculative_block", (Set((*SPP, "target_tokens_input"), ""),),
             f"{SPC}.contract.parameters.target_tokens_input", "target tokens input empty"),
    Mutation("F115", "speculative_block", (Set((*SPP, "proposer_tokens_input"), "tokens"),),
             f"{SPC}.contract.parameters.proposer_tokens_input",
             "block proposer tokens input its graph lacks"),
    Mutation("F115", "speculative_block", (Set((*SPP, "proposal_output"), "proposals"),),
             f"{SPC}.contract.parameters.proposal_output",
             "block proposal output its graph lacks"),
    Mutation("F115", "speculative_block", (Delete((*SPP, "proposal_output")),),
             f"{SPC}.contract.parameters", "block proposal without proposal_output"),
    Mutation("F115", "speculative_block", (Set((*SPP, "proposal_output"), ""),),
             f"{SPC}.contract.parameters.proposal_output", "block proposal_output empty"),
    Mutation("F115", "speculative_block", (Delete((*GR, "target_cache", "ports", "speculate")),),
             f"{GRP}.target_cache.ports", "target cache not carried through the component"),
    Mutation("F115", "speculative_chained", (Set((*SPP, "proposal_output"), "proposal"),),
             f"{SPC}.contract.parameters.proposal_output", "block parameter on a chained proposal"),
    # F116: a chained proposal without a field the executor reads
    Mutation("F116", "speculative_chained", (Delete((*PE, "token_embedding")),),
             "speculative.proposal_execution.token_embedding", "no token_embedding"),
    Mutation("F116", "speculative_folded",
             (Delete((*SPN, "ports", "inputs", "carry")),
              Delete(("pipeline", "workflow", "steps", 2, "steps", 0, "inputs", "carry"))),
             f"{SPC}.ports.inputs", "folded carry without the component's carry port"),
    # F117: valid, but not run by this runtime's speculative executor
    Mutation("F117", "speculative_block",
             (Set((*SPN[:-1], "speculate_again"),
                  load_document("speculative_block")["pipeline"]["workflow"]["components"]["speculate"]),),
             "pipeline.workflow.components.speculate_again.contract.id",
             "a second speculative-block component"),
    Mutation("F117", "speculative_block",
             (Set((*SP, "vocabulary"), {"kind": "mapped", "artifact": "target/model.onnx"}),),
             "speculative.vocabulary.kind", "mapped vocabulary"),
    # the map is confined like any artifact the document names, mapped vocabularies or not
    Mutation("H74", "speculative_block",
             (Set((*SP, "vocabulary"), {"kind": "mapped", "artifact": "../vocabulary_map.json"}),),
             "speculative.vocabulary.artifact", "mapped vocabulary whose map lies outside the package",
             also=("F117",)),
    Mutation("F117", "speculative_chained",
             (Set((*GR, "draft_state", "kind"), "full_attention"), Delete((*GR, "draft_state", "update")),
              Set((*GR, "draft_state", "sequence_axis"), 1)),
             f"{GRP}.draft_state.sequence_axis", "recurrent cell with a sequence axis"),
    # a chained proposer that reads token ids (a bare decoder's draft): a decoder with its cache
    Mutation("F115", "speculative_lowered", (Delete((*SPP, "proposer_mask_input")),),
             f"{SPC}.contract.parameters", "token-id proposer without proposer_mask_input"),
    Mutation("F115", "speculative_lowered", (Set((*SPP, "proposal_output"), "logits"),),
             f"{SPC}.contract.parameters.proposal_output",
             "block proposal_output on a token-id chained proposal"),
    Mutation("F115", "speculative_lowered", (Set((*SPP, "proposer_mask_input"), "mask"),),
             f"{SPC}.contract.parameters.proposer_mask_input",
             "token-id proposer mask input its graph lacks"),
    Mutation("F115", "speculative_lowered", (Set((*SPP, "proposer_mask_input"), ""),),
             f"{SPC}.contract.parameters.proposer_mask_input",
             "token-id proposer mask input empty"),
    Mutation("F115", "speculative_lowered", (Set((*SPP, "proposer_positions_input"), "positions"),),
             f"{SPC}.contract.parameters.proposer_positions_input",
             "token-id proposer position input its graph lacks"),
    Mutation("F117", "speculative_lowered",
             (Set((*GR, "draft_cache", "kind"), "recurrent"), Delete((*GR, "draft_cache", "sequence_axis")),
              Set((*GR, "draft_cache", "update"), {"kind": "replace"}),
              Set(("pipeline", "workflow", "state", "draft_kv_0", "recurrence"), {"kind": "invariant"})),
             f"{GRP}.draft_cache.sequence_axis", "token-id proposer cache without a sequence axis"),
)  # fmt: skip

# A telemetry adapter like the loop's timer, with an effect no speculation may run: invoked
# only after the speculative loop, it is outside the speculative region.

VARIANTS = (
    Variant("speculative",
            (Set(("pipeline", "workflow", "effects", "grammar", "speculation_safety", "max_depth"), 2),),
            "grammar rewindable exactly as deep as max_proposal_width"),
    # F61 from the valid side: a component with an unsafe effect invoked after the loop that
    # holds proposer and target is no part of the speculative region
    Variant("speculative",
            (Set(("pipeline", "workflow", "components", "stamp"), TIMER_AFTER),
             Set(("pipeline", "workflow", "effects", "audit"),
                 {"retry": "idempotent", "speculation_safety": {"kind": "none"}}),
             Insert(("pipeline", "workflow", "steps"), 1,
                    {"kind": "invoke", "component": "stamp", "inputs": {},
                     "outputs": {"timestamp": "timing.end"}})),
            "unsafe effect invoked after the speculative loop"),
    # F115 from the valid side: a proposer reading token ids may leave its positions input
    # unnamed (absent, as well as "")
    Variant("speculative_lowered",
            (Delete(("pipeline", "workflow", "components", "speculate", "contract",
                     "parameters", "proposer_positions_input")),),
            "proposer_positions_input absent"),
)  # fmt: skip
