"""Binding a request to the workflow's inputs (docs/runtime.md, "How a request binds the
inputs"; the departures in docs/format.md).

Two passes, inputs visited in sorted name order: first every value the caller or the request
supplies is checked against its contract (binding shape symbols); then literals and request
scalars are materialised at the extents those symbols resolved (a `[batch]` default becomes one
value per row) and checked in turn.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes
from ..arrays import dtype_name, numpy_dtype
from ..errors import RunError
from ..package.model import (
    ApplicationSource,
    ArtifactSource,
    LiteralSource,
    Metadata,
    RequestSource,
    RuntimeRole,
    TensorContract,
)
from ..package.runtime_contracts import SPECULATIVE_CONTRACT
from .tensors import Symbols, check

SAMPLING = {
    # role -> (keyword, greedy value)
    "sampling_temperature": ("temperature", 0.0),
    "sampling_top_k": ("top_k", 1),
    "sampling_top_p": ("top_p", 1.0),
    "sampling_min_p": ("min_p", 0.0),
}
# request keyword -> the generation field that overrides govern
KEYWORD_FIELD = {
    "max_new_tokens": "max_output_tokens",
    "seed": "seed",
    "temperature": "temperature",
    "top_k": "top_k",
    "top_p": "top_p",
    "min_p": "min_p",
}
KEYWORD_ROLES = {
    "max_new_tokens": ("max_iterations", "max_output_tokens"),
    "seed": ("seed",),
    "temperature": ("sampling_temperature",),
    "top_k": ("sampling_top_k",),
    "top_p": ("sampling_top_p",),
    "min_p": ("sampling_min_p",),
}


@dataclass
class Request:
    prompt: object = None
    inputs: dict = field(default_factory=dict)
    max_new_tokens: int | None = None
    seed: int | None = None
    # None: the package's `generation.defaults.do_sample` decides (greedy when it is silent),
    # unless the request gives a sampling keyword, which asks for sampling
    greedy: bool | None = None
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    session_id: str | None = None


@dataclass
class Bound:
    values: dict[str, np.ndarray]
    symbols: Symbols
    batch: int | None


def _alias(inp) -> str | None:
    """The application source name an input may also be supplied by, or None."""
    return inp.source.name if isinstance(inp.source, ApplicationSource) else None


def _request_error(message: str, hint: str = "", code: str = "H75") -> RunError:
    return RunError(code, message, hint=hint)


def to_array(name: str, value, contract: TensorContract) -> np.ndarray:
    """A caller value as an array: Python scalars and lists take the contract's dtype (booleans
    only a bool contract, integers an integer or float one, without wrapping); arrays must
    already have it (the runtime never converts an array)."""
    want = numpy_dtype(contract.dtype)
    if isinstance(value, np.ndarray | np.generic):
        array = np.asarray(value)
        if array.dtype == object:
            raise _request_error(
                f"input {name!r} is an array of Python objects",
                "Pass an array of the contract's dtype (or plain Python numbers).",
            )
        if array.dtype != want:
            raise _request_error(
                f"input {name!r} is {dtype_name(array)}, the contract says "
                f"{dtypes.canonical(contract.dtype)}",
                "Pass an array of the contract's dtype (or plain Python numbers).",
            )
        return array
    try:
        array = np.asarray(value)
    except (ValueError, TypeError, OverflowError) as exc:
        raise _request_error(f"input {name!r} is not a rectangular array: {exc}") from None
    if array.dtype == object or array.dtype.kind not in "biuf":
        raise _request_error(
            f"input {name!r} must hold numbers or booleans (integers within 64 bits)"
        )
    kind = want.kind
    if (
        kind == "b"
        and array.dtype.kind != "b"
        or kind in "iu"
        and array.dtype.kind not in "iu"
        or kind != "b"
        and array.dtype.kind == "b"
    ):
        held = {"b": "booleans", "i": "integers", "u": "integers", "f": "non-integer numbers"}
        raise _request_error(
            f"input {name!r} holds {held[array.dtype.kind]}; the contract is "
            f"{dtypes.canonical(contract.dtype)}",
            "Pass values of the contract's kind: nothing is cast (no bool as a number, no "
            "float as an integer).",
        )
    if kind in "iu":
        info = np.iinfo(want)
        if array.size and (int(array.min()) < info.min or int(array.max()) > info.max):
            raise _request_error(f"input {name!r} has values outside {want}")
    if kind == "f" and array.dtype.kind in "iuf" and array.size:
        with np.errstate(over="ignore"):
            cast = array.astype(want)
        if np.isfinite(array).all() and not np.isfinite(cast).all():
            raise _request_error(f"input {name!r} has values outside {want}'s range")
        return cast
    return array.astype(want)


def prompt_array(name: str, prompt, contract: TensorContract) -> np.ndarray:
    """The prompt (token rows as ``requests.PromptPreparer.prepare`` leaves them: text already
    encoded or refused; rows checked by ``check_token_rows``, so integer ids, at least one row
    and no empty one) as the prompt input's array."""
    if isinstance(prompt, np.ndarray):
        array = prompt.astype(np.int64)
    else:
        rows = list(prompt)
        if not isinstance(rows[0], list | tuple | np.ndarray):
            rows = [rows]
        lengths = {len(r) for r in rows}
        if len(lengths) != 1:
            raise _request_error(
                f"prompt rows have different lengths {sorted(lengths)}; this workflow takes a "
                "rectangular [rows, tokens] prompt",
                "Pad the rows to one length and pass the true lengths through the package's "
                "length input, if it has one.",
            )
        array = np.asarray(rows, dtype=np.int64)
    if array.ndim == 1:
        array = array[None, :]
    if contract.rank == 1:
        if array.shape[0] != 1:
            raise _request_error(f"input {name!r} takes one prompt row (rank 1)")
        return array[0]
    if contract.rank != 2:
        raise _request_error(f"prompt input {name!r} must have rank 1 or 2, not {contract.rank}")
    return array


def _longest_row(prompt) -> int:
    """The token count of the longest row of a prompt (0 when there is none): token rows as
    ``requests.PromptPreparer`` leaves them (a list of at least one row, or an array: a
    prompt-token input given as ``inputs``, of any shape until the binder checks it)."""
    if prompt is None:
        return 0
    if isinstance(prompt, np.ndarray):
        return int(prompt.shape[-1]) if prompt.ndim else 0
    return max(len(row) for row in prompt)


def literal(name: str, value, contract: TensorContract, shape: tuple[int, ...]) -> np.ndarray:
    dtype = numpy_dtype(contract.dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        values = value if isinstance(value, tuple | list) else [value]
        bad = [v for v in values if isinstance(v, int) and not info.min <= v <= info.max]
        if bad:
            raise _request_error(
                f"input {name!r} takes {dtypes.canonical(contract.dtype)}, which cannot hold "
                f"{bad[0]}",
                f"Pass a value in [{info.min}, {info.max}].",
            )
    if isinstance(value, tuple | list):
        flat = list(value)
        if len(flat) != math.prod(shape):
            raise _request_error(
                f"default of {name!r} lists {len(flat)} values but the shape {list(shape)} "
                f"holds {math.prod(shape)}",
                code="H75",
            )
        return np.asarray(flat, dtype=dtype).reshape(shape)
    return np.full(shape, value, dtype=dtype)


class InputBinder:
    def __init__(self, metadata: Metadata, dynamic: frozenset[str], check_tokens=None):
        # check_tokens(name as supplied, array): refuses token ids a prompt input supplied
        # through `inputs` may not hold (the engine's vocabulary check)
        self.check_tokens = check_tokens
        self.wf = metadata.workflow
        self.dynamic = dynamic
        gen = metadata.generation
        self.defaults = gen.defaults if gen and gen.defaults else None
        self.overrides = dict(gen.overrides) if gen else {}
        roles: dict[str, str] = {}
        for name, inp in self.wf.inputs.items():
            if isinstance(inp.source, RequestSource) and isinstance(inp.role, RuntimeRole):
                roles.setdefault(inp.role.role, name)
        self.role_inputs = roles
        # a speculative-block component verifies greedily: such a package never samples
        self.speculative = any(
            comp.contract is not None and comp.contract.id == SPECULATIVE_CONTRACT
            for comp in self.wf.components.values()
        )

    # ------------------------------------------------------------------ keywords

    def greedy(self, request: Request) -> bool:
        """Whether this request decodes greedily: the caller's choice; else sampling when it
        gives a sampling keyword; else the package's ``do_sample``; else greedy."""
        if request.greedy is not None:
            return request.greedy
        if any(getattr(request, k) is not None for k in ("temperature", "top_k", "top_p", "min_p")):
            return False
        return not (self.defaults is not None and self.defaults.do_sample)

    def check_keywords(self, request: Request, spelling=None) -> None:
        """What the package allows of the request keywords (``spelling``: how the caller names
        them, a ``requests.Spelling``; the API's keywords by default)."""

        def name(keyword: str) -> str:
            return getattr(spelling, keyword) if spelling is not None else keyword

        def show(keyword: str, value) -> str:
            if spelling is not None:
                return spelling.show(keyword, value)
            return f"{keyword}={value!r}"

        if self.speculative:
            asked = [k for k in ("temperature", "top_k", "top_p", "min_p") if getattr(request, k)
                     is not None]  # fmt: skip
            if request.greedy is False or (asked and not request.greedy):
                what = show("greedy", False) if request.greedy is False else show(
                    asked[0], getattr(request, asked[0])
                )  # fmt: skip
                raise _request_error(
                    f"{what} asks to sample, but this package decodes speculatively "
                    f"({SPECULATIVE_CONTRACT}), which verifies every token greedily",
                    f"Leave {name('greedy')} and the sampling keywords unset (greedy decoding), "
                    "or load the decoder without a draft to sample.",
                )
        for keyword, roles in KEYWORD_ROLES.items():
            value = getattr(request, keyword)
            if value is None:
                continue
            if request.greedy and keyword in ("temperature", "top_k", "top_p", "min_p"):
                raise _request_error(
                    f"{show(keyword, value)} was given with greedy decoding",
                    f"Leave {name('greedy')} off to sample (greedy means temperature 0, top_k 1).",
                )
            if not any(role in self.role_inputs for role in roles):
                raise _request_error(
                    f"this package has no input for {name(keyword)!r} (no request input with "
                    f"role {' or '.join(roles)})",
                    f"Leave {name(keyword)} unset for this package.",
                )
            field_name = KEYWORD_FIELD[keyword]
            if self.overrides and field_name not in self.overrides:
                raise _request_error(
                    f"this package does not let requests override {field_name!r} "
                    f"(generation.overrides lists {', '.join(self.overrides)})",
                    f"Leave {name(keyword)} unset for this package.",
                    code="G88",
                )
            override = self.overrides.get(field_name)
            bound = override.constraint if override else None
            if bound is not None and (
                (bound.minimum is not None and value < bound.minimum)
                or (bound.maximum is not None and value > bound.maximum)
            ):
                raise _request_error(
                    f"{show(keyword, value)} is outside the package's allowed range "
                    f"[{bound.minimum}, {bound.maximum}]",
                    f"Keep {name(keyword)} within the range generation.overrides allows.",
                    code="G88",
                )
            if keyword == "max_new_tokens" and value < 0:
                raise _request_error(
                    f"{show(keyword, value)} is negative: a request cannot ask for fewer "
                    "than 0 new tokens (nor a loop it bounds run a negative number of times)",
                    f"Pass {name(keyword)} >= 0 (0 generates nothing).",
                    code="D44",
                )

    def _default_field(self, field_name: str):
        """A ``generation.defaults`` field (upstream's: temperature, top_k, top_p, max_length...)."""
        return getattr(self.defaults, field_name, None) if self.defaults else None

    def _prompt_rows(self, request: Request):
        """The request's prompt, else the token rows it supplies as the prompt-token input (an
        array; None when it supplies none, or no rectangular array of them)."""
        if request.prompt is not None:
            return request.prompt
        value = (request.inputs or {}).get(self.role_inputs.get("prompt_tokens"))
        try:
            array = np.asarray(value)  # None (no such input) becomes an object array
        except (ValueError, TypeError, OverflowError):
            return None  # bind refuses it (to_array)
        return None if array.dtype == object else array

    def request_value(self, role: str, request: Request):
        """The scalar a request supplies for a runtime role, or None (then the input's own
        ``default`` applies). Package defaults are authoritative over the input defaults."""
        if role in ("max_iterations", "max_output_tokens"):
            if request.max_new_tokens is not None:
                return request.max_new_tokens
            max_length = self._default_field("max_length")
            if max_length is None:
                return None
            # max_length bounds the final length: no row may grow past it
            return max(0, max_length - _longest_row(self._prompt_rows(request)))
        if role == "seed":
            return request.seed
        if role in SAMPLING:
            keyword, greedy_value = SAMPLING[role]
            if self.greedy(request):
                return greedy_value
            value = getattr(request, keyword)
            if value is not None:
                return value
            return self._default_field(keyword)  # None for min_p: no generation default
        return None

    # ------------------------------------------------------------------ binding

    def bind(self, request: Request) -> Bound:
        """The request's values for the workflow's inputs. Its keywords and input names have
        been checked (``check_keywords``, ``check_names``: ``Engine._checked``, before the
        prompt is prepared, which adds no name a request could not supply)."""
        wf = self.wf
        supplied = dict(request.inputs or {})
        direct: dict[str, np.ndarray] = {}
        scalars: dict[str, object] = {}  # name -> Python value to materialise (pass 2)
        for name in sorted(wf.inputs):
            inp = wf.inputs[name]
            alias = inp.source.name if isinstance(inp.source, ApplicationSource) else None
            if name in supplied and alias and alias != name and alias in supplied:
                raise _request_error(f"input {name!r} was supplied twice (also as {alias!r})")
            key = name if name in supplied else alias if alias in supplied else None
            if key is not None:
                role = inp.role.role if isinstance(inp.role, RuntimeRole) else None
                if role in ("prompt_tokens", "prompt_text") and request.prompt is not None:
                    raise _request_error(
                        f"the prompt was given twice: as the prompt and as input {key!r}",
                        "Give the prompt once: as the prompt, or as that input.",
                    )
                direct[name] = to_array(name, supplied.pop(key), inp.contract)
                if role == "prompt_tokens" and self.check_tokens is not None:
                    self.check_tokens(key, direct[name])
                continue
            source = inp.source
            if isinstance(source, RequestSource):
                role = inp.role.role if isinstance(inp.role, RuntimeRole) else None
                if role == "prompt_tokens":
                    if request.prompt is not None:
                        direct[name] = prompt_array(name, request.prompt, inp.contract)
                        continue
                elif role == "prompt_text":
                    if request.prompt is not None:
                        raise _request_error(
                            f"input {name!r} takes text, which needs a tokenizer adapter this "
                            "runtime does not run inside workflows"
                        )
                else:
                    value = self.request_value(role, request) if role else None
                    if value is not None:
                        scalars[name] = value
                        continue
            elif isinstance(source, ArtifactSource):
                raise _request_error(
                    f"input {name!r} comes from artifact {source.location!r}, which is not a tensor "
                    "the runtime can bind",
                    "Supply the input explicitly.",
                )
            if inp.default is not None:  # a literal always has one (B82, B11)
                scalars[name] = inp.default
        symbols = Symbols(self.dynamic)
        batch = None
        for name in sorted(direct):
            contract = wf.inputs[name].contract
            check(name, direct[name], contract, symbols, f"input {name!r}")
            axis = contract.request_axis
            if batch is None and axis is not None:  # axis < rank (B07), the value's rank
                batch = int(direct[name].shape[axis])
        values = dict(direct)
        for name in sorted(scalars):
            contract = wf.inputs[name].contract
            shape = self.resolved_shape(name, contract, symbols)
            values[name] = literal(name, scalars[name], contract, shape)
            check(name, values[name], contract, symbols, f"input {name!r}")
        for name, inp in wf.inputs.items():
            if inp.present_as:
                values[inp.present_as] = np.array(name in values)
        return Bound(values, symbols, batch)

    def unbound(self, request: Request) -> tuple[list[str], list[str]]:
        """``(required inputs the request leaves without a value, supplied names no input
        declares)``, each sorted."""
        supplied = set(request.inputs or {})
        declared: set[str] = set()
        missing = []
        for name in sorted(self.wf.inputs):
            inp = self.wf.inputs[name]
            source = inp.source
            alias = source.name if isinstance(source, ApplicationSource) else None
            declared.update(n for n in (name, alias) if n)
            if name in supplied or alias in supplied:
                continue
            if isinstance(source, RequestSource):
                role = inp.role.role if isinstance(inp.role, RuntimeRole) else None
                if role in ("prompt_tokens", "prompt_text"):
                    if request.prompt is not None:
                        continue
                elif role and self.request_value(role, request) is not None:
                    continue
            if isinstance(source, LiteralSource | ArtifactSource):
                continue  # bind refuses these itself
            if inp.default is None and inp.required:
                missing.append(name)
        return missing, sorted(supplied - declared)

    def check_names(self, request: Request, spelling=None) -> None:
        """Refuse (``H75``) a request that leaves a required input without a value or supplies
        an input no one declares, naming every such input at once (``spelling``: the caller's
        terms, a ``requests.Spelling``; the API's by default)."""
        missing, unknown = self.unbound(request)
        if not missing and not unknown:
            return
        if spelling is None:
            from ..requests import API as spelling
        declared = sorted(  # what a caller may supply: not the package's literals
            {
                n
                for name, inp in self.wf.inputs.items()
                if not isinstance(inp.source, LiteralSource)
                for n in (name, _alias(inp))
                if n
            }
        )
        parts, hints = [], []
        if missing:
            many = len(missing) != 1
            parts.append(
                f"required input{'s' * many} {', '.join(map(repr, missing))} "
                f"{'were' if many else 'was'} not supplied"
            )
            hints.append(self._missing_hint(missing, spelling))
        if unknown:
            named = []
            for name in unknown:
                close = difflib.get_close_matches(name, declared, n=1, cutoff=0.6)
                named.append(f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name))
            many = len(unknown) != 1
            parts.append(f"the request supplies undeclared input{'s' * many} {', '.join(named)}")
            hints.append(f"The inputs a request may supply: {', '.join(declared) or 'none'}.")
        raise _request_error("; ".join(parts), " ".join(hints))

    def _missing_hint(self, missing: list[str], spelling) -> str:
        """How to supply each missing input, in the caller's terms."""
        ways: list[str] = []
        plain: list[tuple[str, object]] = []
        for name in missing:
            inp = self.wf.inputs[name]
            role = inp.role.role if isinstance(inp.role, RuntimeRole) else None
            keyword = next((k for k, roles in KEYWORD_ROLES.items() if role in roles), None)
            if role in ("prompt_tokens", "prompt_text"):
                ways.append(spelling.pass_keyword("prompt"))
            elif keyword is not None:
                ways.append(spelling.pass_keyword(keyword))
            else:
                plain.append((_alias(inp) or name, inp.contract))
        if plain:
            ways.append(spelling.pass_inputs(plain))
        return f"Pass {', '.join(ways)}."

    @staticmethod
    def resolved_shape(name: str, contract: TensorContract, symbols: Symbols) -> tuple[int, ...]:
        """The shape a literal or request scalar materialises at: symbols bound so far give
        their extents (a ``[batch]`` default gets one value per row); a symbol nothing bound
        yet becomes 1."""
        if contract.rank == 0:
            return ()
        if contract.shape is None:  # a literal's default has one (B82): a request scalar
            raise _request_error(
                f"input {name!r} would take a request value (a keyword, or its role's "
                f"default), but its contract, of rank {contract.rank}, declares no shape to "
                "give it",
                f"Pass {name!r} in inputs as an array, or declare its contract's shape.",
            )
        resolved = (symbols.resolve(d) for d in contract.shape)
        return tuple(1 if extent is None else extent for extent in resolved)
