"""What people read, rendered from the record: HTML report, plots, terminal summary, trend,
dashboards.

``page`` and ``report`` (the HTML report), ``figures`` (its charts and their captions),
``plots`` (SVG charts), ``decision`` (what the run decided, said first on the page and last in
the terminal), ``summary`` (the closing block in the terminal; ``headline``: one line per
verdict, read from its fields), ``trend`` (the nightly history over many runs), ``extras``
(specperf's pieces of pytest-html's report), ``explaincard`` (``specperf explain``),
``prometheus`` (the run's gauges for a textfile or a Pushgateway: the one module that imports
prometheus_client's registry) and ``github`` (the Actions job summary and annotations). Every
HTML view is a jinja2 template under ``templates/``, autoescaped, behind ``template`` (the one
module that imports jinja2).

May import: core, settings, measure, judge, record
"""
