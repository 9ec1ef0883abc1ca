"""``python -m specperf.cli``: the ``specperf`` command without its console script."""

from __future__ import annotations

import sys

from . import main

sys.exit(main())
