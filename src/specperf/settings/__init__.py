"""What the user asked for: options, ini keys and environment resolved into one ``Settings``.

``options`` (the option table: each setting's parser, default and help, once), ``parsers``
(how a setting's text is read), ``config`` (the ``Settings`` the table fills, resolved once,
validation as one usage sentence),
``endpoints`` (a fleet's endpoints, from a file or repeated ``--endpoint NAME=URL``) and
``hints`` (commands printed in messages, built from the settings so they work as printed).

May import: core
"""
