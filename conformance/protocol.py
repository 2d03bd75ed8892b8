"""The runner protocol: what a runtime under test implements (protocol version 2).

A runtime is anything with these methods (docs/conformance.md describes each field, and the
JSON-lines form):

- ``describe() -> dict``: ``{"name", "version", "protocol": 2, "features": [...]}`` and
  optionally ``"executors": [...]``; ``features`` is the set of case features the runtime
  supports (``FEATURES`` below); cases needing others are reported as not applicable, never as
  passes. ``executors`` names the executors ``load`` accepts (the ``parity`` suite compares them).
- ``load(package_dir, executor=None) -> handle``: load a package, or raise :class:`Refused`
  (stage "load") or :class:`Unsupported`. ``executor`` is one of the declared ``executors``; it
  is only ever passed to a runtime that declares some, so ``load(package_dir)`` suffices for
  the others. ``options`` is passed as a keyword only to a runtime declaring the feature that
  takes it: ``{"kv_budget_bytes": N}`` (``kv_admission``), ``{"draft": folder}``
  (``attached_draft``: a bare draft decoder attached to the bare decoder loaded).
- ``run(handle, request) -> dict``: run one request, or raise :class:`Refused` (stage "run") or
  :class:`Unsupported`. ``request`` holds ``prompt`` (token rows or null), ``inputs`` (name ->
  array, or, only for a runtime declaring ``plain_inputs``, a plain value: a number, boolean
  or nested list), ``max_new_tokens``, ``seed``, ``greedy``, ``stop_on_eos``, ``session_id``;
  only for a runtime declaring ``sampling_keywords``, ``greedy`` may be null (unset) and the
  sampling keywords ``temperature``, ``top_k``, ``top_p`` and ``min_p`` (``SAMPLING_KEYWORDS``)
  may be present; only for a runtime declaring ``component_overrides``, ``overrides`` (target
  component name -> replacement component name, or null). The result
  holds ``outputs`` (name -> array, or a list of arrays / null per row), ``tokens`` and
  ``finish_reasons`` (per row, or null), ``events`` (name -> every emission of an ``event``
  output, in order, each an array or, for a per-row output, a list of one array or None per
  row; absent means none) and optionally ``diagnostics``.
- ``create_session(handle) -> str``, ``reset_session(handle, sid)``, ``close_session(handle, sid)``.
- ``serve(handle, requests, slots) -> list[dict]`` (only for a runtime declaring
  ``continuous_batching``): serve one-row requests (each a ``run`` request without
  ``session_id``, plus ``arrival``, the batch step from which it may be admitted, 0 when
  absent) in one continuous batch of ``slots`` slots; one result per request in the order they finished:
  ``{"index", "admitted", "finished", "slot", "tokens", "finish_reason", "outputs",
  "events"}`` (``index``: the request's position; ``admitted`` / ``finished``: the batch steps
  it entered and left its slot; ``tokens``: its one row; ``outputs`` / ``events``: as ``run``
  returns them for the request alone; only for a runtime declaring ``batch_counters`` or
  ``batch_trace``, ``diagnostics``). A refused request raises :class:`Refused` (stage "run")
  before anything is served.
- ``close(handle)``: forget a loaded package.

Certification calls these from several threads at once (``--jobs``), on different handles.

Version 2 adds :class:`Unsupported`, the ``rule_codes`` feature (fail-closed cases pass only
with the broken rule's code) and splits version 1's ``lowering`` feature into ``genai_config``,
``model_io`` and ``runtime_contracts``. A version 1 runtime (``describe`` without
``"protocol"``) still speaks it, unless it declares ``lowering``, which certification reports
as a fatal problem naming the replacement features.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Protocol

import ml_dtypes
import numpy as np

PROTOCOL_VERSION = 2

# Case features: a runtime declares which it supports.
FEATURES = (
    "load",  # loading valid packages
    "rule_codes",  # refusing invalid packages and requests, naming the broken rule's code
    # Optional, stricter: a package refused at load lists every violation with its place in the
    # document (Refused.violations); a fail-closed case then passes only when one violation of
    # its rule points where the case broke it.
    "rule_locations",
    # Optional, stricter: a package refused at load names exactly the rules it breaks. Each
    # fail-closed load case breaks one rule (a few, one fault the format checks twice, list the
    # others); naming a rule the package does not break is a false reason, and fails the case.
    "exact_rule_codes",
    "run",  # running requests
    "invoke",
    "sequence",
    "loop",
    "branch",
    "emit",
    "per_row_emit",
    "event_emit",
    "session_state",
    "service_groups",
    "indexed_scatter",
    "adapters",
    "grammar_guidance",
    "telemetry",
    "preprocessing",
    "speculative",
    # Bare decoders the runtime lowers to a workflow at load: an onnxruntime-genai folder
    # (genai_config.json, no metadata file), and a legacy document whose model.io describes
    # the decoder.
    "genai_config",
    "model_io",
    # Packages using the runtime contracts a lowered decoder runs on
    # (onnx-genai.autoregressive-decode, onnx-genai.token-policy) and conversation sessions.
    "runtime_contracts",
    # Packages whose workflow runs onnx-genai.speculative-block (propose, verify, accept,
    # correct, roll back): greedy speculative decoding equals the target's plain greedy tokens.
    "speculative_decoding",
    # Draws tokens itself, seeded and reproducible, with temperature, top-k and top-p filters
    # (a bare decoder's sampled requests); judged by properties, not by exact tokens.
    "sampling",
    # Also the min-p filter.
    "min_p",
    # Optional, stricter: draws exactly as the reference runtime documents (docs/lowering.md),
    # so sampled goldens hold token for token.
    "reference_draws",
    # Runs a case under every executor it declares (describe's "executors") and compares them
    # pairwise; with fewer than two executors, parity is judged against the goldens.
    "parity",
    # Optional: runs report diagnostics {"counters": {"sessions_created": {executor: n},
    # "invocations": {component: {executor: n}}}} of a native (non-ONNX-Runtime) executor,
    # checked by the `executor` suite: no ONNX Runtime session or invocation, and an invocation
    # counted for each component the workflow invokes on every run (root steps, loop setup).
    "native_executor",
    # Optional: runs report diagnostics {"counters": {"sessions_created": {executor: n}}}, the
    # sessions the runtime created for the loaded package so far (one per component, reused by
    # every invocation and request), checked by the `component_sessions` suite.
    "session_counters",
    # Optional: takes a KV byte budget as a load option ({"kv_budget_bytes": N}) and refuses,
    # before running anything, a request whose KV does not fit (H113), a session turn included
    # (the session stays as it was); a budget that is not bytes is refused at load (H114).
    "kv_admission",
    # Optional: takes a bare draft decoder as a load option ({"draft": folder}) for a bare
    # decoder (genai_config, model_io) and decodes greedily with the draft proposing and the
    # decoder verifying: results equal the decoder's own; a pair the draft cannot propose for
    # (another vocabulary, a shorter context, no attention mask, a target sampling by default)
    # is refused at load (H91).
    "attached_draft",
    # Optional: reports diagnostics {"counters": {"contract_executions": {contract id: n}}},
    # cumulative for the loaded package: the executions of runtime contracts (a `binding`
    # component with a `contract`, run by the runtime's own executor), counted at dispatch; a
    # package of ONNX graphs counts none. Checked by the `contract_counters` suite.
    "contract_counters",
    # Optional: serves several one-row requests with arrival steps in one continuous batch (the
    # `serve` method), each request's results equal to its solo run, freed slots reused.
    "continuous_batching",
    # Optional: each entry `serve` returns carries diagnostics {"counters": {"batching":
    # {"admitted", "slots_reused", "steps", "bodies", "rows"}}}, the runtime's totals since the
    # package was loaded, read after the serve: requests admitted, admissions into a slot an
    # earlier request held, batch steps that ran the loop body, runs of the body, and rows those
    # runs advanced. Checked by the `batch_counters` suite: requests decoding at one step share
    # one run of the body (bodies equal steps), and the counts agree with the schedule.
    "batch_counters",
    # Optional: each entry `serve` returns carries diagnostics {"batch_trace": [record, ...]},
    # one record per batch step that ran the loop body, in step order (the same in every
    # entry): {"step", "slots", "accepted_len", "live", "bodies"}: the request index each slot
    # ran the body for (null: none), each slot's accepted_len (0 for a slot that sat the step
    # out), the liveness bit the batch published (will it decode again) and the runs of the
    # body. Checked by the `batch_trace` suite against the schedule.
    "batch_trace",
    # Optional: takes a request's `overrides` (target component -> replacement component) and
    # runs each declared replacement in place of its application_overridable target for that
    # request, ports remapped by contract role; refuses (C21) a replacement that is not
    # interchangeable through the shared contract, an unknown name or a malformed value.
    "component_overrides",
    # Optional: takes request inputs given as plain values (numbers, booleans, nested lists:
    # JSON) and gives each its input's declared dtype without a cast of kind (no boolean as a
    # number, no non-integer number as an integer, no number as a boolean), refusing (H75) one
    # that needs such a cast, lies outside the dtype's range or is no rectangular array of
    # numbers.
    "plain_inputs",
    # Optional: takes a request's sampling keywords (SAMPLING_KEYWORDS) and a `greedy` left
    # unset (null), and fills the workflow's sampling-role request inputs from them: a greedy
    # request gives temperature 0, top_k 1, top_p 1, min_p 0; an unset `greedy` samples when a
    # keyword is given, else as generation.defaults.do_sample says (greedy if silent); a
    # sampling request's unset keywords take generation.defaults. Refuses (H75) a keyword out
    # of range or of another type, one beside greedy true, one the package has no input for,
    # and (G88) one generation.overrides does not list or bounds.
    "sampling_keywords",
)

# The request keywords a runtime declaring ``sampling_keywords`` takes (each absent or null when
# the request does not give it).
SAMPLING_KEYWORDS = ("temperature", "top_k", "top_p", "min_p")


class Refused(Exception):
    """The runtime refused a package (stage "load") or a request (stage "run") because it
    breaks a rule: ``code`` names the rule (a comma-separated list where several are broken).
    ``violations`` (a runtime declaring ``rule_locations``, at load): every broken rule as a
    ``(code, location)`` pair, the location a path into the package's document
    (``pipeline.workflow.steps[0].value``, docs/conformance.md)."""

    def __init__(
        self,
        stage: str,
        message: str,
        code: str | None = None,
        violations: list[tuple[str, str]] | None = None,
    ):
        super().__init__(message)
        self.stage = stage
        self.message = message
        self.code = code
        self.violations = violations


class Unsupported(Exception):
    """The runtime does not support what a package (stage "load") or a request (stage "run")
    needs, naming the ``feature`` (one of ``FEATURES``) it lacks. Distinct from a refusal: the
    package may well be valid. A case is then not applicable when the runtime does not declare
    the feature, and fails when it does (protocol version 2)."""

    def __init__(self, stage: str, feature: str, message: str = ""):
        super().__init__(message or f"{feature} is not supported")
        self.stage = stage
        self.feature = feature
        self.message = message or f"{feature} is not supported"


class Runtime(Protocol):
    def describe(self) -> dict: ...
    def load(self, package_dir: str, executor: str | None = None): ...
    def run(self, handle, request: dict) -> dict: ...
    def create_session(self, handle) -> str: ...
    def reset_session(self, handle, sid: str) -> None: ...
    def close_session(self, handle, sid: str) -> None: ...
    def close(self, handle) -> None: ...

    # only for a runtime declaring continuous_batching:
    # def serve(self, handle, requests: list[dict], slots: int) -> list[dict]: ...


# ------------------------------------------------------------------ arrays on the wire

_DTYPES = {
    "float32": np.float32, "float16": np.float16, "float64": np.float64,
    "bfloat16": ml_dtypes.bfloat16, "int64": np.int64, "int32": np.int32, "int16": np.int16,
    "int8": np.int8, "uint64": np.uint64, "uint32": np.uint32, "uint16": np.uint16,
    "uint8": np.uint8, "bool": np.bool_,
}  # fmt: skip
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}


def encode_array(array) -> dict:
    """``{"dtype", "shape", "base64"}``: little-endian row-major bytes, exact for every dtype."""
    array = np.asarray(array)  # (ascontiguousarray would turn a rank-0 array into shape [1])
    name = _NAMES.get(array.dtype)
    if name is None:
        raise TypeError(f"arrays of dtype {array.dtype} have no wire encoding")
    data = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes(order="C")
    return {"dtype": name, "shape": list(array.shape), "base64": base64.b64encode(data).decode()}


def decode_array(obj: dict) -> np.ndarray:
    dtype = np.dtype(_DTYPES[obj["dtype"]]).newbyteorder("<")
    data = base64.b64decode(obj["base64"])
    return np.frombuffer(data, dtype=dtype).reshape(obj["shape"]).astype(dtype.newbyteorder("="))


def encode_value(value):
    """An output: an array, or a per-row list of arrays / None."""
    if isinstance(value, list):
        return {"rows": [None if row is None else encode_array(row) for row in value]}
    return encode_array(value)


def decode_value(obj):
    if "rows" in obj:
        return [None if row is None else decode_array(row) for row in obj["rows"]]
    return decode_array(obj)


def is_plain(value) -> bool:
    """Whether a request input is a plain value (a number, boolean, string, null or nested
    list of them, as JSON carries it: the ``plain_inputs`` feature) rather than an array."""
    return not isinstance(value, np.ndarray | np.generic)


def encode_request(request: dict) -> dict:
    """Array inputs encoded (``encode_array``); plain values (``is_plain``) as they are."""
    out = dict(request)
    inputs = request.get("inputs") or {}
    out["inputs"] = {k: v if is_plain(v) else encode_array(v) for k, v in inputs.items()}
    return out


def decode_request(obj: dict) -> dict:
    """An encoded array (a JSON object) decoded; any other JSON value is a plain input."""
    out = dict(obj)
    inputs = obj.get("inputs") or {}
    out["inputs"] = {k: decode_array(v) if isinstance(v, dict) else v for k, v in inputs.items()}
    return out


def encode_events(events: dict) -> dict:
    """Event outputs: name -> every emission, in order, each an array (or, for a per-row
    output, a list with one array or None per row)."""
    return {name: [encode_value(e) for e in emissions] for name, emissions in events.items()}


def decode_events(obj: dict) -> dict:
    return {name: [decode_value(e) for e in emissions] for name, emissions in obj.items()}


def encode_result(result: dict) -> dict:
    out = dict(result)
    out["outputs"] = {k: encode_value(v) for k, v in result["outputs"].items()}
    if result.get("events") is not None:
        out["events"] = encode_events(result["events"])
    return out


def decode_result(obj: dict) -> dict:
    out = dict(obj)
    out["outputs"] = {k: decode_value(v) for k, v in obj["outputs"].items()}
    if obj.get("events") is not None:
        out["events"] = decode_events(obj["events"])
    return out


@dataclass(frozen=True)
class RuntimeSpec:
    """How ``--runtime`` named the runtime (for reports)."""

    text: str
