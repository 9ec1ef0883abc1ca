"""Measuring: one session against one endpoint, one case at a time, every sample checked.

``session`` (lifecycle: simulator, GPU lock, probe), ``lock`` (the GPU lock), ``identity``
(which server an endpoint names: the lock file's name), ``holder`` (who holds the lock), ``loop``
(one case's repeats), ``attempt`` and ``guard`` (a sample is trustworthy or retried),
``sample`` (what one request gave), ``repeats`` (how many repeats a cell needs),
``determinism`` (greedy paths repeat) and ``paths`` (one case on several request paths,
interleaved: the parser and streaming comparisons).

May import: core, store, settings, plan, servers
"""
