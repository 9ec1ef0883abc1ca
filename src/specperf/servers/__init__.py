"""Talking to one server: HTTP, its routes, and one adapter per server kind.

``client`` (HTTP with retries and one-sentence errors), ``routes`` (request bodies and answers
of every generation route), ``streaming`` and ``messages`` (SSE and chat messages),
``serverkind`` (SGLang, vLLM or OpenAI-compatible, and at which release), ``llamacpp`` (the
llama.cpp adapter), ``simulated`` (the bundled simulator's adapter: the only module that
knows the simulator), ``probe`` (identify the server once), ``fingerprint`` (what a
deployment is), ``pinned`` (a llama-server whose acceptance is synthetic), ``acceptance``
(where verify-step counts come from), ``positions`` (acceptance per draft position and along
the output, as the servers count it) and ``livemetrics`` (what a production server's /metrics
show over a window, for ``specperf explain``).

The simulator is imported by ``simulated`` alone.

May import: core, settings, plan, sim
"""
