"""Everything one simulator process holds, handed to the routes through ``app.state``."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from specperf.sim.decodelog import DecodeLog
from specperf.sim.faults import Faults
from specperf.sim.metrics import SimMetrics
from specperf.sim.profile import Profile
from specperf.sim.scheduler import Scheduler
from specperf.sim.tokenizer import Tokenizer
from specperf.sim.vllm_metrics import VllmMetrics


@dataclass
class SimState:
    """The simulator's components; built once by ``app.build_app``."""

    profile: Profile
    tokenizer: Tokenizer
    faults: Faults
    scheduler: Scheduler
    metrics: SimMetrics | VllmMetrics
    decode_log: DecodeLog
    time_scale: float
    seed: int


def get_state(request: Request) -> SimState:
    """The SimState of the app serving this request."""
    state = request.app.state.sim
    assert isinstance(state, SimState)
    return state
