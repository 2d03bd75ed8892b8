"""Text in and out, through the tokenizer a package ships (Hugging Face ``tokenizers``).

The tokenizer file is the first ``package.tokenizer.artifacts[].location`` that names a
``tokenizer.json``, or else a ``tokenizer.json`` at the package root. A package without one
takes token ids only; a text prompt is then refused (H75).
"""

from __future__ import annotations

from pathlib import Path

from .errors import RunError
from .package import Package


def tokenizer_file(package: Package) -> Path | None:
    facts = package.metadata.package
    tokenizer = facts.tokenizer if facts else None
    for artifact in (tokenizer.artifacts or ()) if tokenizer else ():
        if artifact.location.endswith("tokenizer.json"):
            return package.root / artifact.location
    root_file = package.root / "tokenizer.json"
    return root_file if root_file.is_file() else None


class TextCodec:
    """Encodes prompts to token rows and decodes published tokens back to text."""

    def __init__(self, path: Path):
        from tokenizers import Tokenizer

        self.path = path
        self.tokenizer = Tokenizer.from_file(str(path))

    def encode(self, prompt: str | list[str]) -> list[list[int]]:
        texts = [prompt] if isinstance(prompt, str) else list(prompt)
        return [list(e.ids) for e in self.tokenizer.encode_batch(texts)]

    def decode(self, rows: list[list[int]]) -> list[str]:
        return [self.tokenizer.decode(ids, skip_special_tokens=True) for ids in rows]


def is_text(prompt) -> bool:
    return isinstance(prompt, str) or (
        isinstance(prompt, list | tuple)
        and bool(prompt)
        and all(isinstance(p, str) for p in prompt)
    )


def no_tokenizer_error() -> RunError:
    return RunError(
        "H75",
        "a text prompt was given but this package ships no tokenizer.json",
        hint="Pass token ids (prompt=[[1, 2, 3]]), or add a tokenizer.json to the package and "
        "list it under package.tokenizer.artifacts.",
    )
