"""specjit.Kernel without a GPU: definitions and their errors, prepare, policies, processes."""

from __future__ import annotations

import pytest

import specjit
from conftest import SCALE_SOURCE, run_python

pytestmark = pytest.mark.runtime_sources


def test_a_kernel_from_source_compiles_once_then_hits_memory(engine, scale_kernel):
    first = scale_kernel.prepare(num_tokens=7, BLOCK=128)
    assert first.source == "compiled"
    assert first.name_expression == "scale<128>"
    assert first.values["BLOCK"] == 128
    # The second request is a memory hit (the stats say so); the variant still tells how it
    # reached the engine.
    again = scale_kernel.prepare(num_tokens=9, BLOCK=128)
    assert again.source == "compiled" and again.key == first.key
    stats = engine.stats()
    assert (stats.compiles, stats.memory_hits, stats.requests) == (1, 1, 2)


def test_a_thousand_num_tokens_values_under_dynamic_compile_once(engine, scale_kernel):
    keys = {scale_kernel.prepare(num_tokens=n, BLOCK=64).key for n in range(1, 1001)}
    assert len(keys) == 1
    stats = engine.stats()
    assert stats.compiles == 1 and stats.memory_hits == 999


def test_a_second_process_compiles_zero_times(settings, scale_kernel):
    scale_kernel.prepare(num_tokens=1, BLOCK=256)
    out = run_python(f"""
        import specjit
        from conftest import SCALE_SOURCE
        e = specjit.Engine(**{settings!r})
        k = specjit.Kernel(source=SCALE_SOURCE, function="scale", engine=e,
                           params={{"num_tokens": specjit.dynamic(), "BLOCK": specjit.exact()}})
        for n in (1, 17, 4096):
            v = k.prepare(num_tokens=n, BLOCK=256)
        s = e.stats()
        print(s.compiles, s.disk_hits, s.memory_hits)
    """, {"PYTHONPATH": _here()})
    assert out.split() == ["0", "1", "2"]


def _here() -> str:
    import os
    return os.path.dirname(os.path.abspath(__file__))


def test_values_may_be_a_sequence_in_parameter_order(scale_kernel):
    assert scale_kernel.prepare(num_tokens=3, BLOCK=32).key == \
        specjit.Variant._from_info(scale_kernel._native.prepare([3, 32])).key


def test_a_missing_template_value_is_named(scale_kernel):
    with pytest.raises(specjit.InvalidArgumentError, match="'BLOCK'"):
        scale_kernel.prepare(num_tokens=3)


def test_an_unknown_value_name_is_named(scale_kernel):
    with pytest.raises(specjit.InvalidArgumentError, match="'BLOK'"):
        scale_kernel.prepare(BLOCK=32, BLOK=3)


def test_a_non_integer_value_is_named(scale_kernel):
    with pytest.raises(specjit.InvalidArgumentError, match="BLOCK"):
        scale_kernel.prepare(BLOCK="32")


def test_source_and_path_are_exclusive(engine):
    with pytest.raises(specjit.InvalidArgumentError, match="exactly one"):
        specjit.Kernel(source=SCALE_SOURCE, path="x.cu", function="scale", engine=engine)
    with pytest.raises(specjit.InvalidArgumentError, match="exactly one"):
        specjit.Kernel(function="scale", engine=engine)


def test_a_missing_source_file_is_not_found(engine, tmp_path):
    with pytest.raises(specjit.NotFoundError, match="nope.cu"):
        specjit.Kernel(path=tmp_path / "nope.cu", function="scale", engine=engine)


def test_a_kernel_from_a_file_with_an_include_directory(engine, tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "factor.h").write_text("#define FACTOR 3\n")
    (tmp_path / "k.cu").write_text('#include "factor.h"\n' + SCALE_SOURCE)
    k = specjit.Kernel(path=tmp_path / "k.cu", function="scale", params={"BLOCK": "exact"},
                       include_dirs=[tmp_path / "inc"], engine=engine)
    assert k.prepare(BLOCK=64).source == "compiled"


def test_in_memory_headers_and_defines_reach_the_compiler(engine):
    source = '#include "my/tile.h"\n' + SCALE_SOURCE.replace("factor;", "factor * TILE * EXTRA;")
    k = specjit.Kernel(source=source, function="scale", params={"BLOCK": specjit.exact()},
                       headers={"my/tile.h": "#define TILE 2\n"}, defines={"EXTRA": 5},
                       engine=engine, name="scale_headers")
    assert k.prepare(BLOCK=64).source == "compiled"


def test_an_nvrtc_error_is_a_compile_error_with_the_log(engine):
    k = specjit.Kernel(source="template <int B> __global__ void bad() { undeclared(); }",
                       function="bad", params={"B": specjit.exact()}, engine=engine)
    with pytest.raises(specjit.CompileError, match="undeclared"):
        k.prepare(B=1)


def test_a_bad_policy_string_is_named(engine):
    with pytest.raises(specjit.InvalidArgumentError, match="sometimes"):
        specjit.Kernel(source=SCALE_SOURCE, function="scale", params={"BLOCK": "sometimes"},
                       engine=engine)


def test_a_policy_of_the_wrong_type_is_named(engine):
    with pytest.raises(TypeError, match="'BLOCK'"):
        specjit.Kernel(source=SCALE_SOURCE, function="scale", params={"BLOCK": 3}, engine=engine)


def test_the_id_defaults_to_the_function_name(scale_kernel):
    assert scale_kernel.id == "scale"
    assert "BLOCK=exact" in repr(scale_kernel)
