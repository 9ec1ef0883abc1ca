"""A drafter llama-server does not name (issue 35): the fingerprint says so, the user declares
it (--specperf-fingerprint draft_model=FILE), and a declared swap is a fingerprint difference."""

from __future__ import annotations

import pytest

from specperf.core.errors import ConfigError
from specperf.core.fingerprint import (
    NOT_REPORTED,
    deployment_name,
    deployment_slug,
    fingerprint_differences,
    with_declared,
)
from specperf.servers import llamacpp
from specperf.settings.config import resolve

# What this build's /props says of a target run with -md draft.gguf (tests/real: the same).
PROPS = {"model_path": "/m/target.gguf", "build_info": "b1-0c1e570", "total_slots": 1,
         "default_generation_settings": {"n_ctx": 4096,
                                         "params": {"speculative.types": "none"}}}


@pytest.mark.parametrize(("slots", "drafter"), [
    ([{"id": 0, "n_ctx": 4096, "speculative": True}], NOT_REPORTED),
    ([{"id": 0, "n_ctx": 4096, "speculative": False}], None),  # no drafter at all
    ([], None),  # --no-slots: whether it speculates is unknown too
])
def test_a_speculating_llama_server_does_not_report_its_drafter(slots, drafter):
    fp = llamacpp.fingerprint(PROPS, slots, simulated=False)
    assert fp["draft_model"] == drafter
    assert deployment_slug(fp) == deployment_slug({**fp, "draft_model": None})


def test_a_declared_drafter_swap_is_a_fingerprint_difference():
    fp = llamacpp.fingerprint(PROPS, [{"speculative": True}], simulated=False)
    before = with_declared(fp, {"draft_model": "draft.gguf"})
    after = with_declared(fp, {"draft_model": "noisy.gguf"})
    assert fingerprint_differences(before, after) == ["draft model: draft.gguf → noisy.gguf"]
    assert fingerprint_differences(before, fp) == [
        "draft model: draft.gguf → not reported by the server"]
    # A baseline written before the server's silence was named: not a difference.
    assert fingerprint_differences({**fp, "draft_model": None}, fp) == []


def test_the_deployment_is_named_with_what_the_user_declared():
    fp = llamacpp.fingerprint(PROPS, [{"speculative": True}], simulated=False)
    server = {"fingerprint": fp, "simulated": False}
    assert deployment_name(resolve({}, {}, {}), server) == "target.gguf-draft"
    declared = resolve({"fingerprint": "draft_model=/d/noisy.gguf"}, {}, {})
    assert deployment_name(declared, server) == "target.gguf-draft-noisy.gguf"


def test_a_declared_item_must_be_key_equals_value():
    assert resolve({}, {}, {"fingerprint": ["draft_model = a.gguf", "threads=2"]}
                   ).fingerprint == {"draft_model": "a.gguf", "threads": "2"}
    with pytest.raises(ConfigError) as info:
        resolve({}, {"SPECPERF_FINGERPRINT": "draft_model"}, {})
    assert str(info.value) == ("SPECPERF_FINGERPRINT: 'draft_model' is not key=value "
                               "(e.g. draft_model=draft.gguf)")
