"""Several endpoints in one run: its own pytest plugin on top of the single-endpoint one.

``endpoints`` (the fleet file and ``NAME=URL`` flags), ``schedule`` (the xdist scheduler that
keeps each endpoint on its own worker), ``plugin`` (its hooks), ``record`` and ``page`` (the
cross-box results and report).

May import: core, store, settings, plan, measure, baselines, record, views, plugin
"""
