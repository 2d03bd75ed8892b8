"""Counters that prove which path ran. Tests read them; nothing is asserted without them.

``Counters.snapshot()`` is what ``engine.counters`` returns:

- ``invocations``: component -> executor -> count (every invoke, at dispatch);
- ``sessions_created``: executor -> count (ONNX Runtime / native sessions, once per component);
- ``contract_executions``: contract id -> count (runtime-supplied contract executors);
- ``adapter_cache``: loads / hits / evictions of the LoRA adapter cache;
- ``prefix_reuse``: session turns whose prefill continued kept KV (``hits``) and the prompt
  tokens that were therefore not run again (``tokens``);
- ``materialisations``: host_to_device / device_to_host copies;
- ``admission``: requests the KV budget admitted / refused (only with ``kv_budget_bytes``);
- ``speculative``: what ``onnx-genai.speculative-block`` did: ``steps`` (verifications),
  ``proposer_calls``, ``proposed`` and ``accepted`` tokens, ``rollbacks`` (rows whose target
  cache lost rejected positions) and ``committed`` tokens;
- ``batching``: of ``Engine.serve``: requests ``admitted`` into a slot, admissions into a slot
  an earlier request had freed (``slots_reused``), batch ``steps``, loop ``bodies`` run (one per
  group of requests that can share one in a step) and the ``rows`` those bodies ran;
- ``runs``: requests completed; ``loop_iterations``: bodies executed.

Every count goes through a method that holds one lock, so counts stay exact when runs share an
engine from several threads; a snapshot taken while runs are in flight counts what they have
done so far.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict

# the groups counted by key through ``Counters.add``
GROUPS = (
    "sessions_created",
    "contract_executions",
    "adapter_cache",
    "prefix_reuse",
    "materialisations",
    "admission",
    "speculative",
    "batching",
)
SPECULATIVE_KEYS = ("steps", "proposer_calls", "proposed", "accepted", "rollbacks", "committed")
BATCHING = ("admitted", "slots_reused", "steps", "bodies", "rows")


class Counters:
    def __init__(self):
        self._lock = threading.Lock()
        self._invocations: dict[str, Counter] = defaultdict(Counter)
        self._groups: dict[str, Counter] = {group: Counter() for group in GROUPS}
        self._runs = 0
        self._loop_iterations = 0

    def invoked(self, component: str, executor: str) -> None:
        with self._lock:
            self._invocations[component][executor] += 1

    def add(self, group: str, key: str, n: int = 1) -> None:
        """Count ``n`` under ``key`` of ``group`` (one of ``GROUPS``)."""
        with self._lock:
            self._groups[group][key] += n

    def run_completed(self) -> None:
        with self._lock:
            self._runs += 1

    def iteration(self) -> None:
        with self._lock:
            self._loop_iterations += 1

    def snapshot(self) -> dict:
        with self._lock:
            groups = {group: dict(counts) for group, counts in self._groups.items()}
            return {
                "invocations": {k: dict(v) for k, v in sorted(self._invocations.items())},
                "sessions_created": groups["sessions_created"],
                "contract_executions": groups["contract_executions"],
                "adapter_cache": {
                    key: groups["adapter_cache"].get(key, 0)
                    for key in ("loads", "hits", "evictions")
                },
                "prefix_reuse": {
                    key: groups["prefix_reuse"].get(key, 0) for key in ("hits", "tokens")
                },
                "materialisations": {
                    key: groups["materialisations"].get(key, 0)
                    for key in ("host_to_device", "device_to_host")
                },
                "admission": {
                    key: groups["admission"].get(key, 0) for key in ("admitted", "refused")
                },
                "speculative": {key: groups["speculative"].get(key, 0) for key in SPECULATIVE_KEYS},
                "batching": {key: groups["batching"].get(key, 0) for key in BATCHING},
                "runs": self._runs,
                "loop_iterations": self._loop_iterations,
            }
