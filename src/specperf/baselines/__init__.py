"""Versioned baselines: what a deployment measured before, stored, loaded and compared.

``store`` (the baseline files, their versions and the write lock), ``diff`` (what changed
between two versions) and ``preflight`` (a run that needs a baseline it lacks refuses at once).

May import: core, settings, plan, servers, measure
"""
