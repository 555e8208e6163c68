"""Policies: their C strings, their validation, and the variants they make."""

from __future__ import annotations

import pytest

import specjit

SOURCE = r"""
template <int N>
__global__ void fill(int* out) { out[threadIdx.x] = N; }
"""


def test_policies_spell_the_c_abi_strings():
    assert specjit.dynamic().spec == "dynamic"
    assert specjit.exact().spec == "exact"
    assert specjit.bucketed().spec == "bucketed(pow2)"
    assert specjit.bucketed([16, 64, 256]).spec == "bucketed(16,64,256)"
    assert specjit.divisibility(16).spec == "divisibility(16)"
    assert specjit.divisibility(16, one=True).spec == "divisibility(16)+one"


@pytest.mark.parametrize("bad", [[64, 16], [], [0, 4], "linear"])
def test_bad_buckets_are_refused(bad):
    with pytest.raises(ValueError, match="bucketed"):
        specjit.bucketed(bad)


def test_divisibility_needs_at_least_two():
    with pytest.raises(ValueError, match="divisibility"):
        specjit.divisibility(1)


def _variants(engine, policy, values):
    k = specjit.Kernel(source=SOURCE, function="fill", params={"N": policy}, engine=engine,
                       name="fill_" + "".join(c for c in policy.spec if c.isalnum()))
    return [k.prepare(N=v) for v in values]


@pytest.mark.runtime_sources
def test_exact_compiles_each_value(engine):
    vs = _variants(engine, specjit.exact(), [1, 2, 3, 2])
    assert len({v.key for v in vs}) == 3
    assert [v.values["N"] for v in vs] == [1, 2, 3, 2]


@pytest.mark.runtime_sources
def test_pow2_buckets_share_a_variant_per_bucket(engine):
    vs = _variants(engine, specjit.bucketed(), [3, 4, 5, 8])
    assert vs[0].key == vs[1].key and vs[2].key == vs[3].key and vs[0].key != vs[2].key
    assert vs[2].name_expression == "fill<8>"


@pytest.mark.runtime_sources
def test_listed_buckets_take_the_upper_bound(engine):
    vs = _variants(engine, specjit.bucketed([16, 64]), [1, 16, 17, 64])
    assert [v.name_expression for v in vs] == ["fill<16>", "fill<16>", "fill<64>", "fill<64>"]


@pytest.mark.runtime_sources
def test_divisibility_splits_multiples_from_the_rest(engine):
    vs = _variants(engine, specjit.divisibility(16), [32, 48, 33, 7])
    assert vs[0].key == vs[1].key and vs[2].key == vs[3].key and vs[0].key != vs[2].key
    assert vs[0].name_expression == "fill<16>" and vs[2].name_expression == "fill<0>"


@pytest.mark.runtime_sources
def test_divisibility_with_one_gives_one_its_variant(engine):
    vs = _variants(engine, specjit.divisibility(16, one=True), [1, 16, 3])
    assert len({v.key for v in vs}) == 3
    assert vs[0].name_expression == "fill<1>"
