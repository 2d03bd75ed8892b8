"""Expected results of the conformance run cases (one JSON file per case, see conformance/goldens.py)."""
