"""Loads the specperf plugin for this repository's perf_tests and tests."""

pytest_plugins = ["specperf.plugin"]
