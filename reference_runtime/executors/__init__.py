"""Executors beneath the interpreter: each runs components, none knows about workflows."""
