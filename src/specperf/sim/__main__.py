"""``python -m specperf.sim``: start the SGLang-speaking simulator (see specperf.sim)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from specperf.sim.profile import DEFAULT_PROFILE, ProfileError, load_profile
from specperf.sim.server import serve


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The simulator's command line."""
    parser = argparse.ArgumentParser(prog="python -m specperf.sim", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default loopback)")
    parser.add_argument("--port", type=int, default=0, help="port; 0 picks a free one")
    parser.add_argument("--profile", default=DEFAULT_PROFILE, help="profile name or TOML path")
    parser.add_argument("--time-scale", type=float, default=1.0,
                        help="wall seconds per simulated second (0.1 = ten times faster)")
    parser.add_argument("--seed", type=int, default=None, help="RNG seed (default: profile's)")
    parser.add_argument("--log-file", type=Path, default=None,
                        help="append SGLang-format decode log lines here")
    args = parser.parse_args(argv)
    if args.time_scale <= 0:
        parser.error("--time-scale must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(argv)
    try:
        profile = load_profile(args.profile)
    except ProfileError as exc:
        print(f"specperf-sim: {exc}", file=sys.stderr)
        return 2
    seed = profile.seed if args.seed is None else args.seed
    return serve(profile, args.host, args.port, args.time_scale, seed, args.log_file)


if __name__ == "__main__":
    code = main()
    # Skip the interpreter's teardown (a quarter of a start-to-stop cycle's CPU, freeing the
    # web stack's modules): by now the server has closed its connections and its log file,
    # and a test session stops dozens of simulators.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
