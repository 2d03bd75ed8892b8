"""The runtime executor of ``onnx-genai.continuous-batch@1`` (docs/runtime.md, "Serving
requests in a continuous batch").

The component is invoked once per body of the loop it batches, after the step that decides
which rows continue. Its ports:

- ``active`` bool ``[batch]``: the rows that ran this body (the loop's predicate);
- ``next_active`` bool ``[batch]``: the rows that will run the next body;
- ``accepted`` int64 ``[batch]`` (or ``[1]``, for every row): the tokens each row accepted in
  this body;

and it returns ``live`` bool ``[1]``, the batch's one liveness bit (will it decode again: a row
continues, or a request is waiting for a slot), and ``accepted_len`` int64 ``[batch]``, each
row's progress in this body (``accepted`` for a row that ran it, 0 for a row that sat it out).
The waiting requests are the serving loop's (``workflow/batching.py``), which it tells through
the running request's context; a plain run has none. Parameter: ``max_slots``, the most
requests one batch holds at a time.
"""

from __future__ import annotations

import numpy as np

from ..package.runtime_contracts import BATCH_CONTRACT, BATCH_WAITING
from .base import Session, current_run


class ContinuousBatch(Session):
    """The liveness bit and per-row progress of a batch of slots."""

    executor = "contract"  # runs in this runtime, not in a graph executor
    contract = BATCH_CONTRACT
    host_only = True

    def __init__(self, component: str, parameters: dict):
        self.component = component
        self.max_slots = int(dict(parameters)["max_slots"])

    def run(self, inputs, outputs):
        active = np.asarray(inputs["active"], dtype=bool).reshape(-1)
        following = np.asarray(inputs["next_active"], dtype=bool).reshape(-1)
        accepted = np.asarray(inputs["accepted"], dtype=np.int64).reshape(-1)
        waiting = int(current_run().state.get(BATCH_WAITING, 0))
        out = {
            "live": np.array([waiting > 0 or bool(following.any())]),
            "accepted_len": np.where(active, accepted, 0),  # accepted [1]: the same for every row
        }
        return {port: out[port] for port in outputs}
