"""specjit.precompile runs the bundled CLI on a manifest and returns its summary."""

from __future__ import annotations

import json
import os

import pytest

import specjit

MANIFEST = {"version": 1, "variants": [
    {"kernel": "scale_tokens", "values": {"cols": [64, 128], "num_tokens": [1, 7, 99]}}]}


def test_a_manifest_compiles_then_is_reused(tmp_path):
    first = specjit.precompile(MANIFEST, cache_dir=tmp_path, jobs=2)
    assert (first["variants"], first["compiled"], first["failed"]) == (2, 2, 0)
    again = specjit.precompile(MANIFEST, cache_dir=tmp_path)
    assert (again["compiled"], again["reused"]) == (0, 2)


def test_a_manifest_file_and_an_arch(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(MANIFEST))
    summary = specjit.precompile(path, cache_dir=tmp_path / "c", arch="sm_90a")
    assert summary["arches"] == ["sm_90a"] and summary["compiled"] == 2


def test_a_bad_manifest_raises_with_the_cli_message(tmp_path):
    with pytest.raises(specjit.PrecompileError, match="exit 2.*colour") as err:
        specjit.precompile({"version": 1, "colour": "blue"}, cache_dir=tmp_path)
    assert not any((tmp_path).rglob("*.entry"))
    assert isinstance(err.value, specjit.SpecjitError)


def test_a_missing_manifest_file_is_named(tmp_path):
    with pytest.raises(specjit.PrecompileError, match="nope.json"):
        specjit.precompile(tmp_path / "nope.json", cache_dir=tmp_path)


APP_KERNELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "data",
                           "app_kernels")


@pytest.mark.runtime_sources
def test_a_kernel_of_the_manifest_is_a_disk_hit_when_defined_at_run_time(settings, monkeypatch):
    # A dict's relative paths are taken from the current directory.
    monkeypatch.chdir(APP_KERNELS)
    manifest = {"kernels": [{
        "id": "app_scale", "source": "kernels/app_scale.cu", "function": "app_scale",
        "include_dirs": ["include"], "defines": {"APP_SCALE": "1.5f"},
        "options": ["--use_fast_math"],
        "params": [{"name": "num_tokens"}, {"name": "block", "policy": "exact"}]}],
        "variants": [{"kernel": "app_scale", "values": {"num_tokens": [1, 64], "block": 128}}]}
    summary = specjit.precompile(manifest, cache_dir=settings["cache_dir"])
    assert (summary["variants"], summary["compiled"], summary["failed"]) == (1, 1, 0)
    kernel = specjit.Kernel(path=os.path.join(APP_KERNELS, "kernels", "app_scale.cu"),
                            name="app_scale", function="app_scale",
                            params={"num_tokens": "dynamic", "block": "exact"},
                            include_dirs=[os.path.join(APP_KERNELS, "include")],
                            defines={"APP_SCALE": "1.5f"}, options=["--use_fast_math"],
                            engine=specjit.Engine(**settings))
    assert kernel.prepare(num_tokens=4096, block=128).source == "disk"
