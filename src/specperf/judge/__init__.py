"""Verdicts: a measurement against its baseline (or its A/B pair), attributed.

``verdict`` (a case and a context fit: regression, improvement, within tolerance or
undetermined, attributed to acceptance or step time), ``sweep`` (the sweep-level factor test),
``exact`` (exact per-prompt acceptance), ``pathverdict`` (chat vs native route, stream vs
not) and ``ab`` (two live endpoints, interleaved).

May import: core, plan, servers, measure, baselines
"""
