"""Counters that prove which path ran. Tests read them; nothing is asserted without them.

``Counters.snapshot()`` is what ``engine.counters`` returns:

- ``invocations``: component -> executor -> count (every invoke, at dispatch);
- ``sessions_created``: executor -> count (ONNX Runtime / native sessions, once per component);
- ``contract_executions``: contract id -> count (runtime-supplied contract executors);
- ``adapter_cache``: loads / hits / evictions of the LoRA adapter cache;
- ``prefix_reuse``: session turns whose prefill continued kept KV (``hits``) and the prompt
  tokens that were therefore not run again (``tokens``);
- ``materialisations``: host_to_device / device_to_host copies;
- ``runs``: requests completed; ``loop_iterations``: bodies executed.
"""

from __future__ import annotations

from collections import Counter, defaultdict


class Counters:
    def __init__(self):
        self.invocations: dict[str, Counter] = defaultdict(Counter)
        self.sessions_created: Counter = Counter()
        self.contract_executions: Counter = Counter()
        self.adapter_cache: Counter = Counter()
        self.prefix_reuse: Counter = Counter()
        self.materialisations: Counter = Counter()
        self.runs = 0
        self.loop_iterations = 0

    def invoked(self, component: str, executor: str) -> None:
        self.invocations[component][executor] += 1

    def snapshot(self) -> dict:
        return {
            "invocations": {k: dict(v) for k, v in sorted(self.invocations.items())},
            "sessions_created": dict(self.sessions_created),
            "contract_executions": dict(self.contract_executions),
            "adapter_cache": {
                key: self.adapter_cache.get(key, 0) for key in ("loads", "hits", "evictions")
            },
            "prefix_reuse": {key: self.prefix_reuse.get(key, 0) for key in ("hits", "tokens")},
            "materialisations": {
                key: self.materialisations.get(key, 0)
                for key in ("host_to_device", "device_to_host")
            },
            "runs": self.runs,
            "loop_iterations": self.loop_iterations,
        }
