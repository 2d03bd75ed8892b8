"""Preparing a request's prompt before it is bound to the workflow's inputs: text becomes token
rows through the package's tokenizer, a session turn's prompt becomes the whole conversation,
and ragged rows are padded when the workflow takes their lengths."""

from __future__ import annotations

import numpy as np

from .sessions import SessionStore
from .tokenizer import TextCodec, is_text, no_tokenizer_error, tokenizer_file


class PromptPreparer:
    def __init__(self, package, sessions: SessionStore):
        self.sessions = sessions
        path = tokenizer_file(package)
        self.codec = TextCodec(path) if path is not None else None
        # the application input taking the rows' lengths, where the workflow declares one
        self.lengths_input = next(
            (
                inp.source.name
                for inp in package.metadata.workflow.inputs.values()
                if inp.source.kind == "application" and inp.source.name == "prompt_lengths"
            ),
            None,
        )

    def prepare(self, prompt, inputs: dict, session_id: str | None):
        """``(prompt as token rows, inputs, the conversation or None)``; ``inputs`` may gain
        the rows' lengths."""
        if is_text(prompt):
            if self.codec is None:
                raise no_tokenizer_error()
            prompt = self.codec.encode(prompt)
        conversation = None
        if self.sessions.continuation is not None and session_id is not None:
            conversation = self.sessions.conversation(session_id, prompt)
            prompt = [conversation]
        return self.pad_ragged(prompt, inputs), inputs, conversation

    def pad_ragged(self, prompt, inputs: dict):
        """Rows of different lengths are right-padded (with 0) when the workflow takes their
        lengths through an application input named ``prompt_lengths``; otherwise they are left
        for the binder to refuse."""
        if prompt is None or isinstance(prompt, np.ndarray) or not prompt:
            return prompt
        rows = list(prompt)
        if not all(isinstance(r, list | tuple | np.ndarray) for r in rows):
            return prompt
        widths = [len(r) for r in rows]
        if len(set(widths)) == 1:
            return prompt
        name = self.lengths_input
        if name is None or name in inputs:
            return prompt
        width = max(widths)
        inputs[name] = np.asarray(widths, dtype=np.int64)
        return [list(r) + [0] * (width - len(r)) for r in rows]

    def decode(self, tokens) -> list[str] | None:
        return self.codec.decode(tokens) if self.codec is not None and tokens is not None else None
