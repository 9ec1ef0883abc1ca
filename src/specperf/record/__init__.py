"""The record of a run: results.json (and its schema) and what kind of run it was.

``results`` (the results document: exactly what was measured and judged) and ``runkind``
(full sweep, subset, outage … as written in the history).

May import: core, servers, measure, baselines, judge
"""
