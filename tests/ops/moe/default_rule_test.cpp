// The fused MoE's default tile rule without a GPU (ops/moe/default_rule.cpp, `default_moe_config`):
// the configuration a shape gets where no table entry serves it, sized by the target's SMs, and
// its e4m3 configurations compiled for sm_90a. The orientation's rules it must keep:
// config_test.cpp.
#include "engine_fixture.h"
#include "moe_test_support.h"

#include "ops/moe/config.h"
#include "runtime/engine.h"

#include <doctest/doctest.h>

#include <set>
#include <string>
#include <tuple>
#include <utility>

using namespace specjit;
using namespace specjit::runtime;
using namespace specjit::ops;
using namespace specjit::test;

TEST_CASE("the default tile rule fills the target's SMs: more SMs, more CTAs per expert") {
  // Mixtral at T = 1: two experts, GEMM1 224 CTAs of 64 columns, GEMM2 128.
  const MoeShape mixtral{8, 2, 4096, 14336, MoeDType::fp8};
  DeviceFacts h200 = DeviceFacts::for_target(Arch{9, 0, true});
  const MoeTileConfig on_h200 = default_moe_config(mixtral, 1, h200);
  CHECK(on_h200 == default_moe_config(mixtral, 1, Arch{9, 0, true}));
  CHECK(on_h200.gemm2.warpgroups == 2); // 128 CTAs do not fill 132 SMs: K split in two
  DeviceFacts small = h200;
  small.multiprocessors = 78;
  CHECK(default_moe_config(mixtral, 1, small).gemm2.warpgroups == 1);
}

// FP8 GEMM1 on e4m3 tensor cores over the whole K at every token count; from 5 to 16 tokens an
// expert (the mean) in blocks of twice the mean on the dynamic schedule; from 17 to 32 the normal
// orientation in blocks of 64; bf16 as before. Each e4m3 configuration compiles clean (no spills,
// no C75xx) on the reference and scaled shapes at every default bucket's bound.
TEST_CASE("the default rule takes e4m3 GEMM1 tiles for FP8 and blocks of twice the mean from 5 to "
          "16 tokens an expert") {
  const Arch sm90a{9, 0, true};
  const MoeShape qwen3{128, 8, 2048, 768, MoeDType::fp8};
  const MoeShape mixtral{8, 2, 4096, 14336, MoeDType::fp8};
  const MoeShape deepseek{256, 8, 7168, 256, MoeDType::fp8};
  CHECK(default_moe_config(qwen3, 256, sm90a).describe() ==
        "m32 g1[wgmma-swap n128 g1 s4 dyn e4m3w] g2[wgmma-swap n64 g1 s8 t2]"); // 16 an expert
  // FP8 swap-AB GEMM2 over a short K: the fewest tiles a CTA that give it 8 stages (DeepSeek's 2
  // a tile: 4, Qwen3's 6: 2), while the CTAs stay four an SM; Mixtral's long K takes none.
  CHECK(default_moe_config(deepseek, 256, sm90a).describe() ==
        "m16 g1[wgmma-swap n128 g1 s4 dyn e4m3w] g2[wgmma-swap n64 g1 s8 t4]");
  CHECK(default_moe_config(deepseek, 4, sm90a).gemm2.tiles == 4);
  CHECK(default_moe_config(deepseek, 1, sm90a).gemm2.tiles == 1); // 8 experts: 896 CTAs, 448 at t2
  // The op asks at its bucket's bound; T = 1 has its own bucket, so one token runs the tiles of
  // its 8 experts (DeepSeek GEMM2 t1, not the T <= 4 bucket's t4 for 32), and for Qwen3 none
  // at T = 4 (32 experts x 16 CTAs is under four an SM).
  auto one_token = resolve_moe_config(deepseek, 1, sm90a, nullptr);
  REQUIRE(static_cast<bool>(one_token));
  CHECK(one_token->bucket == 1);
  CHECK(one_token->config.gemm2.tiles == 1);
  CHECK(resolve_moe_config(deepseek, 2, sm90a, nullptr)->bucket == 4);
  // FP8 GEMM1 with at most half as many CTAs as SMs: K split across a cluster, the most that
  // fit the GPU at once (DeepSeek T = 1: 8 experts x 8 packed tiles x 2), 8 stages deep, as the
  // tuned T = 1 tiles; never where the CTAs fill the GPU (Qwen3 T = 1: 8 x 24) or at T = 4.
  // GEMM2's CTA there streams DeepSeek's 2 K stages only: 3 stages deep, not 8.
  CHECK(default_moe_config(deepseek, 1, sm90a).describe() ==
        "m8 g1[wgmma-swap n64 g2 s8 k2 e4m3w] g2[wgmma-swap n64 g1 s3]");
  CHECK(default_moe_config(deepseek, 4, sm90a).gemm2.stages == 8); // t4: 8 stages a CTA
  CHECK(default_moe_config(qwen3, 1, sm90a).gemm2.stages == 8);    // 6 stages a CTA
  DeviceFacts sms = DeviceFacts::for_target(sm90a);
  sms.multiprocessors = 264;
  CHECK(default_moe_config(deepseek, 1, sms).gemm1.split_k == 4);
  sms.multiprocessors = 78; // 64 CTAs are more than half of 78 SMs
  CHECK(default_moe_config(deepseek, 1, sms).gemm1.split_k == 1);
  CHECK(default_moe_config(deepseek, 4, sm90a).gemm1.split_k == 1);
  CHECK(default_moe_config(qwen3, 1, sm90a).gemm1.split_k == 1);
  CHECK(default_moe_config(mixtral, 1, sm90a).gemm1.split_k == 1);
  CHECK(default_moe_config(MoeShape{256, 8, 7168, 256, MoeDType::bf16}, 1, sm90a).gemm1.split_k ==
        1);
  // A K that does not split (57 stages of 128 bytes): split less, still on wgmma.
  const MoeTileConfig odd_k =
      default_moe_config(MoeShape{256, 8, 7296, 256, MoeDType::fp8}, 1, sm90a);
  CHECK(odd_k.gemm1.kernel == MoeGemmKernel::wgmma);
  CHECK(odd_k.gemm1.block_n == 64);
  CHECK(odd_k.gemm1.split_k == 1);
  CHECK(default_moe_config(qwen3, 4, sm90a).gemm2.tiles == 1);
  CHECK(default_moe_config(mixtral, 64, sm90a).gemm2.tiles == 1);
  CHECK(default_moe_config(MoeShape{256, 8, 7168, 256, MoeDType::bf16}, 256, sm90a).gemm2.tiles ==
        1);
  CHECK(default_moe_config(mixtral, 64, sm90a).block_m == 32);   // 16
  CHECK(default_moe_config(deepseek, 256, sm90a).block_m == 16); // 8
  CHECK(default_moe_config(deepseek, 160, sm90a).block_m == 16); // 5
  // 17-32: the normal orientation in blocks of 64, one warpgroup, e4m3 GEMM1, GEMM2 several
  // tiles a CTA over DeepSeek's short K.
  CHECK(default_moe_config(deepseek, 1024, sm90a).describe() ==
        "m64 g1[wgmma n128 g1 s4 e4m3w] g2[wgmma n128 g1 s4 t14]");
  CHECK(default_moe_config(deepseek, 544, sm90a).block_m == 64); // 17
  // Up to 4 FP8 tokens an expert: the next power of two, e4m3 GEMM1 on the fixed schedule.
  for (const auto& [shape, tokens] : {std::pair{qwen3, int64_t{64}}, std::pair{mixtral, int64_t{4}},
                                      std::pair{deepseek, int64_t{4}}}) {
    const MoeTileConfig c = default_moe_config(shape, tokens, sm90a);
    CHECK(c.block_m == 8);
    CHECK(c.gemm1.e4m3);
    CHECK(c.gemm1.whole_k);
    CHECK_FALSE(c.gemm1.dynamic());
  }
  CHECK(default_moe_config(deepseek, 4, sm90a).describe() ==
        "m8 g1[wgmma-swap n64 g2 s6 e4m3w] g2[wgmma-swap n64 g1 s8 t4]");
  // bf16: the next power of two, bf16 MMAs.
  for (const auto& [shape, tokens, block_m] :
       {std::tuple{MoeShape{128, 8, 2048, 768, MoeDType::bf16}, int64_t{256}, 16},
        std::tuple{MoeShape{256, 8, 7168, 256, MoeDType::bf16}, int64_t{1024}, 32}}) {
    const MoeTileConfig c = default_moe_config(shape, tokens, sm90a);
    CHECK(c.block_m == block_m);
    CHECK_FALSE(c.gemm1.e4m3);
    CHECK_FALSE(c.gemm1.dynamic());
  }
  TempDir dir;
  Engine engine(test::config_in(dir));
  std::set<std::string> compiled;
  for (const MoeShape& shape :
       {qwen3, mixtral, deepseek, MoeShape{16, 4, 4096, 14336, MoeDType::fp8},
        MoeShape{512, 16, 7168, 256, MoeDType::fp8}, MoeShape{64, 6, 2048, 1408, MoeDType::fp8}})
    for (int64_t tokens : default_moe_buckets()) {
      const MoeTileConfig c = default_moe_config(shape, tokens, sm90a);
      if (!c.gemm1.e4m3 || !compiled.insert(c.describe()).second)
        continue;
      INFO(shape.experts << " experts, T = " << tokens << ": " << c.describe());
      CHECK(check_wgmma_variants_compile(engine, shape, c) == 2);
    }
  CHECK(compiled.size() >= 2);
}
