"""specjit.Engine: settings, seal and strict mode, stats, the default engine, errors."""

from __future__ import annotations

import pytest

import specjit
from conftest import SCALE_SOURCE, run_python


@pytest.mark.settings
def test_a_bad_setting_name_is_named(settings):
    with pytest.raises(specjit.InvalidArgumentError, match="cache_dri"):
        specjit.Engine(cache_dri="/tmp/x")


@pytest.mark.settings
def test_a_bad_setting_value_is_named(settings):
    with pytest.raises(specjit.InvalidArgumentError, match="strict"):
        specjit.Engine(**settings, strict="sometimes")


def test_stats_start_at_zero(engine):
    assert engine.stats() == specjit.EngineStats(0, 0, 0, 0, 0, 0, 0, 0)


@pytest.mark.runtime_sources
def test_sealed_under_strict_error_a_compile_is_a_strict_error(settings):
    e = specjit.Engine(**settings, strict="error")
    k = specjit.Kernel(source=SCALE_SOURCE, function="scale", params={"BLOCK": "exact"},
                       engine=e)
    with pytest.raises(specjit.StrictError, match="scale"):
        k.prepare(BLOCK=32)
    assert e.stats().failures == 1


@pytest.mark.runtime_sources
def test_seal_keeps_cached_variants_working(settings):
    warm = specjit.Engine(**settings)
    k = specjit.Kernel(source=SCALE_SOURCE, function="scale", params={"BLOCK": "exact"},
                       engine=warm)
    k.prepare(BLOCK=32)
    sealed = specjit.Engine(**settings, strict="error")
    k2 = specjit.Kernel(source=SCALE_SOURCE, function="scale", params={"BLOCK": "exact"},
                        engine=sealed)
    assert k2.prepare(BLOCK=32).source == "disk"


def test_the_default_engine_is_one_per_process():
    assert specjit.default_engine() is specjit.default_engine()


@pytest.mark.runtime_sources
def test_the_environment_sets_the_default_engine(tmp_path):
    out = run_python("""
        import specjit
        e = specjit.default_engine()
        k = specjit.Kernel(source="template <int B> __global__ void f() {}", function="f",
                           params={"B": specjit.exact()})
        print(k.prepare(B=1).source)
    """, {"SPECJIT_CACHE_DIR": str(tmp_path), "SPECJIT_LOG": "off"})
    assert out.strip() == "compiled"
    assert any(tmp_path.rglob("*")), "the variant was written under SPECJIT_CACHE_DIR"


def test_import_specjit_does_not_import_torch():
    out = run_python("import sys, specjit; print('torch' in sys.modules)")
    assert out.strip() == "False"


def test_errors_map_every_status_to_its_class():
    from specjit.errors import from_status
    assert isinstance(from_status(6, "m"), specjit.CapturingError)
    assert isinstance(from_status(1, "m"), ValueError)
    e = from_status(42, "odd")
    assert type(e) is specjit.SpecjitError and e.status == 42 and str(e) == "odd"
