"""What people read, rendered from the record: HTML report, plots, terminal summary, trend.

``page`` and ``report`` (the HTML report), ``plots`` (SVG charts), ``summary`` (the closing
block in the terminal) and ``trend`` (the nightly history over many runs).

May import: core, settings, servers, measure, judge, record
"""
