"""False alarms and naming, counted from the plugin's own record of a modelled run.

``sweep_power.py`` draws requests from the box's model and calls the shipped judges itself: its
rule "a run fails when a case or the sweep regresses" is its own, and it leaves out what the
record also holds (exact acceptance prompt by prompt, the predict-and-reconcile rows, the
slope verdicts). Here the same model of the box answers **one request at a time** and
everything above the request is the plugin's: :class:`specperf.RunState` measures each case
(its warm-up, its determinism check, its repeat rule with the baseline's fixed errors and
exact acceptance in force), writes the baseline with ``update_baseline`` into a real
baselines folder (its prompt seed, request digest, fits and requests), reads it back the next
night, judges each case (``RunJudge``: the case verdict, exact acceptance prompt by prompt,
the reconcile row), each text class's slope, and the sweep with its top-ups
(``judge_run_sweep``). The verdicts go into a results document through ``build_results``,
and a run is counted from that document as a reader meets it: its decision
(``views/decision.py`` ``decide``: FAIL, PASS or UNDETERMINED) and the factors its
regressions name (``views/headline.py`` ``factor``, what the first screen prints).

Only the request is modelled (:class:`ModelMeasurer.attempt`), with sweep_power.py's
physics and noises (per request, per step, the night on step time, half of it common): a
case's step time ``S·(1 + change)·night·max(0.2, 1 + σz)·(1 + 0.009z')·(1 + σ_s/√steps·z'')``.
Acceptance is a property of the prompt, as on a deterministic server at temperature 0: a
prompt's commit is ``C·(1 − change)·(1 + c·z_prompt)`` with ``z_prompt`` drawn from the
prompt's digest, so the same prompt takes the same verify steps every night until
acceptance moves (then the same output text in other steps: the drafter), and steps are
whole numbers. The server is the simulator's Kimi profile as probed once at the start.

Rows: as sweep_power.py's (``--rows``); configs: ``first`` (the first night: no history,
the judge's 3 % prior) and ``history`` (the same with ``--history-nights`` earlier nights
of the box in the history file, written the way the record writes them) at ``--night``.

    python benchmarks/record_power.py [--trials 2000] [--seed 9494] [--rows ...]
        [--night 0.03] [--config first|history] [--workers 2]

Writes benchmarks/results/record_power_seed<seed>_<config>.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import sweep_power as sp
from drift_power import share
from sweep_power import pct

import specperf.plugin.runstate as runstate_module
from specperf import (
    CaseBaseline,
    NotJudged,
    PerfSession,
    PromptPlan,
    RunInfo,
    RunState,
    Sample,
    SimProcess,
    build_results,
    judge_run_sweep,
    load_text_classes,
    resolve,
)
from specperf.measure.attempt import Request
from specperf.measure.loop import Measurer, RunConfig
from specperf.plan import nonce
from specperf.plan.reuse import PromptUsed, digest
from specperf.views.decision import FAIL_WORD, UNDETERMINED_WORD, decide
from specperf.views.headline import factor

RESULTS = Path(__file__).resolve().parent / "results"
DEPLOYMENT = "box"
# The factor words a record's regressions may name (views/headline.py FACTORS) and the ones
# a row's change moves (sweep_power.py's sweep names: step, acceptance).
EXPECTED = {"step": {"step"}, "acceptance": {"acceptance"}, "mixed": {"step", "acceptance"}}


class World:
    """One night of the box for one run: each case's step and commit, the night's terms and
    the change; a request draws its own noise, a prompt's acceptance comes from its digest."""

    def __init__(self, box: sp.Box, change: sp.Change, night: Mapping[str, np.ndarray],
                 rng: np.random.Generator) -> None:
        self.box, self.change, self.night, self.rng = box, change, night, rng

    def request(self, text_class: str, context: int, tokens: int, prompt: str
                ) -> tuple[int, float, float, float]:
        """(verify steps, decode s, TTFT s, wall s) of one request of ``tokens`` tokens."""
        ph = sp.physics(text_class, context, tokens)
        i = sp.SWEEP.index((text_class, context))
        step_change, acc_change = self.change.of(text_class)
        # The prompt's acceptance: the same prompt, the same draft-and-verify path.
        z_prompt = np.random.default_rng(
            int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:8], "big")
        ).standard_normal()
        commit = (ph.commit * (1 - acc_change) * float(self.night["avg_commit"][i])
                  * (1 + self.box.commit_sd * math.sqrt(sp.TOKENS / tokens) * z_prompt))
        steps = max(1, round((tokens - 1) / commit))
        z = self.rng.standard_normal(3)
        step_ms = (ph.step_ms * (1 + step_change) * float(self.night["step_ms"][i])
                   * max(0.2, 1 + self.box.request * z[0]) * (1 + sp.STEP_SD * z[1])
                   * (1 + self.box.step_noise / math.sqrt(steps) * z[2]))
        decode_s = steps * step_ms / 1000
        return steps, decode_s, ph.prefill_s, ph.prefill_s + decode_s


class ModelMeasurer(Measurer):
    """The plugin's Measurer with its one request answered by the model (no HTTP): warm-ups,
    repeats, the determinism check and the samples' checks are the plugin's own."""

    def __init__(self, server: Any, run: RunConfig, world: World,
                 on_sample: Callable[[Sample, int], None] | None) -> None:
        super().__init__(None, server, None, run, on_sample=on_sample)  # type: ignore[arg-type]
        self.world = world

    def reproduce_prompts(self, seed: str) -> PromptPlan:
        # As on a server that turns its prefix cache off per request (reuse.plan_for).
        self.prompt_plan = PromptPlan(seed, "per-request", "prompts repeat across runs (model)")
        return self.prompt_plan

    def request(self, case: Any, max_tokens: int | None = None) -> Request:
        return Request(self.server.api, max_tokens or case.output_tokens)

    def template_tokens(self, case: Any, options: Any = None) -> int:
        return 0

    def attempt(self, case: Any, repeat: int, warmup: bool, request: Request | None = None,
                timing: Any = None) -> Sample:
        request = request or self.request(case)
        if self.prompt_plan.reproducible and request.reproducible:
            lead, kept = self.prompt_plan.nonce(None, case.id, repeat)  # type: ignore[arg-type]
        else:
            lead, kept = nonce.new_nonce(), False
        prompt = digest(f"{case.text_class}/{case.context}/{lead}".encode())
        steps, decode_s, ttft_s, wall_s = self.world.request(
            case.text_class, case.context, request.max_tokens, prompt)
        used = PromptUsed(repeat, kept, prompt)
        return Sample(case_id=case.id, repeat=repeat, warmup=warmup,
                      prompt_tokens=case.context, completion_tokens=request.max_tokens,
                      wall_s=wall_s, verify_steps=steps, decode_s=decode_s, ttft_s=ttft_s,
                      server_accept_length=None, cached_tokens=0,
                      acceptance_source=self.server.acceptance_source, finish_reason="length",
                      raw={**used.raw(f"greedy text of {prompt} at {request.max_tokens}", None),
                           "steps_from": "model"})


def session_factory(server: Any, world: World) -> Callable[..., PerfSession]:
    """What RunState builds as its session: the plugin's PerfSession, started on the model."""

    class ModelSession(PerfSession):
        def start(self) -> Any:
            if self.server is not None:
                return self.server
            s = self.settings
            self.classes = load_text_classes(s.text_class_dir)
            self.server = server
            run = RunConfig(repeats=s.repeats, max_repeats=s.max_repeats, warmup=s.warmup,
                            request_timeout=s.request_timeout, max_spread=s.max_spread,
                            case_repeats=dict(s.case_repeats),
                            warmup_tokens=s.warmup_output_tokens)
            self.measurer = ModelMeasurer(server, run, world, self.on_sample)
            return self.server

        def close(self) -> None:
            return None

    return ModelSession


def run_state(opts: Mapping[str, str], server: Any, world: World) -> RunState:
    runstate_module.PerfSession = session_factory(server, world)  # type: ignore[misc]
    return RunState(resolve(dict(opts), {}, {}), load_text_classes(), lock_mode="none")


def write_baseline(opts: Mapping[str, str], server: Any, world: World) -> None:
    """The baseline night: --specperf-update-baselines over the whole plan."""
    writer = run_state({**opts, "update_baselines": "true"}, server, world)
    for case in writer.cases:
        writer.measure(case, writer.tolerances_for(case, {}))
    lines = writer.update_baseline(clean=True)
    assert "wrote baseline" in lines[0], lines


def judged_record(opts: Mapping[str, str], server: Any, world: World) -> dict[str, Any]:
    """Today's run as the main job judges it (perf_tests/test_context_scaling.py: each case,
    each class's slope, the sweep), its verdicts put into a results document."""
    state = run_state(opts, server, world)
    outcomes: dict[str, str] = {}
    for case in state.cases:
        measured = state.measure(case, state.tolerances_for(case, {}))
        base = state.baseline_case(case)
        assert isinstance(base, CaseBaseline), base
        (verdict,) = state.judging.judge(measured, base, {})
        outcomes[case.id] = str(verdict.status)
    for text_class in state.settings.text_classes:
        fit = state.judging.judge_fit(text_class, {})
        outcomes[f"fit {text_class}"] = "skipped" if isinstance(fit, NotJudged) else \
            str(fit.status)
    sweep = judge_run_sweep(state, state.cases, "sweep")
    verdicts = [v.to_dict() for v in state.verdicts]
    if not isinstance(sweep, NotJudged):
        verdicts.append(sweep.verdict().to_dict())
    info = RunInfo("model", "2026-12-07T00:00:00Z", 0.0, None, {}, "model", "")
    measurements = {cid: m.to_dict() for cid, m in state.measurements.items()}
    gpu = sum(s.wall_s for m in state.measurements.values() for s in m.samples)
    doc = build_results(info, server=server.to_dict(), measurements=measurements,
                        verdicts=json.loads(json.dumps(verdicts, default=str)),
                        outcomes=outcomes, errors={}, baseline=state.baseline())
    extra_s = 0.0 if isinstance(sweep, NotJudged) else sweep.extra_s
    return {"doc": doc, "gpu": gpu + extra_s}


def trial(args: tuple[str, int, int, float, str, int]) -> dict[str, Any]:
    """One baseline night and one judged night of the row's change, counted from the record."""
    row, seed, k, night_sd, config, history_nights = args
    box = sp.Box(night=night_sd)
    change = sp.ROWS[row]
    rng = np.random.default_rng([seed, k, 99])
    base_night = sp.night_terms(box, len(sp.SWEEP), rng)
    today = sp.night_terms(box, len(sp.SWEEP), rng)
    with tempfile.TemporaryDirectory() as tmp:
        reports = Path(tmp) / "reports"
        reports.mkdir()
        opts = {"endpoint": "http://model.invalid", "baseline_dir": str(Path(tmp) / "base"),
                "report_dir": str(reports), "deployment": DEPLOYMENT}
        if config == "history":  # earlier nights of the box, as the record's history holds
            lines = sp.history(box, history_nights, base_night, rng)
            with (reports / "history.jsonl").open("w") as out:
                for line in lines:
                    out.write(json.dumps({**line, "label": SERVER_LABEL[0]}) + "\n")
        write_baseline(opts, SERVER[0], World(box, sp.NO_CHANGE, base_night,
                                              np.random.default_rng([seed, k, 0])))
        got = judged_record(opts, SERVER[0], World(box, change, today,
                                                   np.random.default_rng([seed, k, 1])))
    doc = got["doc"]
    decision = decide(doc)
    failing = [v for v in doc["verdicts"] if v["status"] == "fail"]
    names = sorted({part for v in failing for part in factor(v).split("+") if part})
    return {"fail": decision.word == FAIL_WORD,
            "undetermined": decision.word == UNDETERMINED_WORD,
            "names": names, "why": decision.why, "gpu": got["gpu"],
            "failing": sorted(v["case_id"] for v in failing),
            "open": sorted(v["case_id"] for v in doc["verdicts"] if v["status"] == "undetermined")}


SERVER: list[Any] = []
SERVER_LABEL: list[str] = []


def _init(server: Any) -> None:
    SERVER[:] = [server]
    SERVER_LABEL[:] = [server.label]


def probed_server() -> Any:
    """The simulator's Kimi profile as the plugin's probe sees it, in the box's time base."""
    with SimProcess("kimi-k26-ddtree", 0.05, seed=1) as sim:
        session = PerfSession(resolve({"endpoint": sim.url}, {}, {}), lock_mode="none")
        try:
            server = session.start()
        finally:
            session.close()
    # A box, not a simulator: the judge takes the noise a real box has (core/noise.py).
    return replace(server, time_scale=1.0, simulated=False, embedded=False,
                   url="http://box.invalid")


def expected(row: str) -> set[str]:
    kind = next((k for k in EXPECTED if row.endswith(k)), "")
    return EXPECTED.get("acceptance" if row.endswith("one class") else kind, set())


def _kind(case_id: str) -> str:
    return "fit" if case_id.endswith("-fit") else "sweep" if case_id == "sweep" else "case"


def summarise(row: str, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    n = len(runs)
    fails = [r for r in runs if r["fail"]]
    want = expected(row)
    out = {"row": row, "trials": n, "failed": share([r["fail"] for r in runs]),
           "undetermined": share([r["undetermined"] for r in runs]),
           "gpu_s": sum(r["gpu"] for r in runs) / n,
           # Which kind of verdict left a run undetermined: a case, a slope (fit), the sweep.
           "open_by": {kind: sum(any(_kind(c) == kind for c in r["open"]) for r in runs)
                       for kind in ("case", "fit", "sweep")},
           "names": {",".join(r["names"]) or "-": sum(x["names"] == r["names"] for x in fails)
                     for r in fails}}
    if want and fails:
        out["named"] = share([want <= set(r["names"]) for r in fails])
        out["alone"] = share([set(r["names"]) == want for r in fails])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=9494)
    parser.add_argument("--rows", default="no change,2% step,2% acceptance,2% mixed,"
                        "8% acceptance,15% acceptance")
    parser.add_argument("--night", type=float, default=0.03)
    parser.add_argument("--config", choices=("first", "history"), default="first")
    parser.add_argument("--history-nights", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    started = time.perf_counter()
    server = probed_server()
    rows = []
    with multiprocessing.get_context("fork").Pool(args.workers, _init, (server,)) as pool:
        for row in args.rows.split(","):
            jobs = [(row, args.seed, k, args.night, args.config, args.history_nights)
                    for k in range(args.trials)]
            runs = pool.map(trial, jobs, chunksize=max(1, args.trials // (8 * args.workers)))
            got = summarise(row, runs)
            rows.append(got)
            extra = (f"  named {pct(got['named'])}  alone {pct(got['alone'])}"
                     if "named" in got else "")
            print(f"{args.config} {args.night:g}  {row:<15} failed {pct(got['failed'])}  "
                  f"undetermined {pct(got['undetermined'])} {got['open_by']}{extra}  GPU {got['gpu_s']:.0f} s  "
                  f"names {got['names']}", flush=True)
    print(f"wall {time.perf_counter() - started:.0f} s")
    RESULTS.mkdir(exist_ok=True)
    name = f"record_power_seed{args.seed}_{args.config}{'_' + args.tag if args.tag else ''}.json"
    (RESULTS / name).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    main()
