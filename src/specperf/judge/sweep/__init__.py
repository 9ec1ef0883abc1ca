"""The sweep-level test: each factor (step time, acceptance per class, tok/s) pooled over every
case's requests (``factor``, ``estimate``), tested sequentially (``factortest``) with top-ups
(``pooled``), and combined into one verdict with its resolution (``verdict``)."""
