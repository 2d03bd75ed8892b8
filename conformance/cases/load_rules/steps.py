"""Family D, steps and SSA: components and cells named by steps, empty step lists, invoke
ports, value visibility, loops, branches and phis, session cells, emits. Mirrors
``reference_runtime/package/rules/steps.py``."""

from __future__ import annotations

from ..mutations import Delete, Insert, Mutation, Rename, Set, Variant, load_document

WF = ("pipeline", "workflow")
S = (*WF, "steps")
LOOP = (*S, 0)  # kv_decoder's decoding loop
SETUP = (*LOOP, "setup")
BODY = (*LOOP, "steps")
BRANCH = (*SETUP, 1)  # kv_decoder's presence-guarded branch
PHI = (*BRANCH, "outputs", "setup.scores")
TURNS = (*S, 1)  # kv_decoder's session loop
STATE = (*WF, "state")


def _invoke(component: str, inputs: dict, outputs: dict) -> dict:
    return {"kind": "invoke", "component": component, "inputs": inputs, "outputs": outputs}


def _count(count: str, next_: str) -> dict:
    return _invoke("counter", {"count": count}, {"next": next_})


def _branch(predicate: str, cases: dict, **extra) -> dict:
    return {"kind": "branch", "predicate": predicate, "cases": cases, **extra}


def _emit(value: str, output: str, **extra) -> dict:
    return {"kind": "emit", "value": value, "output": output, "mode": "replace", **extra}


def _sequence(*steps) -> dict:
    return {"kind": "sequence", "steps": list(steps)}


def literal_input(dtype: str, *shape, default=True) -> dict:
    """An optional literal input of ``dtype`` and ``shape`` whose value is ``default``."""
    contract = {"dtype": dtype, "rank": len(shape), "shape": list(shape)}
    return {"contract": contract, "role": {"kind": "opaque"}, "source": {"kind": "literal"},
            "required": False, "default": default}  # fmt: skip


# The true case of kv_decoder's presence-guarded branch, as the generator writes it.
BIAS_CASE = _invoke("bias_logits", {"logits": "setup.logits", "bias": "request.bias"},
                    {"biased": "setup.biased"})  # fmt: skip


def _false_case_as_default(source) -> tuple:
    """kv_decoder's presence-guarded branch with its false case moved to its `default`, the
    phi naming ``source`` as the default's value."""
    branch = load_document("kv_decoder")["pipeline"]["workflow"]["steps"][0]["setup"][1]
    return (
        Delete((*BRANCH, "cases", "false")),
        Delete((*PHI, "cases", "false")),
        Set((*BRANCH, "default"), branch["cases"]["false"]),
        Set((*PHI, "default"), source),
    )


# A branch inserted at the kv_decoder root (before the final emit), valid as written.
ROOT_BRANCH = _branch("package.once", {"true": _count("package.no_turns", "extra.next")})
# The kv_decoder session loop, as the generator writes it.
SESSION_LOOP = {
    "kind": "loop",
    "steps": [_count("turn_count", "turn.next")],
    "continue_when": "package.once",
    "max_iterations": "package.one_turn",
    "carried": [{"cell": "turn_count", "next": "turn.next"}],
}
SESSION_TAIL = _sequence(SESSION_LOOP, _emit("turn_count", "turns"))
# An optional per-row flag for kv_decoder, guarded by its presence flag request.has_stop (read
# anywhere outside a branch on that flag, it is B13).
STOP_INPUT = {
    "contract": {"dtype": "bool", "rank": 1, "shape": ["batch"],
                 "batch_layout": {"kind": "request_aligned", "axis": 0}},
    "role": {"kind": "opaque"},
    "source": {"kind": "application", "name": "stop"},
    "required": False,
    "present_as": "request.has_stop",
}  # fmt: skip
WITH_STOP = Set((*WF, "inputs", "request.stop"), STOP_INPUT)
# An optional context limit for kv_decoder, guarded by its presence flag request.has_cap.
WITH_CAP = Set((*WF, "inputs", "request.cap"), {
    "contract": {"dtype": "int64", "rank": 1, "shape": [1]},
    "role": {"kind": "opaque"},
    "source": {"kind": "application", "name": "cap"},
    "required": False,
    "present_as": "request.has_cap",
})  # fmt: skip

# counting_loop rewritten so its loop carries nothing and only emits (a column of `start`,
# each iteration, for as long as the literal `package.go` holds)
_EMITTING_LOOP = (
    Set((*WF, "inputs", "package.go"), literal_input("bool")),
    Set(
        S,
        [
            {
                "kind": "invoke",
                "component": "to_column",
                "inputs": {"x": "start"},
                "outputs": {"y": "column"},
            },
            {"kind": "emit", "output": "final", "mode": "replace", "value": "column"},
            {
                "kind": "loop",
                "max_iterations": "request.max_new_tokens",
                "continue_when": "package.go",
                "steps": [
                    {
                        "kind": "emit",
                        "output": "tokens",
                        "mode": "append",
                        "axis": 1,
                        "value": "column",
                    }
                ],
            },
        ],
    ),
    Delete(STATE),
)

MUTATIONS = (
    # ------------------------------------------------------------------ D26
    Mutation("D26", "kv_decoder", (Set((*BODY, 1, "component"), "samplr"),),
             "pipeline.workflow.steps[0].steps[1].component", "invoke of an unknown component"),
    # the served loop's own checks skip what D26 refuses (its reads are D29: no such cell)
    Mutation("D26", "lowered_decoder", (Set((*S, 0, "carried", 0, "cell"), "nope"),),
             "pipeline.workflow.steps[0].carried[0].cell", "batched loop carrying no cell",
             also=("D29",)),
    Mutation("D26", "lora", (Set((*S, 1, "component"), "projecter"),),
             "pipeline.workflow.steps[1].component", "invoke of an unknown graph component"),
    Mutation("D26", "kv_decoder",
             (Set((*LOOP, "carried", 5), {"cell": "logits", "next": "body.logits"}),),
             "pipeline.workflow.steps[0].carried[5].cell", "carry of an undeclared cell"),
    # ------------------------------------------------------------------ D27
    Mutation("D27", "lora", (Set((*WF, "steps"), []),),
             "pipeline.workflow.steps", "empty root"),
    Mutation("D27", "kv_decoder", (Set((*TURNS, "steps"), []),),
             "pipeline.workflow.steps[1].steps", "empty loop body"),
    Mutation("D27", "kv_decoder", (Set((*BRANCH, "cases", "false"), _sequence()),),
             "pipeline.workflow.steps[0].setup[1].cases.false.steps", "empty branch case"),
    Mutation("D27", "kv_decoder", (Set((*BRANCH, "default"), _sequence()),),
             "pipeline.workflow.steps[0].setup[1].default.steps", "empty branch default"),
    Mutation("D27", "kv_decoder", (Insert(S, 2, {"kind": "sequence", "steps": []}),),
             "pipeline.workflow.steps[2].steps", "empty sequence"),
    # ------------------------------------------------------------------ D28
    Mutation("D28", "kv_decoder", (Set((*BODY, 1, "inputs", "top_k"), "request.seed"),),
             "pipeline.workflow.steps[0].steps[1].inputs.top_k", "unknown input port"),
    Mutation("D28", "kv_decoder", (Set((*BODY, 0, "outputs", "hidden"), "body.hidden"),),
             "pipeline.workflow.steps[0].steps[0].outputs.hidden", "unknown output port"),
    Mutation("D28", "kv_decoder", (Delete((*BODY, 1, "inputs", "seed")),),
             "pipeline.workflow.steps[0].steps[1].inputs", "required port left unbound"),
    Mutation("D28", "lora", (Delete((*S, 1, "inputs", "activations")),),
             "pipeline.workflow.steps[1].inputs", "graph input left unbound"),
    Mutation("D28", "lora", (Set((*S, 1, "inputs", "bias"), "adapted"),),
             "pipeline.workflow.steps[1].inputs.bias", "unknown graph input"),
    Mutation("D28", "kv_decoder", (Set((*BODY, 1, "inputs", "seed"), "request.temperature"),),
             "pipeline.workflow.steps[0].steps[1].inputs.seed", "port dtype mismatch"),
    Mutation("D28", "kv_decoder",
             (Set((*BRANCH, "cases", "true", "inputs", "bias"), "setup.logits"),),
             "pipeline.workflow.steps[0].setup[1].cases.true.inputs.bias",
             "port rank mismatch"),
    Mutation("D28", "lora", (Set((*S, 1, "inputs", "activations"), "request.adapter_segments"),),
             "pipeline.workflow.steps[1].inputs.activations", "graph input dtype mismatch"),
    Mutation("D28", "speculative", (Set((*BODY, 3, "inputs", "tokens"), "lookahead.forced"),),
             "pipeline.workflow.steps[0].steps[3].inputs.tokens", "fixed dimension mismatch"),
    Mutation("D28", "kv_decoder",
             (Set((*BRANCH, "cases", "false", "outputs"), {"scores": "setup.plain"}),),
             "pipeline.workflow.steps[0].setup[1].cases.false.outputs.scores",
             "binding output without its input"),
    # ------------------------------------------------------------------ D29
    Mutation("D29", "kv_decoder", (Set((*BODY, 0, "inputs", "input_ids"), "body.token"),),
             "pipeline.workflow.steps[0].steps[0].inputs.input_ids", "use before definition"),
    Mutation("D29", "kv_decoder",
             (Set((*BODY, 1, "inputs", "temperature"), "request.temprature"),),
             "pipeline.workflow.steps[0].steps[1].inputs.temperature", "misspelt value name"),
    Mutation("D29", "kv_decoder", (Insert(BODY, 2, _count("package.no_turns", "body.token")),),
             "pipeline.workflow.steps[0].steps[2].outputs.next", "defined by two invokes"),
    Mutation("D29", "kv_decoder", (Insert(S, 2, _count("turn_count", "package.no_turns")),),
             "pipeline.workflow.steps[2].outputs.next", "redefines an input"),
    Mutation("D29", "kv_decoder",
             (Set((*BRANCH, "outputs", "setup.logits"),
                  {"cases": {"true": "setup.biased", "false": "setup.plain"}}),),
             'pipeline.workflow.steps[0].setup[1].outputs["setup.logits"]', "phi redefines a value"),
    Mutation("D29", "kv_decoder",
             (Set((*BRANCH, "cases", "true"),
                  _sequence(BIAS_CASE, _count("package.no_turns", "setup.present"))),),
             "pipeline.workflow.steps[0].setup[1].cases.true.steps[1].outputs.next",
             "case redefines an outer value"),
    Mutation("D29", "kv_decoder", (Insert(BODY, 2, _count("package.no_turns", "setup.token")),),
             "pipeline.workflow.steps[0].steps[2].outputs.next", "body redefines a setup value"),
    Mutation("D29", "kv_decoder", (Set((*S, 2, "value"), "turn.next"),),
             "pipeline.workflow.steps[2].value", "body value read after its loop"),
    Mutation("D29", "kv_decoder", (Insert(S, 2, {**ROOT_BRANCH, "predicate": "package.onse"}),),
             "pipeline.workflow.steps[2].predicate", "misspelt branch predicate"),
    Mutation("D29", "kv_decoder", (Set((*SETUP, 2, "inputs", "logits"), "setup.biased"),),
             "pipeline.workflow.steps[0].setup[2].inputs.logits", "case value read after branch"),
    Mutation("D29", "kv_decoder",
             (Set((*BRANCH, "cases", "false", "inputs", "logits"), "setup.biased"),),
             "pipeline.workflow.steps[0].setup[1].cases.false.inputs.logits",
             "value of a sibling case"),
    Mutation("D29", "kv_decoder", (Set((*SETUP, 2, "inputs", "logits"), "body.logits"),),
             "pipeline.workflow.steps[0].setup[2].inputs.logits", "setup reads a body value"),
    Mutation("D29", "kv_decoder", (Set((*TURNS, "steps", 0, "inputs", "count"), "loop.step"),),
             "pipeline.workflow.steps[1].steps[0].inputs.count", "iteration value outside loop"),
    Mutation("D29", "kv_decoder", (Set((*SETUP, 2, "inputs", "active"), "active"),),
             "pipeline.workflow.steps[0].setup[2].inputs.active", "cell read in loop setup"),
    Mutation("D29", "kv_decoder", (Insert(S, 1, _emit("turn_count", "turns")), Delete((*S, 3))),
             "pipeline.workflow.steps[1].value", "cell read before its loop"),
    Mutation("D29", "kv_decoder",
             (Set((*LOOP, "carried", 5), {"cell": "active", "next": "body.active"}),),
             "pipeline.workflow.steps[0].carried[5].cell", "cell carried twice by one loop"),
    Mutation("D29", "kv_decoder",
             (Set((*LOOP, "carried", 5), {"cell": "turn_count", "next": "turn_count"}),),
             "pipeline.workflow.steps[1].carried[0].cell", "cell carried by two loops of one scope"),
    Mutation("D29", "kv_decoder", (Set((*LOOP, "carried", 3, "next"), "body.finished"),),
             "pipeline.workflow.steps[0].carried[3].next", "undefined next value"),
    Mutation("D29", "kv_decoder", (Set((*LOOP, "iteration", "value"), "active"),),
             "pipeline.workflow.steps[0].iteration.value", "iteration value shadows a cell"),
    # The bound is read once, at entry, where the loop's own cells are not yet values: a bound
    # naming one (which the body would change) is refused, never re-read every pass.
    Mutation("D29", "session_counter",
             (Set(("pipeline", "workflow", "steps", 0, "max_iterations"), "count"),),
             "pipeline.workflow.steps[0].max_iterations", "max_iterations names its own cell"),
    # ------------------------------------------------------------------ D30
    Mutation("D30", "kv_decoder", (Set((*LOOP, "max_iterations"), "request.temperature"),),
             "pipeline.workflow.steps[0].max_iterations", "float max_iterations"),
    Mutation("D30", "kv_decoder", (Set((*LOOP, "max_iterations"), "request.seed"),),
             "pipeline.workflow.steps[0].max_iterations", "per-row max_iterations"),
    Mutation("D30", "kv_decoder", (Set((*TURNS, "max_iterations"), "package.once"),),
             "pipeline.workflow.steps[1].max_iterations", "bool max_iterations"),
    Mutation("D30", "kv_decoder",
             (Set((*WF, "inputs", "package.grid"), literal_input("int64", 1, 1, default=1)),
              Set((*TURNS, "max_iterations"), "package.grid")),
             "pipeline.workflow.steps[1].max_iterations", "rank-2 max_iterations"),
    # ------------------------------------------------------------------ D31
    Mutation("D31", "kv_decoder", (Set((*LOOP, "iteration", "contract", "dtype"), "int32"),),
             "pipeline.workflow.steps[0].iteration.contract.dtype", "int32 iteration"),
    Mutation("D31", "kv_decoder",
             (Set((*LOOP, "iteration", "contract"), {"dtype": "int64", "rank": 2,
                                                       "shape": [1, 1]}),),
             "pipeline.workflow.steps[0].iteration.contract.rank", "rank-2 iteration"),
    Mutation("D31", "kv_decoder",
             (Set((*LOOP, "iteration", "contract"), {"dtype": "int64", "rank": 1}),),
             "pipeline.workflow.steps[0].iteration.contract", "rank-1 iteration without shape"),
    Mutation("D31", "kv_decoder",
             (Set((*LOOP, "iteration", "contract"), {"dtype": "int64", "rank": 1,
                                                       "shape": [1, 1]}),),
             "pipeline.workflow.steps[0].iteration.contract.shape", "iteration shape vs rank"),
    Mutation("D31", "kv_decoder",
             (Set((*LOOP, "iteration", "contract"),
                  {"dtype": "int64", "rank": 0, "shape": [],
                   "batch_layout": {"kind": "request_aligned", "axis": 0}}),),
             "pipeline.workflow.steps[0].iteration.contract.batch_layout.axis",
             "scalar iteration with a request axis"),
    Mutation("D31", "kv_decoder",
             (Set((*LOOP, "iteration", "contract"),
                  {"dtype": "int64", "rank": 1, "shape": ["batch"],
                   "batch_layout": {"kind": "request_aligned", "axis": 1}}),),
             "pipeline.workflow.steps[0].iteration.contract.batch_layout.axis",
             "iteration request axis beyond its rank"),
    # ------------------------------------------------------------------ B13 through a loop
    # Every value a loop reads is read like any other: an optional input outside a branch on
    # its presence flag is B13 as a loop's predicate, a cell's initializer, initial or next value.
    Mutation("B13", "kv_decoder", (WITH_STOP, Set((*LOOP, "continue_when"), "request.stop")),
             "pipeline.workflow.steps[0].continue_when", "loop predicate is an optional input"),
    Mutation("B13", "kv_decoder",
             (WITH_STOP, Set((*STATE, "done", "initializer"), "request.stop")),
             "pipeline.workflow.state.done.initializer", "cell initializer is an optional input"),
    Mutation("B13", "kv_decoder", (WITH_STOP, Set((*LOOP, "carried", 3, "initial"), "request.stop")),
             "pipeline.workflow.steps[0].carried[3].initial", "carried initial is an optional input"),
    Mutation("B13", "kv_decoder", (WITH_STOP, Set((*LOOP, "carried", 3, "next"), "request.stop")),
             "pipeline.workflow.steps[0].carried[3].next", "carried next is an optional input"),
    Mutation("B13", "kv_decoder",
             (WITH_CAP, Set((*STATE, "kv", "recurrence", "max"), "request.cap")),
             "pipeline.workflow.state.kv.recurrence.max", "recurrence max is an optional input"),
    # ------------------------------------------------------------------ H72 from loops
    # What a loop uses derives manifest capabilities: a loop alone needs nested_control_flow
    # (counting_loop has no branch), carrying a cell alone needs linear_effects (session_counter
    # emits only after its loop).
    Mutation("H72", "counting_loop",
             (Set((*WF, "manifest", "capabilities"),
                  ["workflow_ssa", "linear_effects", "typed_emit"]),),
             "pipeline.workflow.manifest.capabilities", "loop without nested_control_flow"),
    Mutation("H72", "session_counter",
             (Set((*WF, "manifest", "capabilities"),
                  ["workflow_ssa", "nested_control_flow", "typed_emit", "session_state_lease"]),),
             "pipeline.workflow.manifest.capabilities", "carried cell without linear_effects"),
    Mutation("H72", "counting_loop",
             (*_EMITTING_LOOP,
              Set((*WF, "manifest", "capabilities"),
                  ["workflow_ssa", "nested_control_flow", "typed_emit"])),
             "pipeline.workflow.manifest.capabilities",
             "a loop that only emits, without linear_effects"),
    # ------------------------------------------------------------------ D32
    Mutation("D32", "kv_decoder", (Set((*LOOP, "continue_when"), "body.active"),),
             "pipeline.workflow.steps[0].continue_when", "continue_when from the body"),
    Mutation("D32", "kv_decoder", (Set((*LOOP, "continue_when"), "lengths"),),
             "pipeline.workflow.steps[0].continue_when", "integer continue_when"),
    Mutation("D32", "kv_decoder",
             (Set((*WF, "inputs", "package.grid"), literal_input("bool", 1, 1)),
              Set((*TURNS, "continue_when"), "package.grid")),
             "pipeline.workflow.steps[1].continue_when", "rank-2 continue_when"),
    # ------------------------------------------------------------------ D33
    Mutation("D33", "kv_decoder", (Set((*STATE, "token", "initializer"), "body.token"),),
             "pipeline.workflow.state.token.initializer", "initializer not in scope"),
    Mutation("D33", "kv_decoder", (Set((*STATE, "done", "initializer"), "package.no_turns"),),
             "pipeline.workflow.state.done.initializer", "initializer of the wrong type"),
    Mutation("D33", "kv_decoder", (Set((*LOOP, "carried", 1, "initial"), "body.token"),),
             "pipeline.workflow.steps[0].carried[1].initial", "initial not in scope"),
    Mutation("D33", "kv_decoder", (Set((*LOOP, "carried", 1, "initial"), "request.seed"),),
             "pipeline.workflow.steps[0].carried[1].initial", "initial of the wrong rank"),
    Mutation("D33", "kv_decoder", (Set((*LOOP, "carried", 3, "next"), "body.lengths"),),
             "pipeline.workflow.steps[0].carried[3].next", "next of the wrong dtype"),
    Mutation("D33", "kv_decoder", (Set((*STATE, "token", "initializer"), "setup.lengths"),),
             "pipeline.workflow.state.token.initializer", "initializer of the wrong rank"),
    Mutation("D33", "kv_decoder", (Set((*STATE, "lengths", "initializer"), "turn.next"),),
             "pipeline.workflow.state.lengths.initializer", "initializer defined after the loop"),
    # ------------------------------------------------------------------ D34
    Mutation("D34", "kv_decoder", (Set((*STATE, "kv", "recurrence", "max"), "body.lengths"),),
             "pipeline.workflow.state.kv.recurrence.max", "max not in scope"),
    Mutation("D34", "kv_decoder", (Set((*STATE, "kv", "recurrence", "max"), "request.seed"),),
             "pipeline.workflow.state.kv.recurrence.max", "per-row max"),
    Mutation("D34", "kv_decoder",
             (Set((*STATE, "kv", "recurrence", "max"), "request.temperature"),),
             "pipeline.workflow.state.kv.recurrence.max", "float max"),
    Mutation("D34", "kv_decoder",
             (Set((*STATE, "token", "recurrence"),
                  {"kind": "growing", "axis": 1, "increment": "request.temperature",
                   "max": "package.max_context"}),),
             "pipeline.workflow.state.token.recurrence.increment", "float increment"),
    # ------------------------------------------------------------------ D35
    Mutation("D35", "kv_decoder", (Set((*BRANCH, "cases"), [BIAS_CASE]),),
             "pipeline.workflow.steps[0].setup[1].cases", "branch cases written as a list"),
    Mutation("D35", "kv_decoder",
             (Delete((*BRANCH, "cases", "true")),
              Set((*BRANCH, "default"),
                  {"kind": "branch", "predicate": "request.has_bias", "cases": [BIAS_CASE]})),
             "pipeline.workflow.steps[0].setup[1].default.cases",
             "a branch default whose own cases are written as a list"),
    Mutation("D35", "kv_decoder",
             (Insert(S, 2, {**ROOT_BRANCH, "predicate": "request.temperature"}),),
             "pipeline.workflow.steps[2].predicate", "float predicate"),
    Mutation("D35", "kv_decoder",
             (Insert(S, 2, {**ROOT_BRANCH, "predicate": "package.grid"}),
              Set((*WF, "inputs", "package.grid"), literal_input("bool", 2))),
             "pipeline.workflow.steps[2].predicate", "two-element predicate"),
    Mutation("D35", "kv_decoder",
             (Insert(S, 2, _branch("package.once", {"1": _count("package.no_turns", "x")})),),
             'pipeline.workflow.steps[2].cases["1"]', "bool predicate with integer case"),
    Mutation("D35", "kv_decoder",
             (Insert(S, 2, {**ROOT_BRANCH, "predicate": "package.one_turn"}),),
             "pipeline.workflow.steps[2].cases.true", "integer predicate with bool case"),
    Mutation("D35", "kv_decoder",
             (Insert(S, 2, _branch("package.one_turn", {"0": _count("package.no_turns", "x"),
                                                        "-0": _count("package.no_turns", "y")})),),
             'pipeline.workflow.steps[2].cases["-0"]', "two cases for one integer"),
    Mutation("D35", "kv_decoder", (Set((*BRANCH, "cases"), {}),),
             "pipeline.workflow.steps[0].setup[1].cases", "no cases"),
    Mutation("D35", "kv_decoder", (Rename((*BRANCH, "cases", "false"), "no"),),
             "pipeline.workflow.steps[0].setup[1].cases.no", "case key neither bool nor integer"),
    # ------------------------------------------------------------------ D36
    Mutation("D36", "kv_decoder", (Delete((*PHI, "cases", "false")),),
             'pipeline.workflow.steps[0].setup[1].outputs["setup.scores"].cases',
             "phi without a source for a case"),
    Mutation("D36", "kv_decoder", (Set((*PHI, "cases", "2"), "setup.plain"),),
             'pipeline.workflow.steps[0].setup[1].outputs["setup.scores"].cases["2"]',
             "phi source for an unknown case"),
    Mutation("D36", "kv_decoder", (Set((*PHI, "cases", "false"), "setup.plane"),),
             'pipeline.workflow.steps[0].setup[1].outputs["setup.scores"].cases.false',
             "phi source not visible"),
    Mutation("D36", "kv_decoder", _false_case_as_default("setup.plane"),
             'pipeline.workflow.steps[0].setup[1].outputs["setup.scores"].default',
             "phi default source not visible"),
    Mutation("D36", "kv_decoder", (Set((*PHI, "cases", "false"), "request.temperature"),),
             'pipeline.workflow.steps[0].setup[1].outputs["setup.scores"].cases.false',
             "phi sources disagree"),
    Mutation("D36", "kv_decoder", (Set((*PHI, "cases", "false"), ["setup.plain"]),),
             'pipeline.workflow.steps[0].setup[1].outputs["setup.scores"].cases.false',
             "phi source written as a list (a value name, not a step)"),
    Mutation("D36", "kv_decoder", _false_case_as_default(["setup.plain"]),
             'pipeline.workflow.steps[0].setup[1].outputs["setup.scores"].default',
             "phi default written as a list"),
    # a binding without a contract copies its input: its output has the input's type
    Mutation("D36", "kv_decoder",
             (Set((*BRANCH, "cases", "false", "inputs", "logits"), "request.input_ids"),),
             'pipeline.workflow.steps[0].setup[1].outputs["setup.scores"].cases.false',
             "phi source a binding's copy of another dtype"),
    Mutation("D36", "kv_decoder", (Set((*PHI, "default"), "setup.plain"),),
             'pipeline.workflow.steps[0].setup[1].outputs["setup.scores"].default',
             "phi default without a branch default"),
    Mutation("D36", "kv_decoder",
             (Set((*BRANCH, "default"),
                  _invoke("copy_logits", {"logits": "setup.logits"}, {"logits": "setup.copy"})),),
             'pipeline.workflow.steps[0].setup[1].outputs["setup.scores"]',
             "branch default without a phi default"),
    # ------------------------------------------------------------------ D37
    Mutation("D37", "kv_decoder",
             (Set((*S, 1), _branch("package.once", {"true": SESSION_TAIL})), Delete((*S, 2))),
             "pipeline.workflow.steps[1].cases.true", "session loop in a case without phi"),
    Mutation("D37", "kv_decoder",
             (Set((*S, 1), _branch("package.once", {"true": SESSION_TAIL}, outputs={
                 "turns.final": {"cases": {"true": "package.no_turns"}}})), Delete((*S, 2))),
             "pipeline.workflow.steps[1].cases.true", "phi exports another value"),
    Mutation("D37", "kv_decoder",
             (Set((*S, 1), _branch("package.once", {"true": SESSION_LOOP}, outputs={
                 "turns.final": {"cases": {"true": "turn_count"}}})),
              Set((*S, 2, "value"), "turns.final")),
             "pipeline.workflow.steps[1].cases.true", "cell exported under another name"),
    Mutation("D37", "kv_decoder",
             (Set((*S, 1), _branch("package.once",
                                   {"false": _count("package.no_turns", "extra.next")},
                                   default=SESSION_TAIL)), Delete((*S, 2))),
             "pipeline.workflow.steps[1].default", "session loop in the default case"),
    # ------------------------------------------------------------------ D38
    Mutation("D38", "kv_decoder", (Set((*S, 2, "output"), "turn"),),
             "pipeline.workflow.steps[2].output", "emit to an unknown output"),
    Mutation("D38", "kv_decoder", (Set((*BODY, 2, "output"), "token"),),
             "pipeline.workflow.steps[0].steps[2].output", "per-row emit to an unknown output"),
    Mutation("D38", "kv_decoder", (Set((*BODY, 2, "when"), "body.lengths"),),
             "pipeline.workflow.steps[0].steps[2].when", "integer when"),
    Mutation("D38", "kv_decoder", (Set((*BODY, 2, "valid_length"), "body.active"),),
             "pipeline.workflow.steps[0].steps[2].valid_length", "bool valid_length"),
    Mutation("D38", "kv_decoder", (Set((*BODY, 2, "valid_length"), "body.token"),),
             "pipeline.workflow.steps[0].steps[2].valid_length", "rank-2 valid_length"),
    Mutation("D38", "kv_decoder",
             (Set((*WF, "inputs", "package.shared_token"),
                  {**literal_input("int64", 1, 1, default=[0]),
                   "contract": {"dtype": "int64", "rank": 2, "shape": [1, 1],
                                "batch_layout": {"kind": "shared"}}}),
              Set((*BODY, 2, "value"), "package.shared_token")),
             "pipeline.workflow.steps[0].steps[2].value", "per-row emit of a shared value",
             also=("D40", "D42")),  # the output is request-aligned; served outputs are per row
    # ------------------------------------------------------------------ D39
    Mutation("D39", "media", (Set((*S, 3, "value"), "request.image"),),
             "pipeline.workflow.steps[3].value", "emit of the wrong dtype"),
    Mutation("D39", "media", (Set((*S, 2, "value"), "vision.audio"),),
             "pipeline.workflow.steps[2].value", "emit of the wrong rank"),
    Mutation("D39", "lora", (Set((*S, 2, "value"), "request.adapter_segments"),),
             "pipeline.workflow.steps[2].value", "request-aligned emit of the wrong dtype"),
    Mutation("D39", "kv_decoder", (Set((*BODY, 2, "value"), "body.lengths"),),
             "pipeline.workflow.steps[0].steps[2].value", "per-row emit of the wrong rank"),
    # ------------------------------------------------------------------ D40
    Mutation("D40", "media",
             (Set((*WF, "outputs", "audio", "contract"),
                  {"dtype": "float32", "rank": 3, "shape": [1, 2, "samples"],
                   "batch_layout": {"kind": "request_aligned", "axis": 0}}),),
             "pipeline.workflow.steps[3].value", "shared value into a request-aligned output"),
    Mutation("D40", "lora",
             (Set((*WF, "outputs", "result", "contract", "batch_layout"),
                  {"kind": "request_expanded", "axis": 0, "factor": 2}),
              Set((*S, 2, "value"), "adapted")),
             "pipeline.workflow.steps[2].value", "aligned value into an expanded output"),
    # ------------------------------------------------------------------ D41
    Mutation("D41", "lora",
             (Set((*WF, "outputs", "result", "contract", "batch_layout"), {"kind": "shared"}),
              Set((*S, 2, "when"), "request.adapter_active")),
             "pipeline.workflow.outputs.result.contract.batch_layout",
             "per-row emit into a shared output"),
    Mutation("D41", "lora",
             (Set((*WF, "outputs", "result", "contract", "batch_layout"),
                  {"kind": "request_expanded", "axis": 0, "factor": 1}),
              Set((*WF, "manifest", "capabilities", 4), "emit_valid_length"),
              Set((*S, 2, "valid_length"), "request.adapter_counts")),
             "pipeline.workflow.outputs.result.contract.batch_layout",
             "valid_length emit into an expanded output"),
    # ------------------------------------------------------------------ D42
    Mutation("D42", "kv_decoder",
             (Set((*WF, "outputs", "turns", "contract"),
                  {"dtype": "int64", "rank": 1, "shape": [1]}),
              Set((*S, 2, "value"), "package.one_turn")),
             "pipeline.workflow.steps[2].value", "serving emit of a shared vector"),
    Mutation("D42", "static_cache",
             (Set((*WF, "outputs", "capacity"), {"contract": {"dtype": "int64", "rank": 1,
                                                              "shape": [1]}, "role": "tensor",
                                                 "stage": "pre_adapter"}),
              Insert(S, 3, _emit("package.capacity", "capacity"))),
             "pipeline.workflow.steps[3].value", "serving emit of a shared literal"),
    # D28: a declared output port left unbound
    Mutation("D28", "kv_decoder", (Delete((*SETUP, 2, "outputs", "done")),),
             "pipeline.workflow.steps[0].setup[2].outputs", "declared output port left unbound"),
    # D30: a rank-one bound must have the static shape [1]
    Mutation("D30", "kv_decoder",
             (Set((*WF, "inputs", "request.max_tokens"),
                  {"contract": {"dtype": "int64", "rank": 1},
                   "role": {"kind": "runtime", "version": "1.0", "role": "max_output_tokens"},
                   "source": {"kind": "request"}}),),
             "pipeline.workflow.steps[0].max_iterations", "rank-1 bound without shape [1]"),
    # D35: a rank-one predicate must have the static shape [1]
    Mutation("D35", "branching", (Delete((*WF, "inputs", "mode", "contract", "shape")),),
             "pipeline.workflow.steps[1].predicate", "rank-1 predicate without shape [1]"),
    # D39: an emitted value whose fixed extent differs from the output's
    Mutation("D39", "events_and_appends",
             (Set((*WF, "outputs", "latest", "contract", "shape"), ["batch", 3]),),
             "pipeline.workflow.steps[0].steps[2].value", "emit of a fixed extent unlike the output"),
)  # fmt: skip

VARIANTS = (
    # a branch default that updates a session cell exports it through the phi's default
    Variant("session_branch",
            (Delete((*S, 0, "cases", "1")),
             Set((*S, 0, "default"),
                 load_document("session_branch")["pipeline"]["workflow"]["steps"][0]["cases"]["1"]),
             Delete((*S, 0, "outputs", "count", "cases", "1")),
             Set((*S, 0, "outputs", "count", "default"), "count")),
            "session cell updated by a branch default and exported by the phi's default"),
    Variant("counting_loop", _EMITTING_LOOP, "a loop that carries nothing and only emits"),
    # D31 from the valid side: a rank-1 iteration value may be request-aligned on its axis 0
    Variant("kv_decoder",
            (Set((*LOOP, "iteration", "contract"),
                 {"dtype": "int64", "rank": 1, "shape": ["batch"],
                  "batch_layout": {"kind": "request_aligned", "axis": 0}}),),
            "per-row iteration on its request axis 0"),
    # D37 is about session cells: a case may update an invocation cell without a phi for it
    Variant("kv_decoder",
            (Set((*S, 1), _branch("package.once", {"true": SESSION_TAIL})), Delete((*S, 2)),
             Set((*STATE, "turn_count", "scope"), "invocation"),
             Delete((*STATE, "turn_count", "session"))),
            "invocation cell updated in a case without phi"),
)  # fmt: skip
