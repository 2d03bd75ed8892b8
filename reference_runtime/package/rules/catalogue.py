"""The rule table: every load-time rule a package can break, with its stable code.

Codes are a family letter plus a number. Numbers 1-75 follow the rejection list of the format
(the format's rejection list, which the docs call "format rule N"); numbers from 76 up are rules this
runtime adds where the format is silent. A code never changes meaning once published.

``docs/rules.md`` is generated from this table (``tools/generate_docs.py``); a test fails when
the two drift, and another fails when a code has no negative test.

Each load-time rule notes (``upstream``) the semantic checks of the format's upstream loader
(``validation.rs`` of the pinned snapshot) that it makes, by the ids ``tests/upstream_checks.py``
gives them; ``UPSTREAM_NOT_COVERED`` holds the others with the reason. A check is noted on a
rule only when the rule refuses, at load, every document that check refuses.
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
    # the upstream loader's checks this rule makes (ids of tests/upstream_checks.py)
    upstream: tuple[str, ...] = ()
    # "violation": the package (or request) breaks the format; "unsupported": it is valid but
    # needs something this runtime does not implement (a capability, an executor, a feature)
    kind: str = "violation"


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


def _r(code, name, summary, fix, spec=None, phase="load", kind="violation", upstream=()) -> Rule:
    number = int(code[1:])
    return Rule(
        code=code,
        name=name,
        family=code[0],
        summary=summary,
        fix=fix,
        spec=spec or (f"format rule {number}" if number <= 75 else "reference runtime"),
        phase=phase,
        kind=kind,
        upstream=tuple(upstream),
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
        upstream=(
            "validate_effect_declarations: pipeline.workflow.effects contains an empty domain name",
        ),
    ),
    _r(
        "A06",
        "model-io-beside-pipeline",
        "Legacy `model.io` declared beside `pipeline`.",
        "Delete `model.io`: the workflow is the only graph ABI of a workflow package.",
        upstream=(
            "validate_model_io_against_workflow: model.io and pipeline.workflow both declare this package's executable graph ABI; the workflow is canonical, so remove model.io and declare ports at pipeline.workflow.components.<component>.ports (with ports.roles for token_ids, inputs_embeds, attention_mask, position_ids, logits, hidden_states, encoder_hidden_states, and audio_features), model state at pipeline.workflow.serving.state_service.groups, and fixed-capacity writes at that group's update.kind: indexed_scatter",
        ),
    ),
    # ------------------------------------------------------------------ B. inputs/outputs
    _r(
        "B07",
        "shape-rank-mismatch",
        "A contract `shape` whose length differs from `rank`, or a batch-layout axis at or "
        "beyond the rank.",
        "Make `shape` list exactly `rank` dimensions (an integer or a symbol name each).",
        upstream=(
            "validate_runtime_dtype: {} declares rank {} but has {} shape dimensions",
            "validate_integer_scalar_contract: {} rank-zero contract must have shape []",
        ),
    ),
    _r(
        "B08",
        "bad-dtype",
        "A dtype that is not a tensor dtype of the format (upstream's list: float32/fp32, "
        "float16/fp16, bfloat16/bf16, the float8 kinds, int8-64, uint8-64, bool), or `string` "
        "on a workflow tensor.",
        "Use a numeric or bool dtype (float32, float16, bfloat16, int64, ..., bool).",
        upstream=(
            "validate_runtime_dtype: {} uses dtype '{}', which is not a tensor dtype this format can name",
        ),
    ),
    _r(
        "B09",
        "expansion-factor-zero",
        "`request_expanded` with `factor` below 1.",
        "Set `factor` to the number of contiguous rows per request (at least 1).",
        upstream=(
            "validate_runtime_dtype: {} declares request_expanded.factor 0; the expansion factor must be at least 1",
        ),
    ),
    _r(
        "B10",
        "request-input-opaque-role",
        "A request-sourced input with an opaque role.",
        "Give the input a runtime role (`{kind: runtime, version: '1.0', role: ...}`) "
        "or use an application source.",
        upstream=(
            "validate_workflow: workflow request input '{}' must declare one versioned runtime role",
        ),
    ),
    _r(
        "B11",
        "optional-input-without-fallback",
        "An optional input with neither `default` nor `present_as`.",
        "Add a `default` literal, or a `present_as` flag and read the input only under it.",
        upstream=(
            "validate_workflow: workflow input '{}' cannot be optional without a literal default or present_as predicate",
        ),
    ),
    _r(
        "B12",
        "present-as-misused",
        "`present_as` on a required input or one with a default, on a literal or artifact "
        "source, on a request role other than media/constraint/session_id, or clashing with "
        "another name.",
        "Use `present_as` only on optional request (media, constraint, session_id) or "
        "application inputs without a default, with a name no other value uses.",
        upstream=(
            "validate_workflow: workflow input '{}' uses present_as but is required; presence predicates are only valid for optional inputs",
            "validate_workflow: workflow input '{}' cannot combine present_as with a literal default",
            "validate_workflow: workflow input '{}' can use present_as only with request or application sources",
            "validate_workflow: workflow request input '{}' can use present_as only with media, constraint, or session_id roles whose absence is observable",
            "validate_workflow: workflow input '{}' has an empty present_as value",
            "validate_workflow: workflow input '{}' present_as value '{}' collides with another initial SSA value",
        ),
    ),
    _r(
        "B13",
        "optional-input-read-outside-presence",
        'An input guarded by `present_as` is read outside the `"true"` case of a branch on '
        "exactly that flag.",
        "Move the read into a branch whose predicate is the input's `present_as` flag.",
        upstream=(
            "validate_optional_input_guards: {} reads optional input '{}' outside the true case of its present_as predicate '{}'",
            "validate_optional_input_guards: {}.outputs.{}.cases.{} reads optional input '{}' outside its presence branch",
        ),
    ),
    _r(
        "B14",
        "bad-media-block",
        "A `media` block on a non-audio output, a zero or missing sample rate or channel "
        "count, or (WAV container) a dtype that does not match the output's stage: uint8 "
        "bytes after the adapter, floating-point samples before it.",
        "Declare `media` only on audio outputs, with positive rates and channels; pre-adapter "
        "audio is float samples, post-adapter audio is uint8 bytes.",
        upstream=(
            "validate_workflow: workflow output '{}' declares a media contract but its role is not audio",
            "validate_workflow: workflow output '{}' media.sample_rate_hz must be greater than zero",
            "validate_workflow: workflow output '{}' media.source_sample_rate_hz must be greater than zero",
            "validate_workflow: workflow output '{}' media.channels must be greater than zero",
            "validate_workflow: workflow output '{}' audio media contract must declare sample_rate_hz",
            "validate_workflow: workflow output '{}' audio media contract must declare channels",
            "validate_workflow: workflow output '{}' is a post-adapter WAV but its contract dtype is not uint8",
            "validate_workflow: workflow output '{}' is a pre-adapter WAV source but its contract dtype is not floating point",
        ),
    ),
    _r(
        "B15",
        "bad-value-range",
        "An image output without `value_range`, or `value_range` on a non-image output.",
        "Declare `value_range` exactly on outputs whose role is `image`.",
        upstream=(
            "validate_workflow: workflow image output '{}' must declare value_range",
            "validate_workflow: workflow non-image output '{}' cannot declare image value_range",
        ),
    ),
    # ------------------------------------------------------------------ C. components
    _r(
        "C16",
        "bad-component-name",
        "A component name that is empty or contains `.`.",
        "Rename the component without dots (dots are reserved for value names).",
        upstream=("validate_workflow: workflow component name is invalid: '{}'",),
    ),
    _r(
        "C17",
        "empty-artifact",
        "An ONNX component with an empty `artifact`.",
        "Give the path of the ONNX graph, relative to the metadata file.",
        upstream=("validate_workflow: workflow component '{}' has an empty ONNX artifact",),
    ),
    _r(
        "C18",
        "adapter-abi-not-pinned",
        "An adapter ABI that the manifest does not pin (`adapter_abis`), pins at another "
        "version, or that this runtime does not support (also a manifest pin of an ABI or "
        "version the runtime does not support).",
        "Pin `manifest.adapter_abis[abi]` to the component's version and use an ABI the "
        "runtime lists (`reference-runtime capabilities` names them).",
        upstream=(
            "validate_workflow: workflow component '{}' requires adapter ABI {}@{}, but the manifest does not pin that exact version",
        ),
    ),
    _r(
        "C19",
        "bad-contract",
        "A contract with an empty id or version, or a contract binding or port role naming a "
        "port the component does not have.",
        "Give `contract.id` and `contract.version`, and bind roles only to declared ports.",
        upstream=(
            "validate_workflow: workflow component '{}' contract id and version must not be empty",
            "validate_workflow: workflow component '{}' contract binding '{}' references unknown port '{}'",
        ),
    ),
    _r(
        "C20",
        "adapter-contract-mismatch",
        "An adapter whose contract does not match its ABI, a missing or wrong `action`, or a "
        "missing required binding.",
        "Use the ABI's own contract id and version, a valid `parameters.action` and every "
        "binding the action requires.",
        upstream=(
            "validate_workflow: workflow adapter component '{}' contract {}@{} must match its ABI {}@{}",
            "validate_workflow: workflow adapter component '{}' has unsupported action {} for contract {}@{}",
            "validate_workflow: workflow adapter component '{}' contract {}@{} is missing required binding '{}'",
            "validate_workflow: workflow adapter component '{}' contract role '{}' must bind an {} port",
        ),
    ),
    _r(
        "C21",
        "bad-overridable-component",
        "`application_overridable` on a component without a contract or not ONNX.",
        "Only ONNX components with a contract can be overridden by the application.",
        upstream=(
            "validate_workflow: workflow component '{}' is application-overridable but has no versioned contract",
            "validate_workflow: workflow component '{}' is application-overridable but is not an ONNX component",
        ),
    ),
    _r(
        "C22",
        "overlay-target-unknown",
        "A component of the parameter-overlay contract without non-empty string parameters "
        "`component` and `parameter`, or naming no target (a target matches by its component "
        "and its `initializer`).",
        "Set `parameters.component` and `parameters.parameter` to the component and initializer "
        "of an `adapters.target_manifest` target.",
        upstream=(
            "validate_adapter_service: workflow parameter overlay component '{}' must declare non-empty string parameter 'component'",
            "validate_adapter_service: workflow parameter overlay component '{}' must declare non-empty string parameter 'parameter'",
            "validate_adapter_service: workflow parameter overlay component '{}' targets undeclared adapter parameter '{}.{}'",
        ),
    ),
    _r(
        "C23",
        "bad-row-scope",
        "Row-scoped state on request-aligned ports without `row_scope`, or a `row_scope.axis` "
        "that is not the request axis of the component's request-aligned ports, or "
        "`stateful: false` on a component with effects.",
        "Declare `row_scope: {axis: <request axis>, stateful: true}` on stateful row-scoped "
        "components, matching their ports' request axis.",
        upstream=(
            "validate_row_scoped_components: workflow component '{}' {} port '{}' is request-aligned on a different axis than the declared row_scope axis {}",
            "validate_row_scoped_components: workflow component '{}' holds per-request state and has request-aligned ports but declares no row_scope; the runtime cannot compact or release its rows without a declared row axis",
            "validate_row_scoped_components: workflow component '{}' declares row_scope axis {} but {} port '{}' has rank {}",
        ),
    ),
    _r(
        "C24",
        "bad-effect",
        "An undeclared or empty effect domain, or `rewindable` with depth 0.",
        "Declare each effect under `pipeline.workflow.effects` with `max_depth` >= 1.",
        upstream=(
            "validate_effect_declarations: workflow component '{}' declares an empty effect domain",
            "validate_effect_declarations: workflow component '{}' declares effect domain '{}' that pipeline.workflow.effects does not describe; every effect must declare its retry class and speculation safety",
            "validate_effect_declarations: pipeline.workflow.effects.{}.speculation_safety rewindable max_depth must be greater than zero; use kind 'none' to forbid speculation",
        ),
    ),
    _r(
        "C25",
        "missing-sequence-role",
        "The only ONNX component owns attention state but declares neither a `token_ids` "
        "nor an `inputs_embeds` port role.",
        "Add `ports.roles: {<input>: token_ids}` (or `inputs_embeds`).",
        upstream=(
            "validate_attention_component_declares_sequence_role: state service group '{}' gives component '{}' attention state, and it is the only neural component in the workflow, so the package depends on resolving a decode ABI from it; it declares no token_ids or inputs_embeds role, which leaves that ABI empty and silently falls back to inferring ports from shapes. Add pipeline.workflow.components.{}.ports.roles mapping the sequence port to token_ids (or inputs_embeds). Port contracts are optional and do not substitute: a graph states its port names and types, but not which one carries the sequence",
        ),
    ),
    # ------------------------------------------------------------------ D. steps and SSA
    _r(
        "D26",
        "unknown-component-or-cell",
        "A step names an unknown component or cell.",
        "Declare it under `components` / `state`, or fix the name.",
        upstream=(
            "validate_workflow: pipeline.workflow lowering failed: {}",
            "validate_workflow_node: {} invokes unknown component '{}'",
            "validate_workflow_node: {}.carried references unknown cell '{}'",
        ),
    ),
    _r(
        "D27",
        "empty-steps",
        "An empty root, loop body, branch case or sequence.",
        "Give it at least one step (only a loop's `setup` may be empty).",
        upstream=("validate_workflow_node: {}.nodes must not be empty",),
    ),
    _r(
        "D28",
        "invoke-port-mismatch",
        "An invoke binds an unknown port, leaves a required input port, a graph input or a "
        "declared non-optional output port unbound, or binds a value whose dtype, rank or fixed "
        "dimension disagrees with the port.",
        "Bind exactly the declared ports (or the graph's inputs and outputs), with values "
        "whose contracts match.",
        upstream=(
            "validate_workflow_node: {}.inputs has unknown port '{}'",
            "validate_workflow_node: {}.inputs is missing port '{}'",
            "validate_workflow_node: {}.outputs has unknown port '{}'",
            "require_compatible_contracts: {} has incompatible tensor contracts: {} rank {} -> {} rank {}",
            "validate_workflow_node: {}.outputs is missing port '{}'",
        ),
    ),
    _r(
        "D29",
        "ssa-violation",
        "A value read before it is defined, or defined twice.",
        "Define each name once, before its first use, in a scope that reaches the reader.",
        upstream=(
            "require_workflow_value: {} references value '{}' before definition",
            "define_workflow_value: {} redefines SSA value '{}'",
        ),
    ),
    _r(
        "D30",
        "bad-max-iterations",
        "`max_iterations` that is not an integer `[]` or `[1]`.",
        "Use an integer scalar (rank 0, or rank 1 with shape [1]).",
        upstream=(
            "validate_integer_scalar_contract: {} must have an integer dtype",
            "validate_integer_scalar_contract: {} must be a scalar or rank-one tensor",
            "validate_integer_scalar_contract: {} rank-one control contract must have static shape [1]",
        ),
    ),
    _r(
        "D31",
        "bad-iteration",
        "An `iteration` contract that is not int64, has rank > 1, "
        "whose shape does not match its rank, or whose batch-layout axis is at or beyond "
        "its rank.",
        "Declare the iteration value as int64 `[]`, `[1]` or `[batch]`.",
        upstream=(
            "validate_workflow_node: {}.iteration must declare int64 rank 0 or rank 1, got {} rank {}",
            "validate_workflow_node: {}.iteration scalar contract must have an empty shape",
            "validate_workflow_node: {}.iteration rank-one broadcast contract must have one dimension",
            "validate_workflow_node: {}.iteration rank-one broadcast contract must declare its shape",
        ),
    ),
    _r(
        "D32",
        "bad-continue-when",
        "`continue_when` not visible before the body, or not a bool of rank <= 1.",
        "Use a bool `[]`, `[1]` or `[B]` value defined before the loop, or a carried cell.",
        upstream=(
            "validate_bool_control_contract: {} must have bool dtype",
            "validate_bool_control_contract: {} must be a scalar or rank-one row tensor",
        ),
    ),
    _r(
        "D33",
        "bad-carry",
        "A carried cell whose `initializer` is not in scope at loop entry, with no start value "
        "at all, or whose `initial` or `next` is incompatible with the cell's contract.",
        "Make the initializer a value visible at loop entry and give `initial`/`next` values "
        "with the cell's dtype and rank.",
        upstream=(
            "require_state_contract: {} is incompatible with state contract {} rank {}",
            "require_state_contract: {} has incompatible state dimension at axis {}",
        ),
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
        upstream=(
            "validate_workflow_node: {}.cases must not be empty",
            "validate_predicate_contract: {} must have a bool or integer dtype",
            "validate_predicate_contract: {} must be a scalar or rank-one broadcast tensor",
            "validate_predicate_contract: {} rank-one predicate contract must have static shape [1]",
        ),
    ),
    _r(
        "D36",
        "bad-phi",
        "A phi output with a missing, unknown or incompatible source.",
        "Name, for every case (and `default` exactly when the branch has one), a value with "
        "the same dtype and rank.",
        upstream=(
            "validate_workflow_node: {}.outputs.{} has no value for case '{}'",
            "validate_workflow_node: {}.outputs.{} references unknown case '{}'",
            "validate_workflow_node: {}.outputs.{} must map the default branch exactly when one is declared",
        ),
    ),
    _r(
        "D37",
        "session-cell-not-exported",
        "A session cell updated inside a branch case but not exported through a phi output.",
        "Add a phi output named after the cell that takes its value from each case.",
        upstream=(
            "validate_workflow_node: {}.cases.{} updates session state '{}' to '{}' without exporting it through a branch output",
            "validate_workflow_node: {}.default updates session state '{}' to '{}' without exporting it through a branch output",
        ),
    ),
    _r(
        "D38",
        "bad-emit-target",
        "An emit to an unknown output, a `when`/`valid_length` of the wrong dtype or rank, or "
        "a per-row control on a value without a request axis.",
        "Emit to a declared output; `when` is bool and `valid_length` integer, each `[]`, "
        "`[1]` or `[B]`; per-row emits need a request-aligned value.",
        upstream=(
            "validate_workflow_node: {}.{} is row-wise but {}.value declares no request_aligned batch_layout",
            "validate_workflow_node: {} emits undeclared output '{}'",
            "validate_integer_control_contract: {} must have an integer dtype",
        ),
    ),
    _r(
        "D39",
        "emit-contract-mismatch",
        "A `valid_length` emit of a rank-0 value, or an emit whose value's dtype or rank "
        "differs from the output's.",
        "Emit a value of rank >= 1 whose dtype and rank match the output.",
        upstream=(
            "require_emit_prefix_contracts: {} valid_length requires emitted value and output contracts with rank >= 1",
            "require_emit_prefix_contracts: {} has incompatible dtype or rank for prefix emission",
            "require_emit_prefix_contracts: {} has incompatible fixed dimension at axis {}",
            "require_compatible_contracts: {} has incompatible fixed dimension at axis {}",
        ),
    ),
    _r(
        "D40",
        "emit-layout-mismatch",
        "The emitted value's batch layout differs from the output's, or emits into one output "
        "mix layouts.",
        "Give the value and the output the same `batch_layout`.",
        upstream=(
            "validate_emit_batch_layout_consistency: pipeline.workflow output '{}' mixes batch layouts across emits; every emit for one output must agree so the runtime can associate result rows with requests",
            "validate_compaction_derivability: {} emits '{}' into output '{}' with a different batch_layout; the emitted value and the declared output must agree",
        ),
    ),
    _r(
        "D41",
        "ragged-emit-needs-request-axis",
        "A per-row (`when` / `valid_length`) emit into an output that is not `request_aligned`.",
        "Declare the output `batch_layout: {kind: request_aligned, axis: 0}`.",
        upstream=(
            "validate_compaction_derivability: {} emits '{}' into output '{}' with a per-row valid_length or guard, but '{}' does not declare request_aligned; ragged emission needs a declared row axis so the runtime can associate result rows with requests",
        ),
    ),
    _r(
        "D42",
        "serving-shared-emit",
        "A serving workflow emits a `shared` value of rank > 0.",
        "Emit request-aligned values (per-row results) from serving workflows.",
        upstream=(
            "validate_compaction_derivability: {} emits per-request value '{}' without a declared batch_layout; a serving workflow must declare request_aligned or token_packed so the runtime can associate result rows with requests",
        ),
    ),
    # ------------------------------------------------------------------ E. state and serving
    _r(
        "E45",
        "recurrence-axis-out-of-range",
        "A recurrence axis >= the cell's rank.",
        "Use an axis below the cell's rank.",
        upstream=("validate_workflow: workflow state '{}' varies on axis {}, outside rank {}",),
    ),
    _r(
        "E46",
        "bad-session-block",
        "A `session` block on an invocation-scoped cell, with a policy other than `exclusive`, "
        "with `ttl_seconds` or `optimistic_metadata_version`, or an invalid continuation.",
        "Use `session: {policy: exclusive}` on `scope: session` cells; see docs/format.md for "
        "continuations.",
        upstream=(
            "validate_workflow: workflow state '{}' has session lease settings but invocation scope",
            "validate_workflow: workflow state '{}' requests copy-on-write session mutation, which this runtime does not support",
            "validate_workflow: workflow state '{}' declares session TTL, which this runtime does not yet enforce",
            "validate_workflow: workflow state '{}' requests optimistic metadata versioning, which this runtime does not support",
        ),
    ),
    _r(
        "E47",
        "bad-service-group-cell",
        "A cell naming an unknown group; a `sequence_axis` beyond the rank or unlike the "
        "recurrence axis; a varying cell whose group lacks `sequence_axis`; a grouped cell "
        "without a request axis; or a growing cell whose `increment` is not `serving.accepted_len`.",
        "Point `service_group` at a declared group whose `sequence_axis` is the cell's "
        "recurrence axis, with a request-aligned contract.",
        upstream=(
            "validate_workflow: workflow state '{}' binds unknown state service group '{}'",
            "validate_workflow: state service group '{}' sequence_axis {} is outside state '{}' rank {}",
            "validate_workflow: workflow state '{}' recurrence axis {} disagrees with state service group '{}' sequence_axis {}",
            "validate_workflow: workflow state '{}' varies along axis {}, but state service group '{}' declares no sequence_axis",
            "validate_workflow: workflow state '{}' binds state service group '{}' but its contract does not declare a request_aligned batch_layout; compaction would be underivable",
            "validate_workflow: state service state '{}' grows by '{}', but serving.accepted_len does not bind that per-row value",
            "validate_speculative_rollback: speculative.rollback_state reaches unknown state service group '{}'",
        ),
    ),
    _r(
        "E48",
        "bad-state-management",
        "A grouped cell not `management: runtime`; a runtime/external cell without "
        "`release_boundary`; a workflow cell with one; or a `session` boundary on an "
        "invocation-scoped cell.",
        "Grouped cells are runtime-managed with a release boundary; workflow cells have none.",
        upstream=(
            "validate_state_lifetimes: pipeline.workflow.state.{} binds a state service group but is not declared management: runtime; the group is the runtime's storage",
            "validate_state_lifetimes: pipeline.workflow.state.{} is {} but declares no release_boundary; externally owned state has no SSA liveness to free it",
            "validate_state_lifetimes: pipeline.workflow.state.{} declares a release_boundary but is workflow-owned; workflow state is freed by SSA liveness",
            "validate_state_lifetimes: pipeline.workflow.state.{} releases at a session boundary but is not session-scoped",
        ),
    ),
    _r(
        "E49",
        "runtime-state-published",
        "Runtime- or externally-managed state reaches an output though its group has no "
        "`checkpoint`.",
        "Declare a `checkpoint` on the group, or do not publish the cell.",
        upstream=(
            "validate_state_lifetimes: pipeline.workflow.state.{} is published as a package output but its state group declares no checkpoint adapter; runtime-owned state is private and leaves the process portably only through a versioned checkpoint",
        ),
    ),
    _r(
        "E50",
        "bad-serving",
        "A serving value that is missing, not visible at the end of the workflow, of the wrong "
        "dtype or shape, or a serving section without groups or without `accepted_len`.",
        "`active`/`done` are bool and `accepted_len` integer, each `[]` or `[B]` with its "
        "request axis 0 (request_aligned, or request_expanded); declare at least one state group.",
        upstream=(
            "validate_workflow: pipeline.workflow.serving.state_service.groups must declare at least one bound state group",
            "validate_workflow: pipeline.workflow.serving.accepted_len is required when state service groups are declared",
            "validate_workflow: pipeline.workflow.serving.{} '{}' must declare a request_aligned batch_layout on axis 0",
        ),
    ),
    _r(
        "E51",
        "bad-group",
        "A group with an empty layout, a `logical_lengths`/`total_length` that is not an "
        "integer cell, a cascade to an unknown group, or `rollback_positions: 0`.",
        "Fix the group: lengths name integer cells, cascades name groups, rollback >= 1.",
        upstream=(
            "validate_workflow: state service group '{}' layout must not be empty",
            "validate_workflow: state service group '{}' references unknown logical_lengths state '{}'",
            "validate_workflow: state service group '{}' cascades to unknown group '{}'",
            "validate_workflow: state service group '{}' rollback_positions must be greater than zero when present; omit it to declare that rollback is impossible",
            "validate_workflow: state service group '{}' logical_lengths state '{}' must be rank one with one value per row",
            "validate_workflow: state service group '{}' logical_lengths state '{}' must be semantic for checkpoint/replay",
            "validate_integer_control_contract: {} must be a scalar or rank-one tensor",
        ),
    ),
    _r(
        "E52",
        "bad-group-port",
        "A group `ports` entry naming an unknown component, cell or port; a cell bound to "
        "another group; or a read-write alias without an output.",
        "Bind each cell of the group to existing ports of its components; read-write aliases "
        "need `output`.",
        upstream=(
            "validate_workflow: state service group '{}' binds unknown component '{}'",
            "validate_workflow: state service group '{}' port alias references state '{}' bound to another service group",
            "validate_workflow: state service group '{}' port alias references unknown state '{}'",
            "validate_workflow: state service group '{}' component '{}' input alias '{}' is not a declared port",
            "validate_workflow: state service group '{}' component '{}' output alias '{}' is not a declared port",
            "validate_workflow: state service group '{}' component '{}' read-write alias for input '{}' declares no output; only a read_only borrow may omit one",
        ),
    ),
    _r(
        "E53",
        "bad-group-layers",
        "Missing or duplicate layers, or key layers that differ from value layers.",
        "Give repeated roles distinct `layer`s and declare one value layer per key layer.",
        upstream=(
            "validate_state_port_layers: state service group '{}' binds {} '{}' ports for component '{}' but {} declare no layer; per-layer buffers are paired by position and label order is not layer order",
            "validate_state_port_layers: state service group '{}' binds '{}' to layer {} for component '{}', which another '{}' port already claims; one buffer would shadow the other",
            "validate_state_port_layers: state service group '{}' component '{}' must bind exactly one key and one value alias for the same attention layers; key layers are {}, value layers are {}, missing value layers are {}, missing key layers are {}",
        ),
    ),
    _r(
        "E54",
        "bad-group-update",
        "An `update` kind that disagrees with `sequence_axis` or the cells' recurrence.",
        "`append` needs `sequence_axis`; `replace` forbids it and needs invariant cells.",
        upstream=(
            "validate_state_update: state service group '{}' uses a sequence update but declares no sequence_axis",
            "validate_state_update: state service group '{}' uses replace for fixed-size state but declares sequence_axis",
            "validate_state_update: workflow state '{}' binds replace-updated group '{}' but declares a varying shape; replacement state must remain fixed-size",
        ),
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
        upstream=(
            "validate_scatter_control_ports: state service group '{}' component '{}' {} port '{}' is not a declared port",
            "validate_scatter_control_ports: state service group '{}' binds {} to unknown component '{}'",
            "validate_state_update: state service group '{}' declares an indexed_scatter update but no logical_lengths; the valid prefix of a fixed-capacity buffer is not derivable from its shape",
            "validate_state_update: state service group '{}' write_indices state '{}' must be rank one with one destination per row",
            "validate_state_update: state service group '{}' write_indices state '{}' must be semantic: a write cursor that is not restored with its buffer would overwrite live positions",
            "validate_state_update: state service group '{}' references unknown write_indices state '{}'",
            "validate_state_update: state service group '{}' binds component '{}' to a fixed-capacity buffer but declares no write_indices port for it; destinations cannot be recovered from the step graph",
            "validate_state_update: state service group '{}' gives component '{}' key/value cache ports but declares no kv_length port for it; the valid prefix of a capacity-sized buffer is not recoverable from its shape, so the cache ABI it advertises cannot be bound",
            "validate_state_update: workflow state '{}' binds indexed_scatter group '{}' but declares a varying shape; a scattered buffer's capacity is constant, and its length is carried by logical_lengths",
        ),
    ),
    # ------------------------------------------------------------------ F. speculative
    _r(
        "F59",
        "bad-speculative-components",
        "A `speculative` section without a workflow, or with an unknown proposer or target.",
        "Name two declared components as `proposer` and `target`.",
        upstream=(
            "validate_speculative_rollback: speculative metadata requires pipeline.workflow to declare the proposer and target",
            "validate_speculative_rollback: speculative.{} '{}' is not a declared workflow component",
        ),
    ),
    _r(
        "F60",
        "bad-rollback-state",
        "An unknown rollback cell or group, or a group's `rollback_positions` below "
        "`max_proposal_width`.",
        "Name declared cells or groups, and give their groups (and cascades) "
        "`rollback_positions` >= `max_proposal_width`.",
        upstream=(
            "validate_speculative_rollback: speculative.rollback_state group '{}' declares no rollback_positions; a rejected proposal could not be undone",
            "validate_speculative_rollback: speculative.rollback_state group '{}' rolls back {} positions but the declared maximum proposal width is {}",
        ),
    ),
    _r(
        "F61",
        "effect-not-rewindable",
        "An effect used in the speculative region that is not clonable, or rewindable less deep "
        "than `max_proposal_width`.",
        "Declare the effect `speculation_safety: {kind: rewindable, max_depth: >= width}` or "
        "`clonable`.",
        upstream=(
            "validate_speculative_rollback: workflow effect '{}' runs inside the speculative region but declares speculation_safety none; a rejected proposal could not be undone",
            "validate_speculative_rollback: workflow effect '{}' rewinds {} positions but the declared maximum proposal width is {}",
        ),
    ),
    _r(
        "F62",
        "bad-chained-proposal",
        "A chained proposal without `token_embedding_input`/`logits_output` proposer ports, "
        "with neither recurrent state nor a folded carry, or with recurrent bindings that are "
        "duplicated, unknown, not in `rollback_state`, or without a matching read-write alias.",
        "Complete `proposal_execution` as docs/format.md describes.",
        upstream=(
            "validate_speculative_rollback: speculative chained proposer input '{}' is not an input port of component '{}'",
            "validate_speculative_rollback: speculative chained proposer logits '{}' is not an output port of component '{}'",
            "validate_speculative_rollback: speculative chained proposal must declare at least one recurrent binding or a folded_carry_output",
            "validate_speculative_rollback: speculative chained proposal repeats recurrent state '{}'",
            "validate_speculative_rollback: speculative chained proposal references unknown recurrent state '{}'",
            "validate_speculative_rollback: speculative chained recurrent state '{}' must be listed in rollback_state",
            "validate_speculative_rollback: speculative chained recurrence input '{}' is not an input port of component '{}'",
            "validate_speculative_rollback: speculative chained recurrence output '{}' is not an output port of component '{}'",
            "validate_speculative_rollback: speculative chained recurrent state '{}' has no state-service alias on proposer '{}'; a recurrence must resolve through serving.state_service.groups.*.ports.{}",
            "validate_speculative_rollback: speculative chained recurrent state '{}' resolves to a read_only state-service alias on proposer '{}', but a recurrence must advance the state (read_write)",
            "validate_speculative_rollback: speculative chained recurrent state '{}' binds input '{}' but its state-service alias names input '{}'",
            "validate_speculative_rollback: speculative chained recurrent state '{}' binds output '{}' but its state-service alias names output '{}'",
            "validate_speculative_rollback: speculative chained recurrent state '{}' binds output '{}' but its state-service alias declares no output",
        ),
    ),
    _r(
        "F63",
        "bad-folded-carry",
        "A folded carry whose `target_hidden_context` is not `token_embedding_input`, whose "
        "seed is missing or not a target output, or whose `token_embedding` is missing, not "
        "the ONNX target, or has an empty table.",
        "Complete the folded carry declaration as docs/format.md describes.",
        upstream=(
            "validate_speculative_rollback: speculative chained folded_carry_output '{}' is not an output port of component '{}'",
            "validate_speculative_rollback: speculative chained proposal declares a folded_carry_output but no port_bindings.target_hidden_context naming the destination proposer input port the carry lands in",
            "validate_speculative_rollback: speculative port_bindings.target_hidden_context '{}' is not an input port of proposer component '{}'",
            "validate_speculative_rollback: speculative port_bindings.target_hidden_context '{}' must equal the fused token_embedding_input '{}'; a folded carry re-enters through the fused input's trailing half, not a separate proposer input port",
            "validate_speculative_rollback: speculative chained proposal declares a folded_carry_output but no folded_carry_seed naming the target output that seeds carry_0",
            "validate_speculative_rollback: speculative folded_carry_seed component '{}' is not a declared workflow component",
            "validate_speculative_rollback: speculative folded_carry_seed output '{}' is not an output port of component '{}'",
            "validate_speculative_rollback: speculative folded_carry_seed component '{}' must be the speculative target '{}'; the folded carry's first-step seed is the target's own hidden output",
            "validate_speculative_rollback: speculative chained proposal declares a folded_carry_output but no token_embedding naming where embed(last_token) is gathered from",
            "validate_speculative_rollback: speculative token_embedding component '{}' is not a declared workflow component",
            "validate_speculative_rollback: speculative token_embedding component '{}' must be the speculative target '{}'; a folded carry reuses the target model's embedding table",
            "validate_speculative_rollback: speculative token_embedding names table '{}' on component '{}', which declares no ONNX model artifact for that initializer to resolve against",
            "validate_speculative_rollback: speculative token_embedding table must name a real target initializer, not an empty string",
        ),
    ),
    # ------------------------------------------------------------------ G. adapters etc.
    _r(
        "G64",
        "bad-adapter-service",
        "A wrong `application_capability`, a `cache.max_entries` or `selection.max_adapters` "
        "of 0, or empty artifacts or targets.",
        "Use `application_capability: onnx-genai.adapters@1`, positive counts and at least "
        "one target and artifact.",
        upstream=(
            "validate_adapter_service: adapters.application_capability must not be empty",
            "validate_adapter_service: adapters.application_capability must be onnx-genai.adapters@1",
            "validate_adapter_service: adapters.cache.max_entries must be greater than zero",
            "validate_adapter_service: adapters.selection.max_adapters must be greater than zero",
            "validate_adapter_service: adapters.artifacts must not be empty",
            "validate_adapter_service: adapters.target_manifest.targets must not be empty",
        ),
    ),
    _r(
        "G65",
        "bad-adapter-selection",
        "A selection input that is not a required request/application input of exactly "
        "int64 `[batch, max_adapters]` (segments), int64 `[batch]` (counts), float32 "
        "`[batch, max_adapters]` (scales) or bool `[batch]` (active), request-aligned on axis 0, "
        "with its adapter_* runtime role.",
        "Selection inputs are request-aligned `[B]`/`[B, max_adapters]` tensors with the "
        "matching adapter_* runtime role.",
        upstream=(
            "validate_adapter_selection_input: adapters.selection.{} '{}' references an undeclared workflow input",
            "validate_adapter_service: adapters.selection.{} must not be empty",
            "validate_adapter_selection_input: adapters.selection.{} '{}' must reference a required request/application-sourced {}{} workflow input with batch_layout request_aligned on axis 0{}",
        ),
    ),
    _r(
        "G66",
        "bad-adapter-target",
        "A target with empty fields, a duplicate id or resolved component/initializer/slice, "
        "sizes of 0, a non-floating activation dtype, a zero rank or a non-positive alpha "
        "policy, a bad output slice or graph inputs, or an unknown component.",
        "Give each target a unique id, an existing component and positive sizes.",
        upstream=(
            "validate_adapter_service: {} id, component, initializer, node_name, and output_name must not be empty",
            "validate_adapter_service: {}.id '{}' is duplicated",
            "validate_adapter_service: {} input_features and output_features must be greater than zero",
            "validate_adapter_service: {}.rank must be greater than zero when present",
            "validate_adapter_service: {}.component '{}' is undeclared",
            "validate_adapter_service: {} duplicates a resolved component/initializer/slice binding",
            "validate_adapter_service: {}.activation_dtype '{}' must be a floating-point tensor dtype",
            "validate_adapter_service: {}.alpha must be finite and greater than zero when present",
            "validate_adapter_service: {}.output_slice role must be non-empty and its range must be within output_features",
            "validate_adapter_service: {}.graph_inputs must contain distinct non-empty a/b/optional-scale input names",
        ),
    ),
    _r(
        "G67",
        "bad-adapter-artifact",
        "Adapter artifacts whose indices are not 0..n-1, a repeated identity, empty provenance, "
        "a bad rank/alpha/dtype, no or duplicate-format weights, a loader that does not fit the "
        "format, bad hf_peft/ort_genai settings, a path outside `adapters/<alias>/`, or bad "
        "bindings (unknown or repeated target or weight_key, a rank/alpha breaking the target's "
        "or slice's policy).",
        "Fix the artifact as the message says (see docs/format.md, adapters).",
        upstream=(
            "validate_adapter_service: {} identity and version must not be empty",
            "validate_adapter_service: {}.index {} duplicates another adapter wire ID",
            "validate_adapter_service: {}.rank must be greater than zero",
            "validate_adapter_service: {}.dtype '{}' must be a floating-point adapter dtype",
            "validate_adapter_service: {}.weights must declare at least one external artifact",
            "validate_adapter_service: {}.weights[{}].location must be under package path adapters/{}/",
            "validate_adapter_service: {}.weights[{}].loader_capability must not be empty",
            "validate_adapter_service: {}.weights[{}].loader_capability must be {} for format {}",
            "validate_adapter_service: {}.weights[{}].scale_encoding must be alpha_over_rank for hf_peft",
            "validate_adapter_service: {}.weights[{}].scale_encoding must be baked for ort_genai",
            "validate_adapter_service: {}.weights[{}].config_location must be under package path adapters/{}/",
            "validate_adapter_service: {}.bindings must not be empty",
            "validate_adapter_service: {} target and weight_key must not be empty",
            "validate_adapter_service: {}.target '{}' is absent from adapters.target_manifest",
            "validate_adapter_service: {}.target '{}' requires graph_inputs for an ort_genai weight artifact",
            "validate_adapter_service: {} declares duplicate target '{}'",
            "validate_adapter_service: adapters artifact indices must be contiguous from zero; found {}",
            "validate_adapter_service: {}.provenance producer and present source/revision values must not be empty",
            "validate_adapter_service: {} duplicates adapter identity {}@{}",
            "validate_adapter_service: {}.alpha must be finite and greater than zero",
            "validate_adapter_service: {}.weights contains duplicate format {}",
            "validate_adapter_service: {}.weights[{}] hf_peft requires config_location; other formats forbid it",
            "validate_adapter_service: {} declares duplicate weight_key '{}'",
            "validate_adapter_service: {}.rank must be greater than zero when present #2",
            "validate_adapter_service: {}.alpha must be finite and greater than zero when present #2",
            "validate_adapter_service: {} effective rank {} violates target policy {}",
            "validate_adapter_service: {} effective alpha {} violates target policy {}",
            "validate_adapter_service: {} effective rank {} violates output-slice policy {}",
            "validate_adapter_service: {} effective alpha {} violates output-slice policy {}",
        ),
    ),
    _r(
        "G68",
        "adapter-capabilities-missing",
        "`adapters` present without `parameter_adapters` and "
        "`heterogeneous_adapter_batching` in the manifest.",
        "Add both capabilities to `pipeline.workflow.manifest.capabilities`.",
        upstream=(
            "validate_metadata: pipeline.workflow.manifest.capabilities is missing used capability '{}'",
        ),
    ),
    _r(
        "G69",
        "bad-preprocess-program",
        "A preprocess adapter without a program, a program not run by exactly one adapter "
        "component invoked once, an `encoded` port that is not uint8 rank 1, or program "
        "outputs that are optional, uncontracted, read a value no transform produces, disagree "
        "with their contract's dtype, are not outputs of the adapter's invocation, or unlike "
        "the port they bind.",
        "Pair each preprocess adapter with one program whose outputs match its ports.",
        upstream=(
            "validate_preprocessing_program: workflow adapter components using {}@{} require preprocessing.{} metadata",
            "validate_preprocessing_program: preprocessing.{} requires exactly one workflow adapter component using {}@{}, found {}",
            "validate_preprocessing_program: workflow {} preprocessing adapter '{}' input 'encoded' must be uint8 rank 1, got {} rank {}",
            "validate_preprocessing_program: workflow {} preprocessing adapter '{}' must declare input 'encoded'",
            "validate_preprocessing_program: workflow {} preprocessing adapter '{}' must be invoked exactly once, found {} invocations",
            "validate_preprocessing_program: preprocessing.{} output '{}' cannot be optional in a workflow; every declared adapter SSA output must be materialized",
            "validate_preprocessing_program: preprocessing.{} output '{}' must declare a TensorContract for workflow use",
            "validate_preprocessing_program: workflow {} preprocessing adapter '{}' has no output port '{}'",
            "validate_preprocessing_program: preprocessing.{} output '{}' dtype '{}' disagrees with its TensorContract '{}'",
            "validate_preprocessing_program: preprocessing.{} output '{}' must be a declared SSA output of adapter invocation '{}'",
            "require_compatible_tensor_contracts: {} has a contract incompatible with its adapter output port",
        ),
    ),
    _r(
        "G70",
        "bad-generation-override",
        "An override with an empty field name, naming an input that is not request-sourced "
        "with a runtime role, or with `minimum` > `maximum`.",
        "Point overrides at request inputs with runtime roles and consistent bounds.",
        upstream=(
            "validate_generation_contract: generation.overrides contains an empty field name",
            "validate_generation_contract: generation.overrides.{} input '{}' must be a request-sourced workflow input with a versioned runtime role",
            "validate_generation_contract: generation.overrides.{} references undeclared workflow input '{}'",
            "validate_generation_contract: generation.overrides.{} constraint minimum {} exceeds maximum {}",
        ),
    ),
    _r(
        "G71",
        "bad-profile",
        "A required profile of a kind readers do not know, a profile output that names no "
        "workflow output, or an inconsistent `decoding` block (missing for transcription, no "
        "blank_id for ctc, equal time and class axes, an undeclared lengths role, an inline "
        "vocabulary that disagrees with itself).",
        "Mark unknown profiles `requirement: ignorable`, and map profile outputs to declared "
        "outputs with a decoding they support.",
        upstream=(
            "validate_profiles: profiles.{} declares required kind '{}', which this reader cannot execute; declare requirement 'ignorable' to let strict readers skip it",
            "validate_profiles: profiles.{}.outputs.{} references undeclared workflow output '{}'",
            "validate_profile_decoding: profiles.{}.decoding is required because profiles.{}.kind is 'transcription'",
            "validate_profile_decoding: profiles.{}.decoding must bind a lengths output role because profiles.{}.batch_invariance is 'padding_sensitive'",
            "validate_profile_decoding: profiles.{}.decoding requires blank_id because kind is 'ctc'",
            "validate_profile_decoding: profiles.{}.decoding.time_axis and class_axis must not both be axis {}",
            "validate_profile_decoding: profiles.{}.decoding references output role '{}' that the profile does not declare",
            "validate_profile_decoding: profiles.{}.decoding.vocabulary requires non-empty tokens because source is 'inline'",
            "validate_profile_decoding: profiles.{}.decoding.vocabulary size {} disagrees with tokens length {}",
            "validate_profile_decoding: profiles.{}.decoding.vocabulary.word_delimiter '{}' is not present in tokens",
            "validate_profile_decoding: profiles.{}.decoding.vocabulary.ignored_tokens entry '{}' is not present in tokens",
            "validate_profile_decoding: profiles.{}.decoding.blank_id {} is out of range for a vocabulary of {} tokens",
        ),
    ),
    # ------------------------------------------------------------------ H. admission
    _r(
        "H72",
        "capability-not-in-manifest",
        "The structure uses a capability the manifest does not list.",
        "Add the capability to `pipeline.workflow.manifest.capabilities`.",
        upstream=(
            "validate_workflow: pipeline.workflow.manifest.capabilities is missing used capability '{}'",
        ),
    ),
    _r(
        "H73",
        "capability-unsupported",
        "A required capability that this runtime does not support.",
        "Remove the requirement or use a runtime that supports it; "
        "`reference-runtime capabilities` lists the supported set.",
        upstream=("validate_structure_and_capabilities: {}",),
        kind="unsupported",
    ),
    _r(
        "H74",
        "package-file",
        "No metadata file, no `pipeline`, or an artifact path that is absolute, contains `..`, "
        "escapes the package through a symlink, is missing or is not a regular file.",
        "Keep every artifact inside the package folder, referenced by a relative path.",
        upstream=(
            "validate_generation_contract: generation.overrides.{} requires pipeline.workflow to declare the request-sourced input '{}'",
            "validate_profiles: profiles.{}.outputs.{} requires pipeline.workflow to declare output '{}'",
        ),
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
        "The metadata file is not valid YAML/JSON, is not UTF-8, is empty, is not a mapping, "
        "refers to itself through an alias, or holds a value that cannot be constructed.",
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
        kind="unsupported",
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
        "An ONNX artifact (or its external data) that cannot be read as a model, or a "
        "tokenizer file (`tokenizer.json`, named or at the package root) that cannot be loaded.",
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
        upstream=(
            "validate_adapter_service: {}.component must be 'model' for bare-model metadata",
        ),
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
    _r(
        "C120",
        "continuous-batch-placement",
        "A `binding` component keyed to `onnx-genai.continuous-batch` that is not invoked exactly "
        "once, directly in the body of a top-level loop (the loop it batches), or a second such "
        "component.",
        "Invoke the one continuous-batch component once in the body of the top-level loop to "
        'batch (docs/runtime.md, "Serving requests in a continuous batch").',
    ),
    _r(
        "C121",
        "continuous-batch-slots",
        "The `max_slots` parameter of an `onnx-genai.continuous-batch` component is not a whole "
        "number >= 1.",
        "Set `max_slots` to the most requests one batch may hold (an integer >= 1).",
    ),
    _r(
        "E122",
        "continuous-batch-state",
        "A workflow that batches a loop without a `serving` section, or whose batched loop "
        "carries a cell the runtime cannot split into requests' rows: a session cell, a cell without a request axis, a bounded cell, or a growing cell that no "
        "`onnx-genai.autoregressive-decode` component reads as past KV or attention mask (the "
        "only growing values whose padding the runtime knows to be masked).",
        "Declare `serving`; give the cell a request-aligned `batch_layout`, keep session and "
        "bounded state out of the batched loop, and pass growing state to the decode contract; or remove the "
        "continuous-batch component.",
    ),
    _r(
        "H93",
        "unsupported-feature",
        "A feature the format defines and this runtime does not implement: a preprocessing "
        "operation or parameter value, a search default that changes decoding (beam search, "
        "repetition penalty, ...), profile pooling or decoding on a required profile, adapters "
        "without the portable fallback or with weights only in ort_genai, state that only "
        "works aliased (`aliasing: required`), a dtype it cannot materialise or compute with, "
        "a legacy `model.io` field it cannot lower. The package is valid; this runtime refuses "
        "to run it rather than guess.",
        "Run the package with a runtime that implements the feature the message names, or "
        "remove the feature from the package.",
        kind="unsupported",
    ),
    _r(
        "A94",
        "schema-revision-unsupported",
        "A `schema_version` naming another revision of the format than the one this runtime "
        "reads (a newer one retires and renames fields, so it is never read as this one).",
        "Run the package with a runtime that reads its revision, or export it as "
        "`schema_version: v1` (docs/format.md names the revision implemented).",
        kind="unsupported",
    ),
    _r(
        "A98",
        "metadata-too-large",
        "A metadata file (`inference_metadata.*`, `genai_config.json`) larger than the limit "
        "(16 MiB by default), refused on its size before it is read.",
        "Shrink the document (move large tables into artifact files), or raise the limit with "
        "REFERENCE_RUNTIME_MAX_METADATA_BYTES.",
    ),
    _r(
        "A99",
        "too-many-nodes",
        "A metadata document with more than 100,000 nodes (every key, value and list item), "
        "counted while it is parsed; YAML aliases count once per place they are expanded.",
        "Shrink the document; replace repeated aliases by one value.",
    ),
    _r(
        "A100",
        "nested-too-deeply",
        "A metadata document nested more than 64 levels deep (aliases count where they are "
        "expanded).",
        "Flatten the document; the format never needs more than a few levels.",
    ),
    _r(
        "A101",
        "string-too-long",
        "A string (a key or a value) of a metadata document longer than 1,048,576 characters.",
        "Move the long text into an artifact file the package names.",
    ),
    _r(
        "A102",
        "integer-too-long",
        "An integer written with more than 1,000 digits (decimal, hexadecimal, octal, binary "
        "or YAML's base-60 `1:30:00`), or an unquoted YAML number of more than 1,000 "
        "characters, refused on its text before it is converted.",
        "Write the integer with at most 1,000 digits (quote it if it is meant as a string).",
    ),
    _r(
        "C103",
        "text-graph-too-large",
        "A text-format graph (`.onnx.textproto`) larger than the limit (1 MiB by default), "
        "refused on its size before it is parsed.",
        "Export the graph as binary `.onnx` (any size), or raise the limit with "
        "REFERENCE_RUNTIME_MAX_TEXT_GRAPH_BYTES.",
    ),
    _r(
        "C104",
        "graph-ill-formed",
        "An ONNX graph that the ONNX checker refuses (an operator unknown to its opset, a "
        "value used before it is produced, a wrong attribute, an inferred type that conflicts "
        "with a declared one, ...) or that declares a tensor element type ONNX does not "
        "define.",
        "Run `onnx.checker.check_model(model, full_check=True)` on the graph and fix what it "
        "reports; re-export it.",
    ),
    _r(
        "C105",
        "tensor-data-mismatch",
        "A tensor of an ONNX graph (an initializer, a sparse tensor, a node attribute) whose "
        "stored data does not match its declared type and dimensions: external data without a "
        "`location`, `offset` or `length` that is not a non-negative integer, a `length` other "
        "than the size the dimensions and element type imply, inline data of another size, "
        "or dimensions that are negative.",
        "Re-export the graph; external data entries need `location`, `offset` and `length`, "
        "and `length` must equal the element count times the element size.",
    ),
    _r(
        "F115",
        "speculative-block-unresolved",
        "A `binding` component keyed to `onnx-genai.speculative-block` that cannot be resolved "
        "against the package: no `speculative` section, a proposer or target that is not an "
        "ONNX component, a parameter that does not name a port of the target (or of a block "
        "proposer), a block proposal without its proposer parameters (or a chained one with "
        "them, but for a proposer that reads token ids, which needs `proposer_mask_input` and "
        "may name `proposer_positions_input`), a cell of the proposer or target not carried "
        "through the component by a read-write service-group alias, or a rollback cell it does "
        "not carry.",
        "Declare what docs/speculative.md lists: the proposer and target as ONNX components, "
        "the graph names as parameters, and each cache cell's alias on the component.",
    ),
    _r(
        "F116",
        "chained-proposal-unresolved",
        "A chained proposal run by `onnx-genai.speculative-block` without a field its executor "
        "reads: `token_embedding` (the table proposed tokens are embedded with) when the "
        "proposer's `token_embedding_input` is not an integer port (a proposer that reads token "
        "ids embeds them itself), or the component's `carry` ports when the proposal has a "
        "folded carry.",
        "Add the field the message names; nothing is inferred from names or shapes.",
    ),
    _r(
        "F117",
        "speculative-unsupported",
        "A valid speculative package this runtime's speculative executor does not run: a "
        "`mapped` vocabulary, more than one speculative-block component, a cache cell whose "
        "group has no `sequence_axis` (other than the recurrent cell of a chained proposal fed "
        "token embeddings), or such a recurrent cell in a group with one (the cells of a "
        "proposer that reads token ids are caches, each with a sequence axis).",
        "Use an identical or subset vocabulary, one speculative-block component, and cache "
        "groups with a sequence axis.",
        kind="unsupported",
    ),
    _r(
        "C125",
        "operator-unknown-to-onnx-runtime",
        "A node ONNX Runtime cannot build, held to ONNX Runtime's own operator schemas (ONNX's "
        "and its contrib operators, which ONNX's checker does not know): an operator, or an "
        "operator set version, it does not define (a `com.microsoft` operator misspelled, a "
        "domain it has no operators for), or, in a domain ONNX's checker does not know, an "
        "attribute the operator does not define, an attribute of another type, a required "
        "attribute missing, a wrong number of inputs or outputs, a required "
        "one left empty, or an input or output type its type constraint does not allow.",
        "Use the operators and attributes the installed ONNX Runtime defines (its contrib "
        "operators: ONNX Runtime's docs/ContribOperators.md), at an operator set version it "
        "supports; remove attributes the operator does not define; re-export the graph.",
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
       "of rank <= 1; an iteration value's shape cannot be resolved.",
       "Feed the loop an integer bound >= 0 and a bool predicate.", phase="run"),
    _r("E56", "scatter-out-of-bounds",
       "Before an `indexed_scatter` write: a capacity that is unavailable (an optional input "
       "not given) or not an integer scalar, a buffer whose extent is not the capacity, a "
       "destination outside [0, capacity) (negatives included), or a logical length outside "
       "[0, capacity]. The component is not run.",
       "Keep write indices and lengths inside the declared capacity.", phase="run"),
    _r("E57", "recurrence-violation",
       "A carried update breaks the cell's recurrence (dtype, rank, an invariant shape, growth "
       "by other than `increment`, beyond `max`), or rows of mixed activity on a cell without a "
       "request axis; or, served, a next value without one row per request sharing the body.",
       "Make the body produce the next value the recurrence declares, row for row.",
       phase="run"),
    _r("E58", "session-required",
       "The workflow has session-scoped state but the request carries no session id, the "
       "session id is unknown (closed or never created), or a run of that session is in flight "
       "(a session runs one turn at a time).",
       "Create a session with `engine.create_session()` and pass `session_id`.", phase="run"),
    _r("H75", "request-refused",
       "The request supplies an undeclared input (or one twice), misses a required one, gives a "
       "value that cannot take the input's dtype, a keyword the package has no input for, or a "
       "text prompt without a tokenizer; or a request value is out of its range: a keyword "
       "that is not a finite number in its documented range (an integer where one is due, "
       "never a bool), or a prompt token that is not an integer within the vocabulary.",
       "Pass exactly the declared inputs, with values in range; the message names the one at "
       "fault in the caller's terms.", phase="run"),
    _r("H84", "contract-violation",
       "A value breaks its contract at a boundary: an input, an invoke port, a carried cell's "
       "start value, an emit, or a final output (dtype, rank, fixed dimension, or a symbol bound "
       "to two extents).",
       "Produce values that match the declared contracts; the message names the boundary.",
       phase="run"),
    _r("D85", "bad-emit-value",
       "An emit's `when`/`valid_length` is not a bool/integer of rank <= 1 with one value or one "
       "per row, a `valid_length` exceeds the value's extent, an appended chunk does not "
       "match what the output holds, or an enclosing loop's predicate marks some row inactive "
       "without one flag per row; or, served, a value emitted in the loop body without one "
       "row per request sharing it (or with no request axis).",
       "Emit per-row controls with one entry per row and lengths within the value, inside "
       "loops whose predicates have one flag per row; in a served body, emit request-aligned "
       "values computed row by row.",
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
       phase="run", kind="unsupported"),
    _r("H90", "native-unsupported",
       "The native executor does not implement an op, opset, dtype or attribute value a "
       "component uses; the component is refused when the engine loads it, listing each node.",
       "Run the package with `--executor ort`; the native executor never falls back.",
       phase="run", kind="unsupported"),
    _r("F118", "proposal-width-out-of-range",
       "A request's speculative proposal width (the speculative-block component's "
       "`proposal_width` input) below 1, above `speculative.max_proposal_width`, or above the "
       "width of the block its proposer returns. Refused at the component's first call that "
       "reads the width (the prefill, where it is bound there), before the proposer or the "
       "target runs.",
       "Ask for a width from 1 to `max_proposal_width`.", phase="run"),
    _r("H113", "kv-budget-exceeded",
       "The engine has a KV budget (`kv_budget_bytes`) and the request's KV (the service-group "
       "state cells at the request's rows and token positions: prompt, a session's stored "
       "conversation, and the new-token bound) needs more bytes than it. Refused before any "
       "component runs; a session stays as it was.",
       "Shorten the prompt, lower max_new_tokens or send fewer rows (reset a long session), or "
       "load the engine with a larger budget; the message gives the bytes needed and available.",
       phase="run"),
    _r("H124", "not-servable",
       "`Engine.serve` (or `reference-runtime serve`) on a package whose workflow has no "
       "`onnx-genai.continuous-batch` component (a bare decoder whose "
       "`model.runtime_configurable.continuous_batching` is false lowers without one), or a "
       "`slots` outside 1..`max_slots`. Refused before any request runs.",
       "Serve a package that declares the contract, run its requests one at a time with "
       "`run`, or ask for at most `max_slots` slots.",
       phase="run", kind="unsupported"),
    _r("H114", "kv-budget-refused",
       "`kv_budget_bytes` is not an integer >= 0, or the package's KV cannot be bounded before a "
       "request runs (a service-group cell without a shape or a byte-sized dtype, a growing "
       "axis no new-token bound or input `max` limits, a symbol no input binds), so no budget "
       "can be enforced on it. Refused when the engine loads (or, where only an optional input "
       "binds a cell's symbol, when a request leaves that input out).",
       "Pass a whole number of bytes >= 0, or load the package without a budget.",
       phase="run"),
)  # fmt: skip

# ---------------------------------------------------------------------- upstream crosswalk
# The semantic checks of the upstream loader (validation.rs of the pinned snapshot) that no rule
# above makes exactly, each with why: "gap:" (a check this runtime should make, with the code of
# the rule it belongs under), "departure:" (a deliberate difference, documented in
# docs/format.md) or "internal:" (a check of upstream's own compiled form that no document can
# break). Every other upstream check is listed, by id, in the `upstream` notes of the rule that
# makes it; tests/test_upstream_checks.py keeps the two lists exactly the upstream set.
UPSTREAM_NOT_COVERED: dict[str, str] = {
    "validate_speculative_rollback: speculative.rollback_state references unknown workflow state '{}'": (
        "departure: rollback_state may name a service group as well as a cell (docs/format.md, decisions); a name that is neither is refused (F60)"
    ),
    "validate_workflow_node: {}.effects is missing declared effect '{}'": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "validate_workflow_node: {}.effects.{} consumes '{}', but the incoming token is '{}'": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "validate_workflow_node: {}.effects.{} references undeclared effect": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "validate_workflow_node: {}.effects.{}.body_input '{}' is already produced": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "validate_workflow_node: {}.effects.{} body produces '{}', but the final body token is {}": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "validate_workflow_node: {}.effects.{}.produces '{}' is already produced": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "validate_workflow_node: {}.effects.{} consumes '{}', but the incoming token is '{}' #2": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "validate_workflow_node: {}.effects.{} references undeclared effect #2": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "validate_workflow_node: {}.effects.{} has no successor for case '{}'": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "validate_workflow_node: {}.effects.{} references unknown case '{}'": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "validate_workflow_node: {}.effects.{} must map the default branch exactly when one is declared": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "validate_workflow_node: {}.effects.{}.cases.{} declares successor '{}', but the case produces {}": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "validate_workflow_node: {}.effects.{}.default declares successor '{}', but the default produces {}": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "validate_workflow_node: {}.effects.{} joined successor '{}' must be distinct from every case-local successor": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "validate_workflow_node: {}.effects.{} produces duplicate effect token '{}'": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "validate_workflow_node: {}.cases.{} changes effect '{}' without an explicit branch merge": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "validate_workflow_node: {}.default changes effect '{}' without an explicit branch merge": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "apply_effect_transition: {} consumes effect token '{}', but current token is '{}'": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "apply_effect_transition: {} references undeclared effect '{}'": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
    "apply_effect_transition: {} produces duplicate effect token '{}'": (
        "internal: checks the effect tokens upstream's own lowering (compile_workflow) derives; a document authors no tokens, so this checks that compiler, not a rule of the format"
    ),
}

RULES: dict[str, Rule] = {rule.code: rule for rule in (*RULE_LIST, *RUN_RULE_LIST)}
LOAD_RULES = tuple(rule.code for rule in RULE_LIST)

if len(RULES) != len(RULE_LIST) + len(
    RUN_RULE_LIST
):  # pragma: no cover - guards edits to the table
    raise RuntimeError("duplicate rule code in RULE_LIST")


def hint_for(code: str) -> str:
    return RULES[code].fix
