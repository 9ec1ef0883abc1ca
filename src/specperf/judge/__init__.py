"""Verdicts: a measurement against its baseline (or its A/B pair), attributed.

``outcome`` (what every judge returns: a ``Verdict`` or a ``NotJudged`` reason) and ``hints``
(the advice sentences they share); ``verdict`` (a case: regression, improvement, within
tolerance or undetermined), its ``attribution`` (to acceptance, step time or prefill) and
``positions``; ``fit`` (the context slope); the sweep-level factor test: ``factor`` (what is
pooled), ``estimate`` (the pooled change), ``factortest`` (its sequential test), ``sweepverdict``
(the sentence) and ``sweep`` (the top-up rule that runs them); ``concurrency`` (batch levels);
``exact`` (exact per-prompt acceptance), ``pathverdict`` (chat vs native route, stream vs
not), ``reconcile`` (tok/s predicted from acceptance and step time, judged with each case),
``ab`` (two live endpoints, interleaved); and ``specperf explain``'s ``observation``,
``prediction``, ``diagnosis`` (its sentence) and ``explain`` (the decision). Every status is
the verdict contract's (:mod:`specperf.core.contract`).

May import: core, plan, servers, measure, baselines
"""
