"""Reading a workflow package: files, YAML, schema, typed model, artifact paths, validation."""

from .load import Package, load_package, validate_package

__all__ = ["Package", "load_package", "validate_package"]
