"""The record of a run: results.json (and its schema) and what kind of run it was.

It writes the record and nothing else (every status in it was decided by ``judge``):
``results`` (the results document: exactly what was measured and judged), ``schema`` (its
JSON Schema, validated with jsonschema, and loading a file back), ``scrub`` (no secret in a
record), ``files`` (results.json and the history line), ``readers`` (a recorded case's
medians and context), ``lineage`` (why each baseline version was written, as data) and
``runkind`` (full sweep, subset, outage … as written in the
history).

May import: core, store, servers, measure, baselines, judge
"""
