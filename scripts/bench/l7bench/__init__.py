"""l7fast's benchmark harness (scripts/bench/run.sh is the entry point)."""
