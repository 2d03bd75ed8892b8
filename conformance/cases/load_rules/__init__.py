"""Load-time refusals: for every rule code, mutations of valid packages that must be refused
with exactly that code, at the mutated spot. One module per rule family."""

from __future__ import annotations

from . import (
    family_a,
    family_b,
    family_c,
    family_d,
    family_e,
    family_f,
    family_g,
    family_h,
)

MUTATIONS = (
    *family_a.MUTATIONS,
    *family_b.MUTATIONS,
    *family_c.MUTATIONS,
    *family_d.MUTATIONS,
    *family_e.MUTATIONS,
    *family_f.MUTATIONS,
    *family_g.MUTATIONS,
    *family_h.MUTATIONS,
)

# Valid packages: each is an acceptance case, and the mutations edit copies of them.
BASES = (
    "kv_decoder", "static_cache", "speculative", "lora", "media", "model_io_decoder",
    "lowered_decoder", "branching", "broadcast_and_presence", "events_and_appends",
    "nested_loops", "scatter_cache", "session_counter", "counting_loop", "arithmetic_decoder",
    "arithmetic_decoder_sampled",
)  # fmt: skip
