"""What the user asked for: options, ini keys and environment resolved into one ``Settings``.

``config`` (the option table, the ``Settings`` it fills, validation as one usage sentence),
``endpoints`` (a fleet's endpoints, from a file or repeated ``--endpoint NAME=URL``) and
``hints`` (commands printed in messages, built from the settings so they work as printed).

May import: core
"""
