#!/usr/bin/env bash
# Deploy gate: the smoke subset against a freshly deployed endpoint (see ci/README.md).
# Exit codes: 0 pass, 1 performance regression (block the deploy), 2 usage error,
# 3 infrastructure problem (page the box's owner; don't blame the deploy).
#   ci/gate.sh --endpoint http://127.0.0.1:30000 --deployment kimi-k26-ddtree-8xpro6000
set -uo pipefail
cd "$(dirname "$0")/.." || exit 3   # ./baselines is the checkout's; the perf tests, the installed specperf's
command -v specperf >/dev/null || { echo "ci/gate.sh: specperf is not installed (pip install -e .)" >&2; exit 3; }
exec specperf gate "$@"
