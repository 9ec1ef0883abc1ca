"""What will be sent, before any server is touched: cases, prompts, nonces, the request digest.

``workload`` (text classes, cases, prompt builders), ``textclasses/`` (the bundled classes),
``nonce`` (the unique prompt lead), ``reuse`` (reproducible prompts across runs of a baseline
version) and ``digest`` (the client-side identity of a run's requests).

May import: core
"""
