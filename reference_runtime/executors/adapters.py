"""Executors of the adapter ABIs (``kind: adapter`` components), keyed by ``(abi, version)``.

Each is a component session like any other: ``run(inputs, outputs)`` on host arrays. Ports are
mapped to the ABI's roles through the component's ``contract.bindings``.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import OrderedDict

import numpy as np

from ..counters import Counters
from ..errors import ReferenceRuntimeError, RunError
from ..package.abis import TEXT_ASSEMBLY
from ..package.visit import invocations
from .base import Session, current_run
from .preprocess import ProgramError, run_program

_EPOCH_NS = time.monotonic_ns()


class _AdapterSession(Session):
    host_only = True  # runs on host arrays: device inputs are copied back (and counted)

    def __init__(self, component: str, comp):
        self.component = component
        self.abi = comp.implementation.abi
        self.executor = f"adapter:{self.abi}@{comp.implementation.version}"
        contract = comp.contract
        self.bindings = dict(contract.bindings) if contract else {}
        self.parameters = dict(contract.parameters) if contract else {}
        self.port_role = {port: role for role, port in self.bindings.items()}

    def roles(self, inputs) -> dict[str, np.ndarray]:
        return {self.port_role.get(port, port): value for port, value in inputs.items()}

    def error(self, message: str, code: str = "C86") -> RunError:
        return RunError(code, f"adapter {self.component!r} ({self.abi}): {message}")


# ------------------------------------------------------------------ grammar guidance


class GrammarGuidance(_AdapterSession):
    """clone / lookahead / commit over an int64 ``[states, vocab]`` transition table, where
    -1 marks a forbidden token."""

    def run(self, inputs, outputs):
        action = self.parameters.get("action")
        x = self.roles(inputs)
        state = np.asarray(x["state"]).astype(np.int64).reshape(-1)
        rows = state.size
        table = x.get("transition_table")
        tokens = x.get("tokens")
        lengths = x.get("valid_length")
        n_states = table.shape[0] if table is not None else None
        next_state = state.copy()
        consumed = np.zeros(rows, dtype=np.int64)
        if action != "clone":
            if tokens is None or lengths is None or table is None:
                raise self.error(
                    f"action {action!r} needs tokens, valid_length and transition_table"
                )
            vocab = table.shape[1]
            for r in range(rows):
                s = int(state[r])
                if not 0 <= s < n_states:
                    raise self.error(f"row {r}: grammar state {s} is outside [0, {n_states})")
                n = int(np.asarray(lengths).reshape(-1)[r if np.size(lengths) > 1 else 0])
                if not 0 <= n <= tokens.shape[1]:
                    raise self.error(f"row {r}: valid_length {n} is outside [0, {tokens.shape[1]}]")
                for i in range(n):
                    tok = int(tokens[r, i])
                    nxt = int(table[s, tok]) if 0 <= tok < vocab else -1
                    if nxt < 0:
                        if action == "commit":
                            raise self.error(
                                f"row {r}: token {tok} is rejected by the grammar in state {s}"
                            )
                        break
                    if nxt >= n_states:
                        raise self.error(f"row {r}: transition to state {nxt} >= {n_states}")
                    s = nxt
                    consumed[r] += 1
                next_state[r] = s
        produced = {"next_state": next_state, "consumed_length": consumed}
        if table is not None:
            allowed = table[next_state] >= 0 if rows else np.zeros((0, table.shape[1]), bool)
            counts = allowed.sum(axis=1)
            forced = np.where(counts == 1, allowed.argmax(axis=1), 0).astype(np.int64)
            produced["logits_mask"] = allowed
            produced["forced_tokens"] = forced.reshape(rows, 1)
            produced["forced_length"] = (counts == 1).astype(np.int64)
        out = {}
        for port in outputs:
            role = self.port_role.get(port, port)
            if role not in produced:
                raise self.error(f"output {role!r} cannot be produced by action {action!r}")
            out[port] = produced[role]
        return out


# ------------------------------------------------------------------ telemetry


class Telemetry(_AdapterSession):
    def run(self, inputs, outputs):
        action = self.parameters.get("action")
        now = time.monotonic_ns() - _EPOCH_NS
        if action == "start":
            produced = {"timestamp": np.array(now, dtype=np.int64)}
        else:
            stamp = self.roles(inputs).get("timestamp")
            if stamp is None or np.size(stamp) != 1:
                raise self.error("elapsed needs one timestamp value")
            ms = max(0.0, (now - int(np.asarray(stamp).reshape(-1)[0])) / 1e6)
            produced = {"duration_ms": np.array(ms, dtype=np.float32)}
        return {port: produced[self.port_role.get(port, port)] for port in outputs}


# ------------------------------------------------------------------ parameter overlay (LoRA)


def read_safetensors(data: bytes) -> dict[str, np.ndarray]:
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    base = 8 + size
    kinds = {"F32": "<f4", "F16": "<f2", "F64": "<f8"}
    out = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        if info["dtype"] not in kinds:
            raise ValueError(f"unsupported safetensors dtype {info['dtype']} for {key}")
        start, end = info["data_offsets"]
        array = np.frombuffer(data[base + start : base + end], dtype=kinds[info["dtype"]])
        out[key] = array.reshape(info["shape"]).astype(np.float32)
    return out


class AdapterWeightsStore:
    """Loads adapter factors on demand, keeps at most ``max_entries`` (least recently used
    evicted); ``engine.counters['adapter_cache']`` counts loads, hits and evictions. One lock
    guards the cache: runs on several threads share it."""

    def __init__(self, package, counters: Counters):
        self.package = package
        self.adapters = package.metadata.adapters
        self.counters = counters
        cache = self.adapters.cache
        self.capacity = cache.max_entries if cache else len(self.adapters.artifacts)
        self.by_index = {a.index: (alias, a) for alias, a in self.adapters.artifacts.items()}
        self.cache: OrderedDict[int, dict] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, index: int) -> dict:
        with self._lock:
            if index in self.cache:
                self.cache.move_to_end(index)
                self.counters.add("adapter_cache", "hits")
                return self.cache[index]
            alias, artifact = self.by_index[index]
            factors = self._load(alias, artifact)
            self.counters.add("adapter_cache", "loads")
            self.cache[index] = factors
            while len(self.cache) > self.capacity:
                self.cache.popitem(last=False)
                self.counters.add("adapter_cache", "evictions")
            return factors

    def _load(self, alias, artifact) -> dict:
        """target id -> (A [rank, in], B [out, rank], scaling); a binding's own rank and alpha
        override the artifact's."""
        targets = {t.id: t for t in self.adapters.target_manifest.targets}
        weights = next(w for w in artifact.weights if w.format != "ort_genai")
        path = self.package.root / weights.location
        out = {}

        def scaling(binding) -> tuple[int, float]:
            rank = binding.rank if binding.rank is not None else artifact.rank
            alpha = binding.alpha if binding.alpha is not None else artifact.alpha
            return rank, (alpha / rank if weights.scale_encoding == "alpha_over_rank" else 1.0)

        if weights.format == "json":
            data = json.loads(path.read_text())["targets"]
            for binding in artifact.bindings:
                t = targets[binding.target]
                rank, factor = scaling(binding)
                entry = data[binding.weight_key]
                a = np.asarray(entry["a"], dtype=np.float32).reshape(rank, t.input_features)
                b = np.asarray(entry["b"], dtype=np.float32).reshape(t.output_features, rank)
                out[binding.target] = (a, b, factor)
        elif weights.format in ("hf_peft", "safetensors"):
            tensors = read_safetensors(path.read_bytes())
            for binding in artifact.bindings:
                a = next(v for k, v in tensors.items() if binding.weight_key in k and "lora_A" in k)
                b = next(v for k, v in tensors.items() if binding.weight_key in k and "lora_B" in k)
                out[binding.target] = (a, b, scaling(binding)[1])
        else:
            raise ReferenceRuntimeError(
                f"adapter {alias!r}: weights format {weights.format!r} is not readable here",
                code="G67",
            )
        return out


class AdapterSelection:
    """The per-request adapter context, validated once before the workflow runs."""

    def __init__(self, rows: list[list[tuple[int, float]]]):
        self.rows = rows


def _gather_rows(package, values: dict, chosen: list) -> list:
    """A supplied input whose role is ``row_selection`` re-gathers the per-row adapter context
    (row ``i`` of the workflow's batch takes the context of request row ``indices[i]``;
    repeats allowed). It changes nothing else."""
    for name, inp in package.metadata.workflow.inputs.items():
        role = getattr(inp.role, "role", None)
        if role != "row_selection" or name not in values:
            continue
        indices = np.asarray(values[name]).reshape(-1)
        if indices.dtype.kind not in "iu":
            raise RunError("G87", f"row selection {name!r} must hold integer row indices")
        bad = [int(i) for i in indices if not 0 <= int(i) < len(chosen)]
        if bad:
            raise RunError(
                "G87",
                f"row selection {name!r} names row {bad[0]}, outside [0, {len(chosen)})",
                hint="Select rows of the request by their index (repeats are allowed).",
            )
        return [chosen[int(i)] for i in indices]
    return chosen


def select_adapters(package, values: dict) -> AdapterSelection | None:
    adapters = package.metadata.adapters
    if adapters is None:
        return None
    sel = adapters.selection

    def need(name):
        if name not in values:
            raise RunError("G87", f"adapter selection input {name!r} was not supplied")
        return np.asarray(values[name])

    counts = need(sel.adapter_counts).reshape(-1)
    rows = counts.size
    segments = need(sel.segments).reshape(rows, -1)
    scales = need(sel.scales).reshape(rows, -1).astype(np.float64)
    active = need(sel.active).reshape(-1) if sel.active else np.ones(rows, dtype=bool)
    if not adapters.portable_fallback:
        raise RunError(
            "G87", "adapters.portable_fallback is false and this runtime has no native LoRA kernels"
        )
    known = {a.index for a in adapters.artifacts.values()}
    chosen: list[list[tuple[int, float]]] = []
    distinct: set[int] = set()
    for r in range(rows):
        if not active[r]:
            chosen.append([])
            continue
        n = int(counts[r])
        if not 0 <= n <= segments.shape[1]:
            raise RunError("G87", f"row {r}: adapter count {n} is outside [0, {segments.shape[1]}]")
        row = []
        for slot in range(n):
            index, scale = int(segments[r, slot]), float(scales[r, slot])
            if index not in known:
                raise RunError("G87", f"row {r}: adapter index {index} is not declared")
            if not math.isfinite(scale) or abs(scale) > 16:
                raise RunError("G87", f"row {r}: adapter scale {scale} is not finite in [-16, 16]")
            if any(index == i for i, _ in row):
                raise RunError("G87", f"row {r}: adapter {index} is selected twice")
            row.append((index, scale))
            distinct.add(index)
        chosen.append(row)
    chosen = _gather_rows(package, values, chosen)
    limit = adapters.cache.max_entries if adapters.cache else len(known)
    if len(distinct) > limit:
        raise RunError(
            "G87", f"the request selects {len(distinct)} distinct adapters; the cache holds {limit}"
        )
    return AdapterSelection(chosen)


class ParameterOverlay(_AdapterSession):
    def __init__(self, component, comp, store: AdapterWeightsStore):
        super().__init__(component, comp)
        self.store = store
        # the target whose parameter (initializer) of `component` this overlay adapts
        component, initializer = self.parameters.get("component"), self.parameters.get("parameter")
        self.target = next(
            t
            for t in store.adapters.target_manifest.targets
            if t.component == component and t.initializer == initializer
        )

    def run(self, inputs, outputs):
        x = self.roles(inputs)["input"]
        if x.dtype != np.float32 or x.ndim != 2:
            raise self.error("input must be float32 [rows, features]")
        selection = current_run().adapters  # this request's (validated before anything ran)
        if selection is None or len(selection.rows) != x.shape[0]:
            raise self.error(
                "the request's adapter selection does not cover the input's rows", "G87"
            )
        target = self.target
        y = np.zeros((x.shape[0], target.output_features), dtype=np.float32)
        if target.input_features == target.output_features:
            y += x
        for r, row in enumerate(selection.rows):
            for index, scale in row:
                a, b, scaling = self.store.get(index)[target.id]
                y[r] += np.float32(scale * scaling) * (b @ (a @ x[r]))
        return {port: y for port in outputs}


# ------------------------------------------------------------------ preprocessing programs


class Preprocess(_AdapterSession):
    """Runs the package's declared program on the bytes of input port ``encoded``; the
    invocation's outputs are the program's output bindings (see ``preprocess.py``)."""

    def __init__(self, component, comp, kind: str, program, port_values: dict[str, str]):
        super().__init__(component, comp)
        self.kind = kind
        self.program = program
        self.port_values = port_values  # output port -> workflow value (its one invocation)

    def run(self, inputs, outputs):
        encoded = inputs.get("encoded")
        if encoded is None or encoded.dtype != np.uint8 or encoded.ndim != 1:
            raise self.error("input port 'encoded' must be uint8 of rank 1")
        try:
            published = run_program(self.kind, self.program, encoded.tobytes())
        except ProgramError as exc:
            raise self.error(f"the {self.kind} program failed: {exc}") from exc
        by_port = {}
        for port in outputs:
            value_name = self.port_values.get(port, port)
            if value_name not in published:
                raise self.error(
                    f"output port {port!r} is bound to {value_name!r}, which the "
                    f"{self.kind} program does not produce"
                )
            by_port[port] = published[value_name]
        return by_port


class TextAssembly(_AdapterSession):
    def run(self, inputs, outputs):
        raise self.error(
            "text assembly runs at the API boundary and cannot be invoked inside a workflow",
            code="C86",
        )


def build_adapter_session(package, name: str, comp, counters: Counters):
    abi = comp.implementation.abi
    if abi == "onnx-genai.grammar-guidance":
        return GrammarGuidance(name, comp)
    if abi == "onnx-genai.telemetry":
        return Telemetry(name, comp)
    if abi == "onnx-genai.parameter-overlay":
        return ParameterOverlay(name, comp, AdapterWeightsStore(package, counters))
    if abi in ("onnx-genai.image-preprocess", "onnx-genai.audio-preprocess"):
        kind = "image" if abi.endswith("image-preprocess") else "audio"
        program = getattr(package.metadata.preprocessing, kind)
        invoke = next(iter(invocations(package.metadata.workflow.steps, name)), None)
        return Preprocess(name, comp, kind, program, dict(invoke.outputs) if invoke else {})
    if abi == TEXT_ASSEMBLY:
        return TextAssembly(name, comp)
    raise ReferenceRuntimeError(f"no executor for adapter ABI {abi!r}", code="C18")
