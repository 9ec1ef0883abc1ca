"""Verdicts: a measurement against its baseline (or its A/B pair), attributed.

``verdict`` (a case and a context fit: regression, improvement, within tolerance or
undetermined, attributed to acceptance or step time), ``sweep`` (the sweep-level factor test),
``exact`` (exact per-prompt acceptance), ``pathverdict`` (chat vs native route, stream vs
not), ``reconcile`` (tok/s predicted from acceptance and step time, judged with each case)
and ``ab`` (two live endpoints, interleaved). Every status is the verdict contract's
(:mod:`specperf.core.contract`).

May import: core, plan, servers, measure, baselines
"""
