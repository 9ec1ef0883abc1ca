"""The ``specperf bisect`` use case: which deploy of a serving stack made it slower.

Between the last good night and the first bad one, a deploy log of versions (drafter
checkpoints, parser versions, server images, kernel flags) landed on the box. Bisect puts
versions back on the box one at a time (``deploy``), measures a few cases on each with the
suite's own loop (``lab``), and bisects each factor that moved separately (``search``),
every comparison a same-night one against tonight's measurement of the good end
(``classify``); ``report`` renders the outcome, ``command`` is the CLI. docs/bisect.md.

May import: core, store, settings, plan, servers, measure, views
"""
