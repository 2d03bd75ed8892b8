"""Attached drafts: a runtime declaring ``attached_draft`` takes a bare draft decoder as a
``load`` option (``{"draft": folder}``) for a bare target decoder (an onnxruntime-genai folder
or a ``model.io`` package) and decodes greedily with the draft proposing and the target
verifying (docs/lowering.md, "A draft"). Speculative decoding never changes greedy tokens, so
the formula of every run is **the target's own golden**.

Each case loads the target with a copy of the draft attached (the draft lives in a folder of its
own beside the target's copy). Suites:

- ``drafted/<target>+<draft>[/<edit>]/<run case>``: a run case of the target that decodes
  greedily without a session, loaded with the draft (each copied with the pair's edits): its
  tokens, finish reasons and refusals equal the target's golden (its outputs are the
  speculative workflow's, not the decode loop's: a row that generated nothing may publish an
  empty row, and its raw finish code may differ, where the finish reason does not);
- ``fail_closed/drafted/<note>``: a pair the draft cannot propose for is refused at load
  (H91): vocabularies of different sizes, a draft with a shorter context, a model.io draft that
  leaves its graph's attention mask undeclared, a genai draft whose graph takes no mask, a
  genai draft with no KV cache, a target that samples by default, a target whose graph lies
  under ``draft/`` (the folder name the document gives the draft); and a draft attached to a
  workflow package, which declares its own proposer, or a workflow package given as the
  draft, is refused with any code (a misuse of the load call, not a rule broken).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fixtures.generators import RUN_CASES
from fixtures.generators.cases import RunCase

from .load_rules.admission import HEAD_MAJOR, kv_decoder_graph
from .mutations import Delete, EditJson, MoveFile, Set, WriteFile, edit_copy

FEATURE = "attached_draft"
OPTION = "draft"
# the folder, beside the target's copy, that holds the draft's copy
ATTACHED = "attached"


@dataclass(frozen=True)
class Pair:
    """``target`` with ``draft`` attached, each copied with its edits (``mutations`` ops)."""

    target: str
    draft: str
    target_ops: tuple = ()
    draft_ops: tuple = ()

    def materialise(self, dest: Path) -> Path:
        """Copy both under ``dest``; returns the target's folder (the draft's is
        :func:`draft_folder` of it)."""
        edit_copy(self.draft, self.draft_ops, dest / ATTACHED)
        return edit_copy(self.target, self.target_ops, dest)

    def describe(self) -> str:
        edits = [
            f"{who}: " + "; ".join(op.describe() for op in ops)
            for who, ops in ((self.target, self.target_ops), (self.draft, self.draft_ops))
            if ops
        ]
        return f"{self.target} with {self.draft} attached" + (
            f" ({'; '.join(edits)})" if edits else ""
        )

    def draft_folder(self, target_root: Path) -> Path:
        return target_root.parent / ATTACHED / self.draft


@dataclass(frozen=True)
class Refusal:
    note: str
    pair: Pair
    code: str | None = "H91"  # None: a misuse of the load call, refused with any code


# (name, pair, runs): each pair replays the target's greedy run cases (``runs``: those named
# only). The running-sum pair (a formula); two small transformers; a two-layer decoder drafting
# for itself (every proposal accepted; a cache group per role and layer); the running-sum pair
# with no context declared by either (model.max_sequence_length), or with no end id, where only
# the token bound ends a row, so the target's golden (no row reaches the context or draws the
# end id) still holds; and the transformers with no search.max_length, on the run cases whose
# token bound ends them first.
_NO_MAX_LENGTH = EditJson("genai_config.json", (Delete(("search", "max_length")),))
PAIRS = (
    ("speculative_target+speculative_draft", Pair("speculative_target", "speculative_draft"), None),
    ("genai_decoder+genai_draft", Pair("genai_decoder", "genai_draft"), None),
    ("genai_decoder_multi_eos+genai_decoder_multi_eos",
     Pair("genai_decoder_multi_eos", "genai_decoder_multi_eos"), None),
    ("speculative_target+speculative_draft/no_context",
     Pair("speculative_target", "speculative_draft",
          target_ops=(Delete(("model", "max_sequence_length")),),
          draft_ops=(Delete(("model", "max_sequence_length")),)), None),
    ("speculative_target+speculative_draft/no_end_id",
     Pair("speculative_target", "speculative_draft",
          target_ops=(Delete(("package", "tokenizer", "special_tokens", "eos")),),
          draft_ops=(Delete(("package", "tokenizer", "special_tokens", "eos")),)), None),
    ("genai_decoder+genai_draft/no_max_length",
     Pair("genai_decoder", "genai_draft", target_ops=(_NO_MAX_LENGTH,), draft_ops=(_NO_MAX_LENGTH,)),
     ("greedy_ragged_batch", "greedy_equal_rows", "zero_new_tokens")),
)  # fmt: skip


def greedy_cases(target: str, runs: tuple[str, ...] | None = None) -> list[RunCase]:
    """The target's run cases that decode greedily and open no session (a sampled request is
    judged by the ``sampling`` suite; speculative decoding here verifies greedily); ``runs``:
    only those of these names."""
    return [
        run
        for run in RUN_CASES
        if run.package == target
        and (runs is None or run.id.removeprefix(f"{target}/") in runs)
        and all(r.get("greedy") is not False and r.get("session_id") is None for r in run.requests)
    ]


REFUSALS = (
    Refusal(
        "vocabularies_of_different_sizes",
        Pair("genai_decoder", "genai_decoder_gqa"),
    ),
    Refusal(
        "draft_context_shorter_than_the_target",
        Pair("speculative_target", "speculative_draft",
             draft_ops=(Set(("model", "max_sequence_length"), 32),)),
    ),
    Refusal(
        "draft_whose_attention_mask_input_is_undeclared",
        Pair("speculative_target", "speculative_draft",
             draft_ops=(Delete(("model", "io", "attention_mask_input")),)),
    ),
    # ... and a genai draft whose graph takes none (onnxruntime-genai feeds a mask only to a
    # graph that has the input): the pair itself is refused
    Refusal(
        "draft_graph_without_an_attention_mask_input",
        Pair("genai_decoder", "genai_decoder",
             draft_ops=(WriteFile("model.onnx", kv_decoder_graph(
                 {"key": HEAD_MAJOR, "value": HEAD_MAJOR}, mask=False)),)),
    ),
    # ... and a draft with no KV cache at all (no layer; its graph takes no past)
    Refusal(
        "draft_without_a_kv_cache",
        Pair("genai_decoder", "genai_decoder",
             draft_ops=(WriteFile("model.onnx", kv_decoder_graph({})),
                        EditJson("genai_config.json",
                                 (Set(("model", "decoder", "num_hidden_layers"), 0),)))),
    ),
    Refusal(
        "target_graph_under_draft",
        Pair("genai_decoder", "genai_draft",
             target_ops=(MoveFile("model.onnx", "draft/model.onnx"),
                         EditJson("genai_config.json",
                                  (Set(("model", "decoder", "filename"), "draft/model.onnx"),)))),
    ),
    # a workflow package declares its own proposer: a draft attached to one is a misuse of
    # the load call (no rule of the package is broken), refused whatever the code
    Refusal("draft_attached_to_a_workflow_package", Pair("lowered_decoder", "genai_draft"), None),
    # ... and so is a workflow package given as the draft (it is no bare decoder to propose)
    Refusal("workflow_package_as_the_draft", Pair("genai_decoder", "lowered_decoder"), None),
    Refusal(
        "target_sampling_by_default",
        Pair("genai_decoder", "genai_draft",
             target_ops=(EditJson("genai_config.json", (Set(("search", "do_sample"), True),)),)),
    ),
)  # fmt: skip
