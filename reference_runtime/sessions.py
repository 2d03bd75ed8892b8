"""Conversation sessions: the values each session keeps between runs.

A session stores the final values of the workflow's session-scoped cells after every fully
successful run (never a partial state), and, for a workflow whose session cell declares
``session.continuation`` (``kind: prompt_prefix``), the conversation so far: a turn's prompt is
the stored conversation followed by the turn's new tokens. All access is locked: one store may
serve runs from several threads. A session runs one turn at a time (``turn``): a second run,
reset or close of a session while a run of it is in flight is refused (``E58``), never
interleaved.
"""

from __future__ import annotations

import contextlib
import threading
import uuid

import numpy as np

from .errors import RunError


class SessionStore:
    def __init__(self, workflow):
        state = workflow.state
        # the cell carrying a session's conversation, kept by the store itself
        self.continuation = next(
            (
                name
                for name, cell in state.items()
                if cell.session is not None and cell.session.continuation is not None
            ),
            None,
        )
        # the cells a run stores: every other session-scoped cell
        self.cells = {
            name: cell
            for name, cell in state.items()
            if cell.scope == "session" and name != self.continuation
        }
        publishes_tokens = any(o.role == "tokens" for o in workflow.outputs.values())
        self.can_hold_sessions = not publishes_tokens or any(
            c.scope == "session" for c in state.values()
        )
        self._stored: dict[str, dict[str, np.ndarray]] = {}
        self._busy: set[str] = set()  # sessions a run is using now
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def turn(self, session_id: str | None):
        """Hold ``session_id`` for one run (or a reset or close) of it; nothing to hold
        without a session."""
        if session_id is None:
            yield
            return
        if not isinstance(session_id, str):
            raise RunError(
                "E58",
                f"session_id must be a session id string, not {type(session_id).__name__}",
                hint="Pass the id engine.create_session() returned.",
            )
        with self._lock:
            if session_id in self._busy:
                raise RunError(
                    "E58",
                    f"session {session_id!r} is in use by a run on another thread",
                    hint="A session's turns follow one another: wait for the running turn to "
                    "finish (or give each concurrent conversation its own session).",
                )
            self._busy.add(session_id)
        try:
            yield
        finally:
            with self._lock:
                self._busy.discard(session_id)

    def create(self) -> str:
        if not self.can_hold_sessions:
            raise RunError(
                "E58",
                "this package publishes tokens but declares no session-scoped state, so a "
                "session would carry nothing from one turn to the next",
                hint="Declare a `scope: session` state cell with `session.continuation` "
                "(`kind: prompt_prefix`) to continue conversations, or run without a session.",
            )
        sid = uuid.uuid4().hex
        with self._lock:
            self._stored[sid] = {}
        return sid

    def _get(self, sid: str) -> dict:
        try:
            return self._stored[sid]
        except KeyError:
            raise RunError(
                "E58",
                f"unknown session {sid!r} (closed, or never created)",
                hint="Call engine.create_session() and pass the id it returns.",
            ) from None

    def stored(self, session_id: str | None) -> dict[str, np.ndarray]:
        """The stored cell values a run starts from (a copy). A workflow with session cells
        needs a session id; any given id must be known."""
        if self.cells and session_id is None:
            raise RunError(
                "E58",
                f"session-scoped workflow state {next(iter(self.cells))!r} requires a session id",
                hint="Create one with engine.create_session() and pass session_id=...",
            )
        if session_id is None:
            return {}
        with self._lock:
            stored = self._get(session_id)
            return dict(stored) if self.cells else {}

    def save(self, session_id: str, values: dict[str, np.ndarray]) -> None:
        """Store a successful run's final cell values (atomically)."""
        with self._lock:
            self._get(session_id).update(values)

    def token_count(self, sid: str) -> int:
        """Tokens a session's conversation holds (its prompts plus what its turns generated)."""
        with self._lock:
            stored = self._get(sid)
        conversation = stored.get(self.continuation) if self.continuation else None
        return 0 if conversation is None else int(conversation.shape[-1])

    def conversation(self, sid: str, prompt) -> list[int]:
        """The whole prompt of a session turn: the stored conversation, then the new tokens."""
        with self._lock:
            stored = self._get(sid).get(self.continuation)
        rows = prompt.tolist() if isinstance(prompt, np.ndarray) else list(prompt or [])
        if rows and not isinstance(rows[0], list | tuple):
            rows = [rows]
        if len(rows) != 1:
            raise RunError(
                "H75",
                f"a session turn continues one conversation, but the prompt has {len(rows)} rows",
                hint="Pass one prompt row per turn (prompt=[[...]] or a string).",
            )
        previous = [] if stored is None else stored.reshape(-1).astype(int).tolist()
        return previous + [int(t) for t in rows[0]]

    def extend_conversation(self, sid: str, conversation: list[int], tokens) -> None:
        """After a successful turn: the conversation is its prompt plus what it generated."""
        grown = np.asarray([conversation + (tokens[0] if tokens else [])], dtype=np.int64)
        with self._lock:
            self._get(sid)[self.continuation] = grown

    def reset(self, sid: str) -> None:
        with self._lock:
            self._get(sid).clear()

    def close(self, sid: str) -> None:
        with self._lock:
            self._get(sid)
            del self._stored[sid]
