"""``specperf explain``: what production shows, explained from the deployment's baseline.

Offline, from figures a dashboard showed::

    specperf explain --deployment D --class reasoning --context 3500 --observed-tok-s 32

Live and passive, from the server's ``/metrics`` over a window (no request to the model, no
GPU lock; the deployment defaults to the one the server's fingerprint names)::

    specperf explain --endpoint http://box:30000 --window 60

Exit codes are the gate's: 0 the observation is what the baseline predicts, 1 a factor is
beyond the baseline's tolerance, 2 usage (a bad flag, an unknown class, a URL that is no LLM
server), 3 infrastructure (no baseline, the endpoint unreachable, no /metrics, no traffic in
the window). See docs/explain.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError, SpecperfError
from ..core.noise import DEFAULT_RUN_NOISE, NoiseModel
from ..judge.explain.explanation import Outcome
from ..settings.config import Settings, resolve_only
from ..settings.ini import project_ini
from ..settings.options import OPTIONS_BY_NAME
from ..store.history import (
    HISTORY_FILE,
    HistoryLineSkipped,
    box_noise,
    history_despite_store,
)
from ..views import explaincard
from . import explainrun
from .exits import failed, unwritable

NOISE_OPTIONS = ("run_noise", "night_window", "report_dir", "results_db")


def add_subcommand(subparsers: Any) -> None:
    """Register ``specperf explain``."""
    p = subparsers.add_parser(
        "explain", help="explain a production tok/s from the deployment's baseline",
        description="Predict what the deployment does on this traffic from its baseline and "
                    "say which factor (step time or acceptance) explains an observation.")
    p.add_argument("--deployment", default=None,
                   help="the baseline's deployment name (live: default, named by the "
                        "server's fingerprint, as the gate names it)")
    p.add_argument("--baseline-dir", type=Path, default=Path("baselines"),
                   help="where baselines live (default: baselines)")
    p.add_argument("--class", dest="text_class", default=None,
                   help="the traffic's text class (live: default, the baseline's class whose "
                        "avg commit is nearest the observed)")
    p.add_argument("--context", type=_positive, default=None,
                   help="prompt tokens of the traffic (live: default, from the server)")
    p.add_argument("--observed-tok-s", type=_positive, default=None,
                   help="offline: tok/s per request the dashboard showed")
    p.add_argument("--observed-commit", type=_positive, default=None,
                   help="offline: avg committed tokens per verify step, when known")
    p.add_argument("--concurrency", type=_positive, default=1.0,
                   help="offline: concurrent requests (default 1)")
    p.add_argument("--output-tokens", type=int, default=None,
                   help="output tokens per request (default: the baseline case's)")
    p.add_argument("--endpoint", default=None, help="live: the production server's URL")
    p.add_argument("--window", type=_positive, default=60.0,
                   help="live: seconds between the two /metrics readings (default 60)")
    p.add_argument("--history", type=Path, default=None,
                   help="history.jsonl of this box: its run-to-run noise (default: "
                        "reports/history.jsonl, or under SPECPERF_REPORT_DIR, when it exists; "
                        "else the prior)")
    p.add_argument("--label", default="", help="the box's label in --history (default: live, "
                                                "the server's; offline, the box whose runs were "
                                                "judged against --deployment)")
    p.add_argument("--run-noise", default=None,
                   help=f"this box's run-to-run noise per case, stated (knowledge: docs/noise.md; "
                        f"default as the perf run reads it: ${OPTIONS_BY_NAME['run_noise'].env}, "
                        f"else ini {OPTIONS_BY_NAME['run_noise'].ini}, else the prior "
                        f"{DEFAULT_RUN_NOISE:g})")
    p.add_argument("--night-window", default=None,
                   help="hours within which runs share a night (default as the perf run reads "
                        f"it: ${OPTIONS_BY_NAME['night_window'].env}, else ini "
                        f"{OPTIONS_BY_NAME['night_window'].ini}, else "
                        f"{OPTIONS_BY_NAME['night_window'].default})")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--html", type=Path, default=None, help="write the HTML card here")
    p.set_defaults(run=run)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _default_history(settings: Settings) -> Path | None:
    """The history pytest writes (its report directory's history.jsonl), when it is there."""
    path = settings.report_dir / HISTORY_FILE
    return path if path.is_file() else None


def noise_settings(args: argparse.Namespace) -> Settings:
    """The settings the noise model reads, resolved as the perf run resolves them: this
    command's flag, else the SPECPERF_* variable, else the project's ini, else the default."""
    return resolve_only(NOISE_OPTIONS, {"run_noise": args.run_noise,
                                        "night_window": args.night_window},
                        os.environ, project_ini(),
                        {"run_noise": "--run-noise", "night_window": "--night-window"})


def _deployment_label(entries: list[dict[str, Any]], deployment: str | None) -> str:
    """Offline, the box is the one whose runs were judged against this deployment: the
    label of the latest such run ("" when none)."""
    labels = [str(e.get("label", "")) for e in entries
              if (e.get("baseline") or {}).get("deployment") == deployment]
    return labels[-1] if labels else ""


def noise(args: argparse.Namespace, label: str = "", simulated: bool = False) -> NoiseModel:
    """The run-to-run noise of box ``label`` (live: the server's label in the history), read
    from the same settings and history as the perf run's (store/history.py's box_noise)."""
    settings = noise_settings(args)
    if args.history is None:
        args.history = _default_history(settings)
    entries: list[dict[str, Any]] = []
    if args.history is not None:
        try:
            args.history.stat()  # a --history naming nothing is a usage error, not "no runs"
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", HistoryLineSkipped)
                entries, problem = history_despite_store(args.history, settings.results_db)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--history {args.history} cannot be read ({exc}): point it at "
                              f"a history.jsonl the perf runs wrote.") from exc
        for warning in caught:  # one line each, never Python's warning with its source line
            print(f"specperf explain: {warning.message}", file=sys.stderr)
        if problem:
            print(f"specperf explain: {problem.rstrip('.')}; the history was read from "
                  f"{args.history}.", file=sys.stderr)
    box = args.label or label or _deployment_label(entries, args.deployment)
    return box_noise(entries, box, simulated=simulated and not args.label,
                     run_noise=settings.run_noise,
                     stated=settings.sources.get("run_noise", "default") != "default",
                     night_window_h=settings.night_window)


def _outcome(args: argparse.Namespace) -> Outcome:
    if args.endpoint is not None:
        if args.observed_tok_s is not None or args.observed_commit is not None:
            raise ConfigError("--observed-tok-s and --observed-commit are for the offline form: "
                              "leave them out with --endpoint.")
        server = explainrun.identify(args.endpoint)  # an LLM server, and which deployment
        return explainrun.live(args.baseline_dir, args.deployment or server.deployment,
                                server, args.window, text_class=args.text_class,
                                context=args.context,
                                noise=noise(args, server.label, server.simulated))
    if args.deployment is None:
        raise ConfigError("explain needs --deployment NAME offline (live, with --endpoint, the "
                          "server's fingerprint names it).")
    model = noise(args)
    missing = [flag for flag, value in (("--class", args.text_class), ("--context", args.context),
                                        ("--observed-tok-s", args.observed_tok_s))
               if value is None]
    if missing:
        raise ConfigError(f"explain needs --endpoint (live) or {', '.join(missing)} (offline).")
    return explainrun.offline(args.baseline_dir, args.deployment, args.text_class, args.context,
                               args.observed_tok_s, avg_commit=args.observed_commit,
                               concurrency=args.concurrency, output_tokens=args.output_tokens,
                               noise=model)


def run(args: argparse.Namespace) -> int:
    """``specperf explain``: the explanation, then the gate's exit code."""
    try:
        outcome = _outcome(args)
    except SpecperfError as exc:  # a wrong URL (not an LLM server) is the caller's to fix
        return failed("explain", exc)
    print(explaincard.as_json(outcome) if args.json else explaincard.text(outcome), end=""
          if args.json else "\n")
    if args.html is not None:
        try:
            args.html.parent.mkdir(parents=True, exist_ok=True)
            args.html.write_text(explaincard.card(outcome), encoding="utf-8")
        except OSError as exc:
            return unwritable("explain", "--html", args.html, exc)
        # where the card is, on stderr under --json so stdout stays one JSON document
        print(f"specperf explain: card {args.html}", file=sys.stderr if args.json else sys.stdout)
    return outcome.explanation.exit_code
