"""Load-time refusals: for every rule code, mutations of valid packages that must be refused
with exactly that code, at the mutated spot; and valid edits of them (``VARIANTS``) that must
still load.

One module per rule family, named after the runtime module that holds the family's rules
(``reference_runtime/package/rules/<name>.py``; family A's are the parser's and structure
checks):

| family | module | rules |
|---|---|---|
| A | ``parsing`` | unknown, removed and missing keys, vocabularies, types, syntax |
| B | ``inputs`` | inputs and outputs |
| C | ``components`` | components, contracts, adapter ABIs |
| D | ``steps`` | steps and SSA |
| E | ``state`` | state cells, sessions, serving |
| F | ``speculative`` | speculative decoding |
| G | ``adapters`` | adapters, preprocessing, generation, profiles |
| H | ``admission`` | admission and the files a package names |
"""

from __future__ import annotations

from . import (
    adapters,
    admission,
    components,
    inputs,
    parsing,
    speculative,
    state,
    steps,
)

MUTATIONS = (
    *parsing.MUTATIONS,  # A
    *inputs.MUTATIONS,  # B
    *components.MUTATIONS,  # C
    *steps.MUTATIONS,  # D
    *state.MUTATIONS,  # E
    *speculative.MUTATIONS,  # F
    *adapters.MUTATIONS,  # G
    *admission.MUTATIONS,  # H
)
# Valid edits of the bases (each an acceptance case): a module may list them as ``VARIANTS``.
VARIANTS = tuple(
    variant
    for module in (parsing, inputs, components, steps, state, speculative, adapters, admission)
    for variant in getattr(module, "VARIANTS", ())
)
# Valid packages: each is an acceptance case, and the mutations edit copies of them.
BASES = (
    "kv_decoder", "static_cache", "speculative", "lora", "media", "audio_program",
    "model_io_decoder", "lowered_decoder", "branching", "broadcast_and_presence", "events_and_appends",
    "nested_loops", "scatter_cache", "session_counter", "counting_loop", "arithmetic_decoder",
    "arithmetic_decoder_sampled", "genai_decoder", "genai_decoder_gqa", "genai_decoder_multi_eos",
    "speculative_block", "speculative_chained", "speculative_folded", "speculative_lowered",
    "session_branch",
)  # fmt: skip
