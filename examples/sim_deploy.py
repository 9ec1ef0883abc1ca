"""Deploy a version of a deploy log on the simulator, so `specperf bisect` runs with no GPU.

A "deploy" resets the simulator and posts the version's knobs (its line's ``"sim"`` object:
``step_time_mult``, ``acceptance_mult``, ``prefill_mult``, … as docs/simulator.md lists them)
to ``/_sim/faults``, then reads them back. A line with ``"deploy_fails": true`` fails its
deploy (exit 1), as a broken image would. ``draft_model`` is the path ``/server_info``
reports, so a line's ``"fingerprint": {"draft_model": …}`` is what bisect waits to see::

    python -m specperf.sim --port 30000 --time-scale 0.05 &
    python examples/sim_deploy.py history --versions 16 --seed 7 --out /tmp/versions.jsonl
    specperf bisect --endpoint http://127.0.0.1:30000 --versions /tmp/versions.jsonl \\
        --deploy "python examples/sim_deploy.py deploy --endpoint http://127.0.0.1:30000 \\
                  --versions /tmp/versions.jsonl {version}"

``history`` writes a deploy log whose culprits are drawn from ``--seed``: step time rises
by ``--step-rise`` from one version on, and with ``--acceptance-mult`` below 1 the drafter
gets worse from another; ``--fail`` versions (never an end) fail to deploy. The draw is
written as a comment at the top of the file (a bisect skips comment lines).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

import httpx


def _lines(path: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("{"):
            data = json.loads(line)
            found[str(data["name"])] = data
        elif line and not line.startswith("#"):
            found[line] = {"name": line}
    return found


def deploy(endpoint: str, versions: Path, name: str) -> int:
    """Put version ``name`` of ``versions`` on the simulator at ``endpoint``."""
    line = _lines(versions).get(name)
    if line is None:
        print(f"sim_deploy: no version {name!r} in {versions}", file=sys.stderr)
        return 2
    if line.get("deploy_fails"):
        print(f"sim_deploy: deploying {name} failed (the versions file says deploy_fails)",
              file=sys.stderr)
        return 1
    knobs = dict(line.get("sim") or {})
    with httpx.Client(base_url=endpoint.rstrip("/"), timeout=30.0) as client:
        client.post("/_sim/reset").raise_for_status()
        if knobs:
            client.post("/_sim/faults", json=knobs).raise_for_status()
        state = client.get("/_sim/faults").json()
    wrong = {k: (v, state.get(k)) for k, v in knobs.items() if state.get(k) != v}
    if wrong:
        print(f"sim_deploy: the simulator did not take {wrong}", file=sys.stderr)
        return 1
    print(f"sim_deploy: {name} deployed ({knobs or 'defaults'})")
    return 0


def history(n: int, seed: str, step_rise: float, acceptance_mult: float, fail: int,
            out: Path) -> dict[str, Any]:
    """Write a deploy log of ``n`` versions with drawn culprits; returns the draw."""
    rng = random.Random(seed)
    draw: dict[str, Any] = {"seed": seed}
    if step_rise:
        draw["step time"] = rng.randint(1, n - 1)
    if acceptance_mult != 1.0:
        draw["acceptance"] = rng.choice([i for i in range(1, n) if i != draw.get("step time")])
    culprits = {draw.get("step time"), draw.get("acceptance")}
    draw["fails"] = sorted(rng.sample([i for i in range(1, n - 1) if i not in culprits], fail))
    lines = [f"# drawn with seed {seed}: " + json.dumps(
        {k: (f"v{v:02d}" if isinstance(v, int) else v) for k, v in draw.items() if k != "fails"}
        | {"fails": [f"v{i:02d}" for i in draw["fails"]]})]
    for i in range(n):
        # The drafter checkpoint is what the server reports (its fingerprint's draft_model):
        # a new one lands with the acceptance culprit, as a drafter deploy would.
        worse_drafter = "acceptance" in draw and i >= draw["acceptance"]
        drafter = f"specperf-sim/drafter-{'ckpt2' if worse_drafter else 'ckpt1'}"
        sim: dict[str, Any] = {"draft_model": drafter}
        if "step time" in draw and i >= draw["step time"]:
            sim["step_time_mult"] = 1.0 + step_rise
        if worse_drafter:
            sim["acceptance_mult"] = acceptance_mult
        line: dict[str, Any] = {"name": f"v{i:02d}", "sim": sim,
                                "fingerprint": {"draft_model": drafter}}
        if i in draw["fails"]:
            line["deploy_fails"] = True
        lines.append(json.dumps(line))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return draw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("deploy", help="deploy one version on the simulator")
    d.add_argument("--endpoint", required=True)
    d.add_argument("--versions", type=Path, required=True)
    d.add_argument("version")
    h = sub.add_parser("history", help="write a deploy log with drawn culprits")
    h.add_argument("--versions", type=int, default=16)
    h.add_argument("--seed", default="0")
    h.add_argument("--step-rise", type=float, default=0.3)
    h.add_argument("--acceptance-mult", type=float, default=1.0)
    h.add_argument("--fail", type=int, default=0)
    h.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "deploy":
        return deploy(args.endpoint, args.versions, args.version)
    draw = history(args.versions, args.seed, args.step_rise, args.acceptance_mult, args.fail,
                   args.out)
    print(f"sim_deploy: wrote {args.versions} versions to {args.out}: {draw}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
