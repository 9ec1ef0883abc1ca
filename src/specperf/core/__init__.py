"""The vocabulary and the mathematics every other room shares; no I/O, no HTTP, no pytest.

``errors`` (every specperf error, and which are infrastructure vs regression), ``limits``
(tolerances, physical bounds, the arrow), ``stats`` (robust summaries, their constants and
the Student-t quantile), ``model`` (the context fit: step time linear in context),
``sequential`` (the sequential tests the sweep uses) and ``drift`` (the nightly drift test
over a history), ``fingerprint`` (a deployment's fingerprint as data: labels, differences,
the deployment name it gives a baseline).

May import: nothing
"""
