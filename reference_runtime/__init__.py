"""Reference runtime for ONNX GenAI workflow packages.

``reference_runtime.package`` loads and validates packages; ``reference-runtime validate PKG``
is the command-line entry point.
"""

from .engine import Engine, RunResult
from .errors import PackageError, ReferenceRuntimeError, RunError, UsageError, Violation
from .package import Package, load_package, validate_package

__all__ = [
    "Engine",
    "RunResult",
    "RunError",
    "Package",
    "PackageError",
    "ReferenceRuntimeError",
    "UsageError",
    "Violation",
    "load_package",
    "validate_package",
]
