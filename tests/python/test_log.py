"""specjit.read_log: the recompilation log as event objects, streamed line by line."""

from __future__ import annotations

import pytest

import specjit
from specjit.log import CompileEvent, DiskHitEvent, StormEvent
from conftest import SCALE_SOURCE


def _kernel(engine):
    return specjit.Kernel(source=SCALE_SOURCE, function="scale", params={"BLOCK": "exact"},
                          engine=engine)


@pytest.mark.runtime_sources
def test_a_compile_then_a_disk_hit_are_logged(settings):
    _kernel(specjit.Engine(**settings)).prepare(BLOCK=64)
    _kernel(specjit.Engine(**settings)).prepare(BLOCK=64)
    events = list(specjit.read_log(settings["log"]))
    assert [type(e) for e in events] == [CompileEvent, DiskHitEvent]
    compile_, hit = events
    assert compile_.kernel == "scale" and compile_.reason == "first_use"
    assert compile_.phase == "warmup" and compile_.ms > 0 and compile_.variant == {"BLOCK": 64}
    assert hit.key == compile_.key and hit.layer == 0 and hit.raw["event"] == "disk_hit"


@pytest.mark.runtime_sources
def test_a_new_variant_names_its_difference(settings, engine):
    k = _kernel(engine)
    k.prepare(BLOCK=64)
    k.prepare(BLOCK=128)
    second = list(specjit.read_log(settings["log"]))[-1]
    assert second.reason == "new_variant"
    assert second.diff[0]["component"] == "BLOCK" and second.diff[0]["requested"] == "128"


@pytest.mark.runtime_sources
@pytest.mark.settings
def test_a_storm_is_an_event(tmp_path):
    e = specjit.Engine(cache_dir=tmp_path / "c", log=tmp_path / "l.jsonl", storm_threshold=2)
    k = _kernel(e)
    for block in (32, 64, 128):
        k.prepare(BLOCK=block)
    storms = [ev for ev in specjit.read_log(tmp_path / "l.jsonl") if isinstance(ev, StormEvent)]
    assert len(storms) == 1 and storms[0].param == "BLOCK"


def test_lines_that_do_not_parse_are_skipped_and_kernels_filtered(tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_text('{"event":"compile","kernel":"a","ms":1.5,"future_field":1}\n'
                   "not json\n[1]\n"
                   '{"event":"disk_hit","kernel":"b","ms":0.1}\n'
                   '{"event":"brand_new","kernel":"a"}\n')
    events = list(specjit.read_log(log))
    assert [e.event for e in events] == ["compile", "disk_hit", "brand_new"]
    assert type(events[2]) is specjit.Event and events[0].raw["future_field"] == 1
    assert [e.event for e in specjit.read_log(log, kernel="a")] == ["compile", "brand_new"]


def test_the_default_path_follows_the_environment(tmp_path, monkeypatch):
    log = tmp_path / "mine.jsonl"
    log.write_text('{"event":"compile","kernel":"x"}\n')
    monkeypatch.setenv("SPECJIT_LOG", str(log))
    assert [e.kernel for e in specjit.read_log()] == ["x"]
    monkeypatch.setenv("SPECJIT_LOG", "off")
    assert list(specjit.read_log()) == []
