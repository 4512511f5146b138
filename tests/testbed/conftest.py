"""Testbed tests. Tests marked `slow` (whole fault scenarios, two-process runs) run in
`make test`; `make test-fast` (`-m "not slow"`) leaves them out. Models and runs are cached
under TRIAGE_TESTBED_CACHE (default ~/.cache/triage-testbed)."""
