"""Versioned baselines: what a deployment measured before, stored, loaded and compared.

``store`` (the main job's baseline files), ``concurrency`` (the concurrency levels' files, a
dimension of the same store), ``versions`` (the ``v<N>.json`` files of one directory, written
whole and never replaced), ``writelock`` (two writers take turns), ``diff`` (what changed
between two versions), ``preflight`` (a run that needs a baseline it lacks, or names a
deployment that has none beside others, refuses at once) and ``shipped`` (the simulator's
reference baseline in the package, ``reference/``).

May import: core, store, settings, plan, servers, measure
"""
