#!/usr/bin/env bash
# Deploy gate: the smoke subset against a freshly deployed endpoint (see ci/README.md, docs/gate.md).
# Exit codes: 0 pass, 1 performance regression (block the deploy), 2 usage error,
# 3 infrastructure problem (page the box's owner; don't blame the deploy).
#   ci/gate.sh --endpoint http://127.0.0.1:30000 --deployment kimi-k26-ddtree-8xpro6000
# Around a deploy on a box that holds one deployment at a time, judge against a same-night
# reference instead of the nightly baseline (the run-to-run noise cancels):
#   ci/gate.sh --save-reference /var/tmp/specperf-ref --endpoint "$URL" --deployment "$DEP"  # before
#   deploy-the-candidate
#   ci/gate.sh --reference /var/tmp/specperf-ref --endpoint "$URL"                         # after
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3   # ./baselines is the checkout's; the perf tests, the installed specperf's
command -v specperf >/dev/null || { echo "ci/gate.sh: specperf is not installed (pip install -e .)" >&2; exit 3; }
exec specperf gate "$@"
