"""Sampling judged by properties, never by one runtime's random draws.

A runtime that draws tokens itself (a bare decoder's token policy: temperature, then top-k,
top-p and min-p filters; docs/lowering.md) cannot be expected to reproduce another runtime's
random numbers. Its draws are judged instead by what any correct sampler must do, against the
exact distribution computed from the decoder's own logits (the fixture's graph run on the whole
prefix with ONNX Runtime, the suite's oracle for ONNX graphs):

- **reproducible**: the same request with the same seed gives the same tokens;
- **within the filters**: every token of the case's sampled requests is one the filters keep
  (ties at a top-k or top-p boundary count as kept);
- **distribution**: the first token of ``DRAWS`` single-token requests (seeds ``SEED0``,
  ``SEED0 + 1``, ...) follows the exact distribution (a chi-square goodness-of-fit test; the
  case fails when its p-value is below ``ALPHA``), under the case's own settings, under two
  temperatures far apart (so a sampler that ignores the temperature fails one), with top-p, and
  with min-p (its own case, needing the ``min_p`` feature).

A correct sampler fails a distribution test with probability ``ALPHA`` (1e-4) for a given set
of seeds; the seeds are fixed, so a verdict is reproducible: the same runtime gets the same
verdict on every run. Exact tokens stay an optional stricter level: the golden cases of these
run cases need the ``reference_draws`` feature (a runtime drawing as the reference runtime
does, docs/lowering.md).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

from ..package_reader import GENAI_CONFIG, parse_metadata

ALPHA = 1e-4  # the false-alarm rate of one distribution test, for a given set of seeds
DRAWS = 300  # single-token requests per distribution test
SEED0 = 10_007  # the first of their seeds
SLACK = 1e-6  # probability mass within which a filter's boundary counts as kept


@dataclass(frozen=True)
class Settings:
    """A row's sampling settings, in the order the filters apply."""

    temperature: float = 1.0
    top_k: int = 0  # 0: no top-k filter
    top_p: float = 1.0
    min_p: float = 0.0

    def inputs(self) -> dict:
        """The lowered workflow's sampling inputs for a one-row request."""
        return {
            "request.temperature": np.array([self.temperature], np.float32),
            "request.top_k": np.array([self.top_k], np.int64),
            "request.top_p": np.array([self.top_p], np.float32),
            "request.min_p": np.array([self.min_p], np.float32),
        }

    def describe(self) -> str:
        return (
            f"temperature {self.temperature:g}, top-k {self.top_k}, top-p {self.top_p:g}, "
            f"min-p {self.min_p:g}"
        )


def request_settings(request: dict, row: int) -> Settings:
    """Row ``row``'s settings as a request to a lowered decoder gives them (absent: defaults)."""
    inputs = request.get("inputs") or {}

    def value(name, default):
        if name not in inputs:
            return default
        flat = np.asarray(inputs[name]).reshape(-1)
        return flat[row if flat.size > 1 else 0].item()

    return Settings(
        temperature=float(value("request.temperature", 1.0)),
        top_k=int(value("request.top_k", 0)),
        top_p=float(value("request.top_p", 1.0)),
        min_p=float(value("request.min_p", 0.0)),
    )


class LogitsOracle:
    """The next-token logits of a decoder folder for a whole prefix: the folder's graph run once
    on the prefix (empty past, every position attended) with ONNX Runtime."""

    def __init__(self, root: Path):
        config = parse_metadata(Path(root) / GENAI_CONFIG)["model"]
        decoder = config["decoder"]
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = ort.InferenceSession(
            str(Path(root) / decoder["filename"]), options, providers=["CPUExecutionProvider"]
        )
        self.names = decoder["inputs"]
        self.logits = decoder["outputs"]["logits"]
        self.layers = int(decoder["num_hidden_layers"])
        self.kv_heads = int(decoder["num_key_value_heads"])
        self.head_size = int(decoder["head_size"])
        self.cache: dict[tuple, np.ndarray] = {}

    def __call__(self, prefix) -> np.ndarray:
        key = tuple(int(t) for t in prefix)
        if key not in self.cache:
            n = len(key)
            feeds = {
                self.names["input_ids"]: np.array([key], np.int64),
                self.names["attention_mask"]: np.ones((1, n), np.int64),
                self.names["position_ids"]: np.arange(n, dtype=np.int64)[None],
            }
            empty = np.zeros((1, self.kv_heads, 0, self.head_size), np.float32)
            for layer in range(self.layers):
                feeds[self.names["past_key_names"] % layer] = empty
                feeds[self.names["past_value_names"] % layer] = empty
            (logits,) = self.session.run([self.logits], feeds)
            self.cache[key] = np.asarray(logits[0, -1], dtype=np.float64)
        return self.cache[key]


def distribution(logits: np.ndarray, s: Settings) -> np.ndarray:
    """The exact next-token distribution: softmax of ``logits / temperature`` over the tokens
    the filters keep (top-k highest; the smallest set of most likely tokens reaching top-p; those
    at least min-p times the likeliest), renormalised. Temperature 0 or top-k 1 is greedy."""
    if s.temperature <= 0.0 or s.top_k == 1:
        out = np.zeros(logits.size)
        out[int(np.argmax(logits))] = 1.0
        return out
    keep = kept(logits, s, slack=0.0)
    scores = logits / s.temperature
    probs = np.exp(scores - scores[keep].max()) * keep
    return probs / probs.sum()


def kept(logits: np.ndarray, s: Settings, slack: float = SLACK) -> np.ndarray:
    """The tokens the filters keep; with ``slack``, a token within ``slack`` of a boundary (a
    tie at the k-th score, the top-p mass, the min-p threshold) counts as kept."""
    if s.temperature <= 0.0 or s.top_k == 1:
        return logits >= logits.max() - slack
    scores = logits / s.temperature
    keep = np.ones(scores.size, dtype=bool)
    order = np.argsort(-scores, kind="stable")
    if 0 < s.top_k < scores.size:
        keep &= scores >= scores[order[s.top_k - 1]] - slack
    probs = np.exp(scores - scores.max()) * keep
    probs /= probs.sum()
    if s.top_p < 1.0:
        before = np.cumsum(probs[order]) - probs[order]  # the mass of likelier tokens
        cut = np.zeros(scores.size, dtype=bool)
        cut[order] = before < s.top_p + slack
        keep &= cut
    if s.min_p > 0.0:
        keep &= probs >= s.min_p * probs.max() - slack
    return keep


# ------------------------------------------------------------------ the chi-square test


def chi_square(observed: Counter, probs: np.ndarray, n: int) -> tuple[float, int, float]:
    """(statistic, degrees of freedom, p-value) of ``observed`` token counts (``n`` draws)
    against ``probs``. Tokens expected fewer than 5 times are pooled in one bin (merged into the
    smallest other bin when the pool itself is expected fewer than 5 times)."""
    support = np.flatnonzero(probs > 0)
    expected = {int(t): n * probs[t] for t in support}
    bins = [([t], e) for t, e in expected.items() if e >= 5]
    rare = [t for t, e in expected.items() if e < 5]
    if rare:
        pool = (rare, sum(expected[t] for t in rare))
        if pool[1] >= 5 or not bins:
            bins.append(pool)
        else:
            smallest = min(range(len(bins)), key=lambda i: bins[i][1])
            tokens, mass = bins[smallest]
            bins[smallest] = (tokens + rare, mass + pool[1])
    if len(bins) < 2:
        return 0.0, 0, 1.0
    statistic = 0.0
    for tokens, e in bins:
        o = sum(observed.get(t, 0) for t in tokens)
        statistic += (o - e) ** 2 / e
    df = len(bins) - 1
    return statistic, df, upper_gamma(df / 2, statistic / 2)


def upper_gamma(a: float, x: float) -> float:
    """The regularised upper incomplete gamma function Q(a, x): the chi-square survival function
    with 2a degrees of freedom at 2x (a series below a + 1, a continued fraction above)."""
    if x <= 0:
        return 1.0
    log_prefix = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        for k in range(1, 1000):
            term *= x / (a + k)
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(log_prefix))
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return math.exp(log_prefix) * h


# ------------------------------------------------------------------ judging draws


def draw_requests(prompt: list[int], s: Settings) -> list[dict]:
    """``DRAWS`` single-token sampled requests of one prompt row, seeds ``SEED0`` onwards."""
    return [
        {
            "prompt": [list(prompt)],
            "inputs": s.inputs(),
            "max_new_tokens": 1,
            "seed": SEED0 + i,
            "greedy": False,
        }
        for i in range(DRAWS)
    ]


def first_tokens(results: list[dict]) -> tuple[Counter, list[str]]:
    """The first token of each result's only row, and what kept any from giving one."""
    counts: Counter = Counter()
    problems = []
    for i, result in enumerate(results):
        tokens = (result.get("tokens") or [[]])[0] if not result.get("error") else None
        if not tokens:
            problems.append(f"draw {i} gave no token ({result.get('error') or 'empty'})")
            continue
        counts[int(tokens[0])] += 1
    return counts, problems


def judge_draws(counts: Counter, logits: np.ndarray, s: Settings) -> list[str]:
    """Problems of ``counts`` (first tokens over ``DRAWS`` seeds) under settings ``s``: tokens
    outside the filters, or a distribution the chi-square test rejects at ``ALPHA``."""
    keep = kept(logits, s)
    outside = sorted(t for t in counts if not (0 <= t < keep.size and keep[t]))
    if outside:
        drawn = sum(counts[t] for t in outside)
        return [
            f"{s.describe()}: {drawn} of {sum(counts.values())} draws outside the filters "
            f"(tokens {outside[:5]})"
        ]
    probs = distribution(logits, s)
    n = sum(counts.values())
    statistic, df, p = chi_square(counts, probs, n)
    if p < ALPHA:
        likeliest = ", ".join(
            f"{t}: {counts.get(t, 0)}/{n * probs[t]:.0f}" for t in np.argsort(-probs)[:3]
        )
        return [
            f"{s.describe()}: the draws do not follow the distribution (chi-square "
            f"{statistic:.1f}, {df} degrees of freedom, p = {p:.1e} < {ALPHA:g}; likeliest "
            f"tokens drawn/expected {likeliest})"
        ]
    return []


def sequence_problems(oracle: LogitsOracle, prompt: list[int], tokens: list[int],
                      s: Settings, where: str) -> list[str]:  # fmt: skip
    """Tokens of one sampled row that the filters would not keep at their position."""
    for position, token in enumerate(tokens):
        keep = kept(oracle([*prompt, *tokens[:position]]), s)
        if not (0 <= token < keep.size and keep[token]):
            return [f"{where}: token {token} at position {position} is outside the filters "
                    f"({s.describe()})"]  # fmt: skip
    return []
