"""The rule table: every load-time rule a package can break, with its stable code.

Codes are a family letter plus a number. Numbers 1-75 follow the rejection list of the format
(FORMAT.md section 10, which the docs call "format rule N"); numbers from 76 up are rules this
runtime adds where the format is silent. A code never changes meaning once published.

``docs/rules.md`` is generated from this table (``tools/generate_docs.py``); a test fails when
the two drift, and another fails when a code has no negative test.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    family: str
    summary: str
    fix: str
    spec: str  # where the rule comes from
    phase: str = "load"  # "load": refused by validation; "run": refused by the interpreter


FAMILIES = {
    "A": "Parsing",
    "B": "Inputs and outputs",
    "C": "Components",
    "D": "Steps and SSA",
    "E": "State and serving",
    "F": "Speculative decoding",
    "G": "Adapters, preprocessing, generation, profiles",
    "H": "Admission and artifacts",
}


def _r(code, name, summary, fix, spec=None, phase="load") -> Rule:
    number = int(code[1:])
    return Rule(
        code=code,
        name=name,
        family=code[0],
        summary=summary,
        fix=fix,
        spec=spec or (f"format rule {number}" if number <= 75 else "reference runtime"),
        phase=phase,
    )


RULE_LIST: tuple[Rule, ...] = (
    # ------------------------------------------------------------------ A. parsing
    _r(
        "A01",
        "unknown-key",
        "A key that the format does not define.",
        "Remove the key or correct its spelling; the format rejects unknown keys.",
    ),
    _r(
        "A02",
        "removed-key",
        "A key that was removed from the format.",
        "Delete the key; the message says what replaced it.",
    ),
    _r(
        "A03",
        "missing-field",
        "A required field is missing.",
        "Add the field (see docs/format.md for its meaning).",
    ),
    _r(
        "A04",
        "enum-value",
        "A value outside the field's vocabulary, or an authored `transfer` step.",
        "Use one of the listed values; transfers are planned by the runtime, never authored.",
    ),
    _r(
        "A05",
        "wrong-type",
        "A value of the wrong type or out of range: a negative rank or axis, a width of 0, "
        "an empty required string or list, or a mapping key that is not a string.",
        "Give the value the documented type and range (quote YAML keys such as 'true').",
    ),
    _r(
        "A06",
        "model-io-beside-pipeline",
        "Legacy `model.io` declared beside `pipeline`.",
        "Delete `model.io`: the workflow is the only graph ABI of a workflow package.",
    ),
    # ------------------------------------------------------------------ B. inputs/outputs
    _r(
        "B07",
        "shape-rank-mismatch",
        "A contract `shape` whose length differs from `rank`, or a batch-layout axis at or "
        "beyond the rank.",
        "Make `shape` list exactly `rank` dimensions (an integer or a symbol name each).",
    ),
    _r(
        "B08",
        "bad-dtype",
        "A dtype outside the vocabulary, or `string` on a workflow tensor.",
        "Use a numeric or bool dtype (float32, float16, bfloat16, int64, ..., bool).",
    ),
    _r(
        "B09",
        "expansion-factor-zero",
        "`request_expanded` with `factor` below 1.",
        "Set `factor` to the number of contiguous rows per request (at least 1).",
    ),
    _r(
        "B10",
        "request-input-opaque-role",
        "A request-sourced input with an opaque role.",
        "Give the input a runtime role (`{kind: runtime, version: '1.0', role: ...}`) "
        "or use an application source.",
    ),
    _r(
        "B11",
        "optional-input-without-fallback",
        "An optional input with neither `default` nor `present_as`.",
        "Add a `default` literal, or a `present_as` flag and read the input only under it.",
    ),
    _r(
        "B12",
        "present-as-misused",
        "`present_as` on a required input or one with a default, on a literal or artifact "
        "source, on a request role other than media/constraint/session_id, or clashing with "
        "another name.",
        "Use `present_as` only on optional request (media, constraint, session_id) or "
        "application inputs without a default, with a name no other value uses.",
    ),
    _r(
        "B13",
        "optional-input-read-outside-presence",
        'An input guarded by `present_as` is read outside the `"true"` case of a branch on '
        "exactly that flag.",
        "Move the read into a branch whose predicate is the input's `present_as` flag.",
    ),
    _r(
        "B14",
        "bad-media-block",
        "A `media` block on a non-audio output, a zero or missing sample rate or channel "
        "count, or a WAV dtype that does not match the output's stage.",
        "Declare `media` only on audio outputs, with positive rates and channels; pre-adapter "
        "audio is float samples, post-adapter audio is uint8 bytes.",
    ),
    _r(
        "B15",
        "bad-value-range",
        "An image output without `value_range`, or `value_range` on a non-image output.",
        "Declare `value_range` exactly on outputs whose role is `image`.",
    ),
    # ------------------------------------------------------------------ C. components
    _r(
        "C16",
        "bad-component-name",
        "A component name that is empty or contains `.`.",
        "Rename the component without dots (dots are reserved for value names).",
    ),
    _r(
        "C17",
        "empty-artifact",
        "An ONNX component with an empty `artifact`.",
        "Give the path of the ONNX graph, relative to the metadata file.",
    ),
    _r(
        "C18",
        "adapter-abi-not-pinned",
        "An adapter ABI that the manifest does not pin (`adapter_abis`), pins at another "
        "version, or that this runtime does not support (also a manifest pin of an ABI or "
        "version the runtime does not support).",
        "Pin `manifest.adapter_abis[abi]` to the component's version and use an ABI the "
        "runtime lists (`reference-runtime capabilities` names them).",
    ),
    _r(
        "C19",
        "bad-contract",
        "A contract with an empty id or version, or a contract binding or port role naming a "
        "port the component does not have.",
        "Give `contract.id` and `contract.version`, and bind roles only to declared ports.",
    ),
    _r(
        "C20",
        "adapter-contract-mismatch",
        "An adapter whose contract does not match its ABI, a missing or wrong `action`, or a "
        "missing required binding.",
        "Use the ABI's own contract id and version, a valid `parameters.action` and every "
        "binding the action requires.",
    ),
    _r(
        "C21",
        "bad-overridable-component",
        "`application_overridable` on a component without a contract or not ONNX.",
        "Only ONNX components with a contract can be overridden by the application.",
    ),
    _r(
        "C22",
        "overlay-target-unknown",
        "A parameter-overlay component without a target, or naming an unknown target.",
        "Set `parameters.component` and `parameters.parameter` to an "
        "`adapters.target_manifest` target.",
    ),
    _r(
        "C23",
        "bad-row-scope",
        "Row-scoped state on request-aligned ports without `row_scope`, or a `row_scope.axis` "
        "that is not the request axis of the component's request-aligned ports, or "
        "`stateful: false` on a component with effects.",
        "Declare `row_scope: {axis: <request axis>, stateful: true}` on stateful row-scoped "
        "components, matching their ports' request axis.",
    ),
    _r(
        "C24",
        "bad-effect",
        "An undeclared or empty effect domain, or `rewindable` with depth 0.",
        "Declare each effect under `pipeline.workflow.effects` with `max_depth` >= 1.",
    ),
    _r(
        "C25",
        "missing-sequence-role",
        "The only ONNX component owns attention state but declares neither a `token_ids` "
        "nor an `inputs_embeds` port role.",
        "Add `ports.roles: {<input>: token_ids}` (or `inputs_embeds`).",
    ),
    # ------------------------------------------------------------------ D. steps and SSA
    _r(
        "D26",
        "unknown-component-or-cell",
        "A step names an unknown component or cell.",
        "Declare it under `components` / `state`, or fix the name.",
    ),
    _r(
        "D27",
        "empty-steps",
        "An empty root, loop body, branch case or sequence.",
        "Give it at least one step (only a loop's `setup` may be empty).",
    ),
    _r(
        "D28",
        "invoke-port-mismatch",
        "An invoke binds an unknown port, leaves a required port or graph input unbound, or "
        "binds a value whose dtype, rank or fixed dimension disagrees with the port.",
        "Bind exactly the declared ports (or the graph's inputs and outputs), with values "
        "whose contracts match.",
    ),
    _r(
        "D29",
        "ssa-violation",
        "A value read before it is defined, or defined twice.",
        "Define each name once, before its first use, in a scope that reaches the reader.",
    ),
    _r(
        "D30",
        "bad-max-iterations",
        "`max_iterations` that is not an integer `[]` or `[1]`.",
        "Use an integer scalar (rank 0, or rank 1 with shape [1]).",
    ),
    _r(
        "D31",
        "bad-iteration",
        "An `iteration` contract that is not int64, has rank > 1, or "
        "whose shape does not match its rank.",
        "Declare the iteration value as int64 `[]`, `[1]` or `[batch]`.",
    ),
    _r(
        "D32",
        "bad-continue-when",
        "`continue_when` not visible before the body, or not a bool of rank <= 1.",
        "Use a bool `[]`, `[1]` or `[B]` value defined before the loop, or a carried cell.",
    ),
    _r(
        "D33",
        "bad-carry",
        "A carried cell whose `initializer` is not in scope at loop entry, with no start value "
        "at all, or whose `initial` or `next` is incompatible with the cell's contract.",
        "Make the initializer a value visible at loop entry and give `initial`/`next` values "
        "with the cell's dtype and rank.",
    ),
    _r(
        "D34",
        "bad-recurrence-bound",
        "A recurrence `increment` or `max` not in scope at loop entry, or not an integer scalar.",
        "Name an integer `[]` or `[1]` value visible at loop entry.",
    ),
    _r(
        "D35",
        "bad-branch",
        "A branch predicate of the wrong dtype or shape, or bad `cases`.",
        "Branch on one bool or int64 value (`[]` or `[1]`) with cases keyed 'true'/'false' or "
        "decimal text.",
    ),
    _r(
        "D36",
        "bad-phi",
        "A phi output with a missing, unknown or incompatible source.",
        "Name, for every case (and `default` exactly when the branch has one), a value with "
        "the same dtype and rank.",
    ),
    _r(
        "D37",
        "session-cell-not-exported",
        "A session cell updated inside a branch case but not exported through a phi output.",
        "Add a phi output named after the cell that takes its value from each case.",
    ),
    _r(
        "D38",
        "bad-emit-target",
        "An emit to an unknown output, a `when`/`valid_length` of the wrong dtype or rank, or "
        "a per-row control on a value without a request axis.",
        "Emit to a declared output; `when` is bool and `valid_length` integer, each `[]`, "
        "`[1]` or `[B]`; per-row emits need a request-aligned value.",
    ),
    _r(
        "D39",
        "emit-contract-mismatch",
        "A `valid_length` emit of a rank-0 value, or an emit whose value's dtype or rank "
        "differs from the output's.",
        "Emit a value of rank >= 1 whose dtype and rank match the output.",
    ),
    _r(
        "D40",
        "emit-layout-mismatch",
        "The emitted value's batch layout differs from the output's, or emits into one output "
        "mix layouts.",
        "Give the value and the output the same `batch_layout`.",
    ),
    _r(
        "D41",
        "ragged-emit-needs-request-axis",
        "A per-row (`when` / `valid_length`) emit into an output that is not `request_aligned`.",
        "Declare the output `batch_layout: {kind: request_aligned, axis: 0}`.",
    ),
    _r(
        "D42",
        "serving-shared-emit",
        "A serving workflow emits a `shared` value of rank > 0.",
        "Emit request-aligned values (per-row results) from serving workflows.",
    ),
    # ------------------------------------------------------------------ E. state and serving
    _r(
        "E45",
        "recurrence-axis-out-of-range",
        "A recurrence axis >= the cell's rank.",
        "Use an axis below the cell's rank.",
    ),
    _r(
        "E46",
        "bad-session-block",
        "A `session` block on an invocation-scoped cell, with a policy other than `exclusive`, "
        "with `ttl_seconds` or `optimistic_metadata_version`, or an invalid continuation.",
        "Use `session: {policy: exclusive}` on `scope: session` cells; see docs/format.md for "
        "continuations.",
    ),
    _r(
        "E47",
        "bad-service-group-cell",
        "A cell naming an unknown group; a `sequence_axis` beyond the rank or unlike the "
        "recurrence axis; a varying cell whose group lacks `sequence_axis`; a grouped cell "
        "without a request axis; or a growing cell whose `increment` is not `serving.accepted_len`.",
        "Point `service_group` at a declared group whose `sequence_axis` is the cell's "
        "recurrence axis, with a request-aligned contract.",
    ),
    _r(
        "E48",
        "bad-state-management",
        "A grouped cell not `management: runtime`; a runtime/external cell without "
        "`release_boundary`; a workflow cell with one; or a `session` boundary on an "
        "invocation-scoped cell.",
        "Grouped cells are runtime-managed with a release boundary; workflow cells have none.",
    ),
    _r(
        "E49",
        "runtime-state-published",
        "Runtime- or externally-managed state reaches an output though its group has no "
        "`checkpoint`.",
        "Declare a `checkpoint` on the group, or do not publish the cell.",
    ),
    _r(
        "E50",
        "bad-serving",
        "A serving value that is missing, not visible at the end of the workflow, of the wrong "
        "dtype or shape, or a serving section without groups or without `accepted_len`.",
        "`active`/`done` are bool and `accepted_len` integer, each `[]` or request-aligned "
        "`[B]`; declare at least one state group.",
    ),
    _r(
        "E51",
        "bad-group",
        "A group with an empty layout, a `logical_lengths`/`total_length` that is not an "
        "integer cell, a cascade to an unknown group, or `rollback_positions: 0`.",
        "Fix the group: lengths name integer cells, cascades name groups, rollback >= 1.",
    ),
    _r(
        "E52",
        "bad-group-port",
        "A group `ports` entry naming an unknown component, cell or port; a cell bound to "
        "another group; or a read-write alias without an output.",
        "Bind each cell of the group to existing ports of its components; read-write aliases "
        "need `output`.",
    ),
    _r(
        "E53",
        "bad-group-layers",
        "Missing or duplicate layers, or key layers that differ from value layers.",
        "Give repeated roles distinct `layer`s and declare one value layer per key layer.",
    ),
    _r(
        "E54",
        "bad-group-update",
        "An `update` kind that disagrees with `sequence_axis` or the cells' recurrence.",
        "`append` needs `sequence_axis`; `replace` forbids it and needs invariant cells.",
    ),
    _r(
        "E55",
        "bad-indexed-scatter",
        "An `indexed_scatter` group without `logical_lengths` or `sequence_axis`, with "
        "`write_indices` that is not a semantic rank-1 integer cell, `capacity` that is not an "
        "integer scalar input or cell, port maps naming unknown components or ports, a bound "
        "component without `write_indices_ports` (or `kv_length_ports`), or a non-invariant "
        "buffer.",
        "Complete the scatter declaration as docs/format.md describes.",
    ),
    # ------------------------------------------------------------------ F. speculative
    _r(
        "F59",
        "bad-speculative-components",
        "A `speculative` section without a workflow, or with an unknown proposer or target.",
        "Name two declared components as `proposer` and `target`.",
    ),
    _r(
        "F60",
        "bad-rollback-state",
        "An unknown rollback cell or group, or a group's `rollback_positions` below "
        "`max_proposal_width`.",
        "Name declared cells or groups, and give their groups (and cascades) "
        "`rollback_positions` >= `max_proposal_width`.",
    ),
    _r(
        "F61",
        "effect-not-rewindable",
        "An effect used in the speculative region that is not clonable, or rewindable less deep "
        "than `max_proposal_width`.",
        "Declare the effect `speculation_safety: {kind: rewindable, max_depth: >= width}` or "
        "`clonable`.",
    ),
    _r(
        "F62",
        "bad-chained-proposal",
        "A chained proposal without `token_embedding_input`/`logits_output` proposer ports, "
        "with neither recurrent state nor a folded carry, or with recurrent bindings that are "
        "duplicated, unknown, not in `rollback_state`, or without a matching read-write alias.",
        "Complete `proposal_execution` as docs/format.md describes.",
    ),
    _r(
        "F63",
        "bad-folded-carry",
        "A folded carry whose `target_hidden_context` is not `token_embedding_input`, whose "
        "seed is missing or not a target output, or whose `token_embedding` is missing, not "
        "the ONNX target, or has an empty table.",
        "Complete the folded carry declaration as docs/format.md describes.",
    ),
    # ------------------------------------------------------------------ G. adapters etc.
    _r(
        "G64",
        "bad-adapter-service",
        "A wrong `application_capability`, a count of 0, or empty artifacts or targets.",
        "Use `application_capability: onnx-genai.adapters@1`, positive counts and at least "
        "one target and artifact.",
    ),
    _r(
        "G65",
        "bad-adapter-selection",
        "A selection input with the wrong shape, dtype, source, layout or role.",
        "Selection inputs are request-aligned `[B]`/`[B, max_adapters]` tensors with the "
        "matching adapter_* runtime role.",
    ),
    _r(
        "G66",
        "bad-adapter-target",
        "A target with empty fields, a duplicate id, bad sizes, a bad alpha or slice, or an "
        "unknown component.",
        "Give each target a unique id, an existing component and positive sizes.",
    ),
    _r(
        "G67",
        "bad-adapter-artifact",
        "Adapter artifacts whose indices are not 0..n-1, with a bad rank/alpha/dtype, no "
        "weights, a loader that does not fit the format, bad hf_peft/ort_genai settings, a "
        "path outside `adapters/<alias>/`, or bad bindings.",
        "Fix the artifact as the message says (see docs/format.md, adapters).",
    ),
    _r(
        "G68",
        "adapter-capabilities-missing",
        "`adapters` present without `parameter_adapters` and "
        "`heterogeneous_adapter_batching` in the manifest.",
        "Add both capabilities to `pipeline.workflow.manifest.capabilities`.",
    ),
    _r(
        "G69",
        "bad-preprocess-program",
        "A preprocess adapter without a program, a program not run by exactly one adapter "
        "component invoked once, an `encoded` port that is not uint8 rank 1, or program "
        "outputs that are optional, uncontracted, never produced or unlike the ports.",
        "Pair each preprocess adapter with one program whose outputs match its ports.",
    ),
    _r(
        "G70",
        "bad-generation-override",
        "An override of an unknown field, naming an input that is not request-sourced with a "
        "runtime role, or with `minimum` > `maximum`.",
        "Point overrides at request inputs with runtime roles and consistent bounds.",
    ),
    _r(
        "G71",
        "bad-profile",
        "A required profile of a kind this runtime does not know, or a profile output that "
        "names no workflow output or cannot be decoded as declared.",
        "Mark unknown profiles `requirement: ignorable`, and map profile outputs to declared "
        "outputs with a decoding they support.",
    ),
    # ------------------------------------------------------------------ H. admission
    _r(
        "H72",
        "capability-not-in-manifest",
        "The structure uses a capability the manifest does not list.",
        "Add the capability to `pipeline.workflow.manifest.capabilities`.",
    ),
    _r(
        "H73",
        "capability-unsupported",
        "A required capability that this runtime does not support.",
        "Remove the requirement or use a runtime that supports it; "
        "`reference-runtime capabilities` lists the supported set.",
    ),
    _r(
        "H74",
        "package-file",
        "No metadata file, no `pipeline`, or an artifact path that is absolute, contains `..`, "
        "escapes the package through a symlink, is missing or is not a regular file.",
        "Keep every artifact inside the package folder, referenced by a relative path.",
    ),
    # ------------------------------------------------------------------ extensions
    _r(
        "A76",
        "duplicate-key",
        "A mapping key that appears twice (parsers keep the last one silently).",
        "Delete one of the duplicates.",
    ),
    _r(
        "A77",
        "unparseable-metadata",
        "The metadata file is not valid YAML/JSON, is not a mapping, is nested too deeply or "
        "expands (through aliases) beyond the size limit.",
        "Fix the syntax at the reported line.",
    ),
    _r(
        "C78",
        "graph-signature-mismatch",
        "A declared port that the ONNX graph lacks or types differently (dtype, rank, fixed "
        "dimension), or a graph input or output without a name.",
        "Make the declared ports describe the graph's real inputs and outputs.",
    ),
    _r(
        "G79",
        "bad-constraint-language",
        "A `constraint_languages` entry naming a component that is not a grammar-guidance adapter.",
        "Name the grammar-guidance component (for example the commit step) that enforces "
        "the language.",
    ),
    _r(
        "C80",
        "binding-contract-unsupported",
        "A `binding` component whose contract id this runtime has no executor for.",
        "Use a contract id the runtime lists, or drop the contract for a plain port copy.",
    ),
    _r(
        "C81",
        "bad-text-assembly",
        "More than one text-assembly adapter, or a text-assembly adapter invoked inside the "
        "workflow.",
        "Keep one text-assembly component and do not invoke it: it runs at the API boundary.",
    ),
    _r(
        "B82",
        "literal-dtype-mismatch",
        "A `default` literal that does not fit its contract: a float for an integer dtype, an "
        "integer for a float dtype, an out-of-range integer, a string, a ragged or wrongly "
        "sized list, a rank > 0 literal without `shape`, or a literal-source input without "
        "`default`.",
        "Write the literal in the contract's dtype (1.0 for floats, 1 for integers, true for "
        "bool) with one value or exactly numel values.",
    ),
    _r(
        "C83",
        "artifact-unreadable",
        "An ONNX artifact (or its external data) that cannot be read as a model.",
        "Re-export the artifact; `.onnx` is binary protobuf, `.onnx.textproto` text format.",
    ),
    _r(
        "H91",
        "bare-decoder-abi",
        "A bare decoder (legacy `model.io` metadata or an onnxruntime-genai `genai_config.json` "
        "folder) that cannot be lowered: an unknown or unsupported key or value (beam search, "
        "repetition penalty, a model type that is not decoder-only), a missing field, or a "
        "declared name the decoder graph does not have.",
        "Remove or correct the key the message names; declare every graph input; use greedy or "
        "sampling search with one beam.",
    ),
    _r(
        "C92",
        "runtime-contract-parameters",
        "A `binding` component keyed to a runtime contract (`onnx-genai.autoregressive-decode`, "
        "`onnx-genai.token-policy`) whose parameters or ports that contract cannot run with: a "
        "missing or unknown parameter, a decoder artifact outside the package or unreadable, "
        "names the decoder graph does not have, or a missing port.",
        "Declare the parameters and ports the contract documents (docs/lowering.md); lowering "
        "writes them for you from the decoder's ABI.",
    ),
)

# ---------------------------------------------------------------------- run time
RUN_RULE_LIST: tuple[Rule, ...] = (
    _r("D43", "branch-no-case",
       "No branch case matches the predicate and there is no default, or the predicate does "
       "not hold exactly one bool or int64 value.",
       "Add a `default` case, or make the predicate one of the case keys.", phase="run"),
    _r("D44", "bad-loop-control",
       "`max_iterations` is negative or not one integer; `continue_when` is not a non-empty bool "
       "of rank <= 1; an iteration value shadows another value or its shape cannot be resolved.",
       "Feed the loop an integer bound >= 0 and a bool predicate.", phase="run"),
    _r("E56", "scatter-out-of-bounds",
       "Before an `indexed_scatter` write: a capacity <= 0, a buffer whose extent is not the "
       "capacity, a destination outside [0, capacity) (negatives included), or a logical "
       "length outside [0, capacity]. The component is not run.",
       "Keep write indices and lengths inside the declared capacity.", phase="run"),
    _r("E57", "recurrence-violation",
       "A carried update breaks the cell's recurrence (dtype, rank, an invariant shape, growth "
       "by other than `increment`, beyond `max`), or rows of mixed activity on a cell without a "
       "request axis.",
       "Make the body produce the next value the recurrence declares.", phase="run"),
    _r("E58", "session-required",
       "The workflow has session-scoped state but the request carries no session id, or the "
       "session id is unknown (closed or never created).",
       "Create a session with `engine.create_session()` and pass `session_id`.", phase="run"),
    _r("H75", "request-refused",
       "The request supplies an undeclared input (or one twice), misses a required one, gives a "
       "value that cannot take the input's dtype, a keyword the package has no input for, or a "
       "text prompt without a tokenizer.",
       "Pass exactly the declared inputs; the message names the one at fault.", phase="run"),
    _r("H84", "contract-violation",
       "A value breaks its contract at a boundary: an input, an invoke port, a carried cell's "
       "start value, an emit, or a final output (dtype, rank, fixed dimension, or a symbol bound "
       "to two extents).",
       "Produce values that match the declared contracts; the message names the boundary.",
       phase="run"),
    _r("D85", "bad-emit-value",
       "An emit's `when`/`valid_length` is not a bool/integer of rank <= 1 with one value or one "
       "per row, a `valid_length` exceeds the value's extent, or an appended chunk does not "
       "match what the output holds.",
       "Emit per-row controls with one entry per row and lengths within the value.",
       phase="run"),
    _r("C86", "component-failed",
       "A component failed while running (its executor raised), or an adapter refused its "
       "inputs (e.g. a grammar commit meeting a rejected token).",
       "Read the component's message; its inputs passed every declared contract.",
       phase="run"),
    _r("G87", "bad-adapter-selection",
       "The request's adapter selection is invalid: a missing selection input, an unknown "
       "adapter, a count outside the slots, a duplicate adapter in a row, a scale outside "
       "[-16, 16], more distinct adapters than the cache holds, or no portable fallback.",
       "Select declared adapters, each once per row, within the cache size.", phase="run"),
    _r("G88", "override-refused",
       "A request keyword overrides a generation field the package does not list in "
       "`generation.overrides`, or a value outside the override's bounds.",
       "Leave the field unset, or keep it within the package's bounds.", phase="run"),
    _r("H89", "executor-unavailable",
       "The requested executor or device is not available here (e.g. `device='cuda'` without a "
       "GPU or CUDA build). The runtime never falls back to another executor or device.",
       "Install what the message names, or ask for an executor and device that exist.",
       phase="run"),
    _r("H90", "native-unsupported",
       "The native executor does not implement an op, opset, dtype or attribute value a "
       "component uses; the component is refused when the engine loads it, listing each node.",
       "Run the package with `--executor ort`; the native executor never falls back.",
       phase="run"),
)  # fmt: skip

RULES: dict[str, Rule] = {rule.code: rule for rule in (*RULE_LIST, *RUN_RULE_LIST)}
LOAD_RULES = tuple(rule.code for rule in RULE_LIST)

if len(RULES) != len(RULE_LIST) + len(
    RUN_RULE_LIST
):  # pragma: no cover - guards edits to the table
    raise RuntimeError("duplicate rule code in RULE_LIST")


def hint_for(code: str) -> str:
    return RULES[code].fix
