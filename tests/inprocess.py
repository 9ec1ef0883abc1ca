"""What an in-process pytester run of this suite needs (``pytester.runpytest_inprocess``).

In-process runs replace a subprocess pytest where the subprocess is not the point of the test:
they skip an interpreter start and the imports (about 1.5 s of CPU each on a 2-core machine).
"""

from __future__ import annotations

# hypothesis's pytest plugin, registered again in a process that imported hypothesis already
# (the property tests share the worker), warns "Slow code in plugin", an error under
# filterwarnings = error; these runs need nothing from it.
NO_HYPOTHESIS = ("-p", "no:hypothesispytest")
