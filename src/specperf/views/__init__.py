"""What people read, rendered from the record: HTML report, plots, terminal summary, trend.

``page`` and ``report`` (the HTML report), ``figures`` (its charts and their captions),
``plots`` (SVG charts), ``summary`` (the closing block in the terminal; ``headline``: its one
line per failure), ``trend`` (the nightly history over many runs), ``extras`` (specperf's
pieces of pytest-html's report) and ``explaincard`` (``specperf explain``). Every HTML view is
a jinja2 template under ``templates/``, autoescaped, behind ``template`` (the one module that
imports jinja2).

May import: core, settings, servers, measure, judge, record
"""
