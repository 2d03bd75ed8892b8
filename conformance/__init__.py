"""The conformance suite: cases, suites and certification of any runtime."""
