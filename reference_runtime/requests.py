"""Checking and preparing a request before it is bound to the workflow's inputs.

Every request keyword and the prompt are checked here, in one place, for the API
(``Engine.run``, ``Engine.check_request``) and the command line alike: a mistake is refused
with ``H75`` before any component runs, named in the caller's terms (the keyword in the API,
the flag on the command line: ``Spelling``). Then text becomes token rows through the
package's tokenizer, a session turn's prompt becomes the whole conversation, and ragged rows
are padded when the workflow takes their lengths.

What a request may say (docs/runtime.md, "What a request may say"):

- ``max_new_tokens``: an integer at most 2**31 - 1 (0: nothing is generated, and each row's
  finish reason is ``length``; a negative one is refused by the binder: ``G88`` where the
  package's overrides bound it, else ``D44``, the loop bound it feeds); ``seed``: an integer in int64's range;
  ``top_k``: an integer >= 0 (0: no top-k filter). Booleans are not integers here, and
  nothing is cast: ``1.5`` or ``"5"`` is refused.
- ``temperature`` >= 0, ``0 < top_p <= 1``, ``0 <= min_p <= 1``: finite real numbers, whatever
  the package constrains on top of that (``generation.overrides``, ``G88``).
- ``greedy`` and ``stop_on_eos``: booleans (``greedy`` may be None).
- the prompt: text (a string, or a list of strings for several rows), or token rows (one row
  of integers, a list of rows, or a 1-D / 2-D integer numpy array). Every token is an integer
  (no bool, no float), and within the vocabulary: ``[0, vocab)`` where the package declares
  its size (``package.tokenizer.vocab_size``) or its graph embeds tokens through a table
  (a ``Gather`` of an initializer by the token input), else within int64's range.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from .errors import RunError
from .package.artifacts import load_model
from .package.model import BindingImplementation, InvokeStep, OnnxImplementation, RuntimeRole
from .package.visit import all_steps
from .sessions import SessionStore
from .tokenizer import TextCodec, is_text, no_tokenizer_error, tokenizer_file

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_NEW_TOKENS_MAX = 2**31 - 1


# what a flag's value is called in hints
FLAG_VALUES = dict(max_new_tokens="N", seed="S", temperature="T", top_k="K", top_p="P", min_p="P")


@dataclass(frozen=True)
class Spelling:
    """How the caller names each part of a request in messages."""

    prompt: str = "prompt"
    max_new_tokens: str = "max_new_tokens"
    seed: str = "seed"
    greedy: str = "greedy"
    temperature: str = "temperature"
    top_k: str = "top_k"
    top_p: str = "top_p"
    min_p: str = "min_p"
    stop_on_eos: str = "stop_on_eos"
    inputs: str = "inputs"

    def show(self, keyword: str, value) -> str:
        """``keyword=value`` in the API's terms, ``--flag value`` in the command line's."""
        name = getattr(self, keyword)
        return f"{name} {value!r}" if name.startswith("--") else f"{name}={value!r}"

    def pass_keyword(self, keyword: str) -> str:
        """How to pass a request keyword: ``max_new_tokens=...`` in the API,
        ``--max-new-tokens N`` on the command line."""
        name = getattr(self, keyword)
        if not name.startswith("--"):
            return f"{name}=..."
        if keyword == "prompt":
            return "--tokens [[...]]"
        return f"{name} {FLAG_VALUES.get(keyword, 'VALUE')}"

    def pass_inputs(self, inputs: list[tuple[str, object]]) -> str:
        """How to pass the named inputs (``(name, contract)`` pairs): ``inputs={'a': ...}`` in
        the API, ``--input a=[[...]] (int64 [batch, 1])`` per input on the command line."""
        if not self.inputs.startswith("--"):
            return f"{self.inputs}={{{', '.join(f'{name!r}: ...' for name, _ in inputs)}}}"
        return ", ".join(f"{self.inputs} {cli_value_hint(name, c)}" for name, c in inputs)


API = Spelling()


def cli_value_hint(name: str, contract) -> str:
    """``NAME=[[...]] (int64 [batch, 1])``: a JSON value of the contract's rank, its dtype and
    shape."""
    rank = contract.rank
    value = "[" * rank + "..." + "]" * rank if rank else "VALUE"
    if contract.shape is not None:
        shape = f"[{', '.join(str(d) for d in contract.shape)}]"
    else:
        shape = "scalar" if rank == 0 else f"rank {rank}"
    return f"{name}={value} ({contract.dtype} {shape})"


def _refuse(message: str, hint: str) -> RunError:
    return RunError("H75", message, hint=hint)


def is_integer(value) -> bool:
    """A Python or numpy integer, never a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def _integer(keyword: str, value, low: int | None, high: int, spelling: Spelling) -> int:
    """An integer at most ``high`` and, unless ``low`` is None, at least ``low``."""
    shown = spelling.show(keyword, value)
    span = f"[{low}, {high}]" if low is not None else f"at most {high}"
    if not is_integer(value):
        raise _refuse(
            f"{shown}: {getattr(spelling, keyword)} must be an integer, not {type(value).__name__}",
            f"Pass a whole number ({span}).",
        )
    value = int(value)
    if value > high or (low is not None and value < low):
        what = f"is outside {span}" if low is not None else f"is above the largest allowed, {high}"
        raise _refuse(f"{shown} {what}", f"Pass a whole number ({span}).")
    return value


def _real(keyword: str, value, spelling: Spelling, rule: str, ok) -> float:
    shown = spelling.show(keyword, value)
    real = isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)
    if not real:
        raise _refuse(
            f"{shown}: {getattr(spelling, keyword)} must be a number, not {type(value).__name__}",
            f"Pass a finite number with {rule}.",
        )
    value = float(value)
    if not math.isfinite(value) or not ok(value):
        raise _refuse(f"{shown} is not a finite number with {rule}", f"Pass {rule}.")
    return value


def check_keywords(keywords: dict, spelling: Spelling = API) -> dict:
    """The request keywords, checked (None means unset); integers become ``int``, reals
    ``float``."""
    out = dict(keywords)
    for flag in ("greedy", "stop_on_eos"):
        value = keywords.get(flag)
        unset = value is None and (flag == "greedy" or flag not in keywords)
        if not unset and not isinstance(value, bool | np.bool_):
            raise _refuse(
                f"{spelling.show(flag, value)}: {getattr(spelling, flag)} must be True or False",
                "Pass a boolean.",
            )
        if not unset:
            out[flag] = bool(value)
    checks = {
        # a negative bound is the package's to refuse (G88 where its overrides bound the
        # field, else D44: InputBinder.check_keywords)
        "max_new_tokens": lambda v: _integer(
            "max_new_tokens", v, None, MAX_NEW_TOKENS_MAX, spelling
        ),
        "seed": lambda v: _integer("seed", v, INT64_MIN, INT64_MAX, spelling),
        "top_k": lambda v: _integer("top_k", v, 0, INT64_MAX, spelling),
        "temperature": lambda v: _real(
            "temperature", v, spelling, f"{spelling.temperature} >= 0", lambda x: x >= 0
        ),
        "top_p": lambda v: _real(
            "top_p", v, spelling, f"0 < {spelling.top_p} <= 1", lambda x: 0 < x <= 1
        ),
        "min_p": lambda v: _real(
            "min_p", v, spelling, f"0 <= {spelling.min_p} <= 1", lambda x: 0 <= x <= 1
        ),
    }
    for keyword, check in checks.items():
        if keywords.get(keyword) is not None:
            out[keyword] = check(keywords[keyword])
    return out


# ------------------------------------------------------------------ prompts


def _prompt_shape_error(spelling: Spelling, what: str) -> RunError:
    return _refuse(
        f"{spelling.prompt}: {what}",
        "Pass token rows (e.g. [[1, 2, 3]], a list of rows of integers, or a 1-D/2-D integer "
        "array) or text.",
    )


def check_token_rows(prompt, spelling: Spelling, vocab: tuple[int, str] | None):
    """Token rows as given (a list of rows of ``int``, or an int64 array), each token an
    integer within the vocabulary; anything else is refused."""
    low, high = INT64_MIN, INT64_MAX
    where = "int64 (the package declares no vocabulary)"
    if vocab is not None:  # a negative id would index an embedding table from its end
        low, high = 0, vocab[0] - 1
        where = f"the vocabulary ({vocab[1]} = {vocab[0]})"

    def out_of_range(value: int, r: int, i: int) -> RunError:
        return _refuse(
            f"{spelling.prompt}: token {value} (row {r}, position {i}) is outside "
            f"[{low}, {high}], the token ids of {where}",
            "Pass token ids the package's tokenizer produces.",
        )

    if isinstance(prompt, np.ndarray):
        if prompt.dtype.kind not in "iu":
            raise _prompt_shape_error(
                spelling, f"a {prompt.dtype} array; token ids are integers (int64)"
            )
        if prompt.ndim not in (1, 2) or prompt.size == 0:
            raise _prompt_shape_error(spelling, f"an array of shape {list(prompt.shape)}")
        rows2 = prompt.reshape(1, -1) if prompt.ndim == 1 else prompt
        if prompt.dtype.kind == "u" and int(rows2.max()) > INT64_MAX:
            bad = np.argwhere(rows2 > INT64_MAX)[0]
            raise out_of_range(int(rows2[tuple(bad)]), int(bad[0]), int(bad[1]))
        bad = np.argwhere((rows2 < low) | (rows2 > high))
        if bad.size:
            r, i = (int(x) for x in bad[0])
            raise out_of_range(int(rows2[r, i]), r, i)
        return prompt.astype(np.int64)
    if not isinstance(prompt, list | tuple):
        raise _prompt_shape_error(
            spelling, f"the prompt is token rows or text, not {type(prompt).__name__}"
        )
    rows = list(prompt)
    if not rows:
        raise _prompt_shape_error(spelling, "the prompt is empty")
    if not any(isinstance(row, list | tuple | np.ndarray) for row in rows):
        rows = [rows]  # one row
    checked = []
    for r, row in enumerate(rows):
        if isinstance(row, np.ndarray):
            row = row.tolist() if row.dtype.kind in "iu" and row.ndim == 1 else row
        if not isinstance(row, list | tuple):
            raise _prompt_shape_error(
                spelling, f"row {r} is a {type(row).__name__}, not a list of token ids"
            )
        for i, token in enumerate(row):
            if not is_integer(token):
                raise _refuse(
                    f"{spelling.prompt}: token {token!r} (row {r}, position {i}) is a "
                    f"{type(token).__name__}; token ids are integers",
                    "Pass whole numbers (no floats, booleans or strings); text goes in as a "
                    "string.",
                )
            if not low <= int(token) <= high:
                raise out_of_range(int(token), r, i)
        checked.append([int(token) for token in row])
    if any(not row for row in checked):
        raise _prompt_shape_error(spelling, "a prompt row is empty")
    return checked


def declared_vocabulary(package) -> tuple[int, str] | None:
    """``(size, where it comes from)``: the package's ``package.tokenizer.vocab_size``, else the
    smallest embedding table a graph reads the prompt through (a ``Gather`` of an initializer
    by the graph input the prompt feeds), else None."""
    md = package.metadata
    tokenizer = getattr(md.package, "tokenizer", None) if md.package else None
    if tokenizer is not None and tokenizer.vocab_size:
        return tokenizer.vocab_size, "package.tokenizer.vocab_size"
    wf = md.workflow
    prompts = {
        name
        for name, inp in wf.inputs.items()
        if isinstance(inp.role, RuntimeRole) and inp.role.role == "prompt_tokens"
    }
    found: list[tuple[int, str]] = []
    for step in all_steps(wf.steps):
        if not isinstance(step, InvokeStep):
            continue
        ports = [port for port, value in step.inputs.items() if value in prompts]
        comp = wf.components.get(step.component)
        if not ports or comp is None:
            continue
        impl = comp.implementation
        if isinstance(impl, OnnxImplementation):
            artifact, graph_ports = impl.artifact, ports
        elif isinstance(impl, BindingImplementation) and comp.contract is not None:
            parameters = dict(comp.contract.parameters)
            if "artifact" in parameters and "token_input" in parameters:  # a decode contract
                artifact, token_input = parameters["artifact"], parameters["token_input"]
            elif "target_tokens_input" in parameters and md.speculative is not None:
                # a speculative block: the prompt feeds the target's graph
                target = wf.components.get(md.speculative.target)
                if target is None or not isinstance(target.implementation, OnnxImplementation):
                    continue
                artifact = target.implementation.artifact
                token_input = parameters["target_tokens_input"]
            else:
                continue
            graph_ports = [token_input] if "tokens" in ports else []
        else:
            continue
        size = _embedding_rows(package.resolve(str(artifact)), graph_ports)
        if size is not None:
            found.append((size, f"the embedding of {step.component!r}"))
    return min(found) if found else None


def _embedding_rows(path, inputs: list[str]) -> int | None:
    try:
        graph = load_model(path, external_data=False).graph
    except Exception:  # noqa: BLE001 - an unreadable graph has no table to read here
        return None
    tables = {init.name: list(init.dims) for init in graph.initializer}
    rows = [
        tables[node.input[0]][0]
        for node in graph.node
        if node.op_type == "Gather"
        and node.domain in ("", "ai.onnx")
        and len(node.input) == 2
        and node.input[1] in inputs
        and node.input[0] in tables
        and tables[node.input[0]]
        and not any(a.name == "axis" and a.i != 0 for a in node.attribute)
    ]
    return min(rows) if rows else None


class PromptPreparer:
    def __init__(self, package, sessions: SessionStore):
        self.sessions = sessions
        path = tokenizer_file(package)
        self.codec = TextCodec(path) if path is not None else None
        self.vocabulary = declared_vocabulary(package)
        # the application input taking the rows' lengths, where the workflow declares one
        self.lengths_input = next(
            (
                inp.source.name
                for inp in package.metadata.workflow.inputs.values()
                if inp.source.kind == "application" and inp.source.name == "prompt_lengths"
            ),
            None,
        )

    def check(self, prompt, spelling: Spelling = API):
        """The prompt checked: text as given, token rows as lists of ints (or an int64
        array); None when there is none."""
        if prompt is None or is_text(prompt):
            return prompt
        if isinstance(prompt, list | tuple) and any(isinstance(p, str) for p in prompt):
            raise _prompt_shape_error(spelling, "text rows and token ids are mixed")
        return check_token_rows(prompt, spelling, self.vocabulary)

    def prepare(self, prompt, inputs: dict, session_id: str | None):
        """``(prompt as token rows, inputs, the conversation or None)``; ``inputs`` may gain
        the rows' lengths. ``prompt`` has been through ``check``."""
        if is_text(prompt):
            if self.codec is None:
                raise no_tokenizer_error()
            prompt = check_token_rows(self.codec.encode(prompt), API, self.vocabulary)
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
        rows = list(prompt)  # rows of ints: check_token_rows's, or a conversation's one row
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
