"""The case catalogue: packages, requests and the expectations a runtime must meet."""
