"""The perf cases themselves, shipped with the package (not a room: nothing imports them).

pytest runs them; the ``specperf`` plugin (a ``pytest11`` entry point) supplies their
fixtures and markers. From a checkout, ``pytest perf_tests -m context_scaling`` (the
top-level ``perf_tests`` is a symlink here); from anywhere once specperf is installed,
``pytest --pyargs specperf.perf_tests -m context_scaling``; ``specperf gate`` runs these.
"""
