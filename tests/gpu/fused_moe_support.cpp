// The fused MoE GPU cases' shared run (fused_moe_support.h): inputs, the op, and every check
// against the references.
#include "gpu/fused_moe_support.h"

#include "engine_fixture.h"
#include "gpu/gpu_test_support.h"
#include "reference/inv_rope_reference.h"
#include "reference/moe_reference.h"

#include "runtime/driver.h"
#include "support/error.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

namespace specjit::test::moe_gpu {

using namespace specjit::runtime;
using namespace specjit::ops;

namespace {
const int64_t k_token_counts[] = {1, 3, 16, 64, 200, 1024};

// SPECJIT_MOE_TOKENS (e.g. "1,16") narrows the token counts, for runs under compute-sanitizer,
// whose tools slow the kernels a hundredfold. Unset (as in CI and the logged runs), all of them.
bool tokens_selected(int64_t tokens) {
  const std::optional<std::string> only = env_list("SPECJIT_MOE_TOKENS");
  return !only || listed(*only, std::to_string(tokens));
}

uint64_t splitmix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Never-zero random values straight from bits: e4m3 with |v| in [1/8, 15]; bf16 with |v| in
// [2^-shift / 8, 2^-shift * 2). Filled in parallel (Mixtral's bf16 weights are 2.8 GB).
void fill_random(void* data, size_t count, bool fp8, int shift, uint64_t seed) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < threads; ++w)
    pool.emplace_back([=] {
      uint64_t state = seed * 1000003 + w;
      const size_t begin = count * w / threads, end = count * (w + 1) / threads;
      for (size_t i = begin; i < end; ++i) {
        const uint64_t r = splitmix(state);
        if (fp8) {
          const uint8_t exponent = static_cast<uint8_t>(4 + r % 7); // 2^-3 .. 2^3
          static_cast<uint8_t*>(data)[i] =
              static_cast<uint8_t>(((r >> 8) & 0x80) | (exponent << 3) | ((r >> 16) & 7));
        } else {
          const uint32_t exponent = static_cast<uint32_t>(127 - shift - 3 + r % 5);
          static_cast<uint16_t*>(data)[i] =
              static_cast<uint16_t>(((r >> 8) & 0x8000) | (exponent << 7) | ((r >> 16) & 0x7f));
        }
      }
    });
  for (std::thread& t : pool)
    t.join();
}

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);
}

// Whether `got` (sorted_ids of a moe_align) is the reference's grouping `want`: with `stable`,
// exactly (each expert's slots in increasing order, then its padding); otherwise each expert's
// segment as a set, its slots before its padding (the wgmma GEMMs skip a warpgroup whose first
// row is padding).
bool grouping_matches(const std::vector<int32_t>& got, const reference::MoeGrouping& want,
                      int block_m, int64_t slots, bool stable) {
  if (stable || got.size() != want.sorted_ids.size())
    return got == want.sorted_ids;
  for (size_t at = 0; at < got.size();) {
    size_t end = at;
    while (end < got.size() && want.expert_ids[end / block_m] == want.expert_ids[at / block_m])
      end += block_m;
    std::vector<int32_t> a(got.begin() + at, got.begin() + end);
    std::vector<int32_t> b(want.sorted_ids.begin() + at, want.sorted_ids.begin() + end);
    if (!std::is_partitioned(a.begin(), a.end(), [&](int32_t v) { return v < slots; }))
      return false;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b)
      return false;
    at = end;
  }
  return true;
}

} // namespace

// `handoff`, `order`: TunedMoeOptions::handoff, launch_order. `calls`: the layer runs that many
// times on the same workspace (poisoned before the first only), the output poisoned before each;
// the calls after the first reuse the first's routing and grouping (GEMMs and reduction only, as
// a benchmark runs them), so they count on every GEMM leaving its counters zero, which is
// checked. `table`: the configurations come from it (TunedMoeOptions::table), and T = 4000 runs
// too, so that its last bucket does. `weight_layout`: the layout of the weights the checked calls
// read (packed: the table's packed entries where it has them); the same tiles on the other layouts
// must give the same output bytes.
void run_model(const Model& model, Forced forced, MoeHandoff handoff, int calls,
               MoeLaunchOrder order, const MoeConfigTable* table, MoeWeightLayout weight_layout,
               MoeAccumulation accumulation) {
  const MoeShape& s = model.shape;
  const bool fp8 = s.dtype == MoeDType::fp8;
  const size_t elem = fp8 ? 1 : 2;
  TempDir dir;
  Engine engine(test::config_in(dir));
  require_ok(engine.make_context_current());

  // Weights, scaled so activations stay O(1): w13 ~ 1/sqrt(H), w2 ~ 1/sqrt(I).
  const size_t w13_count = s.experts * 2 * s.intermediate * s.hidden;
  const size_t w2_count = s.experts * s.hidden * s.intermediate;
  std::vector<uint8_t> w13(w13_count * elem), w2(w2_count * elem);
  const int shift1 = static_cast<int>(std::lround(std::log2(std::sqrt(double(s.hidden)))));
  const int shift2 = static_cast<int>(std::lround(std::log2(std::sqrt(double(s.intermediate)))));
  fill_random(w13.data(), w13_count, fp8, shift1, 11);
  fill_random(w2.data(), w2_count, fp8, shift2, 12);
  std::vector<float> w13_scale(s.experts), w2_scale(s.experts);
  for (int64_t e = 0; e < s.experts; ++e) {
    w13_scale[e] =
        static_cast<float>((0.75 + 0.5 * e / s.experts) / (8.0 * std::sqrt(double(s.hidden))));
    w2_scale[e] = static_cast<float>((0.75 + 0.5 * e / s.experts) /
                                     (8.0 * std::sqrt(double(s.intermediate))));
  }
  const float a1_scale = 1.0f / 16.0f, a2_scale = 1.0f / 64.0f;
  DeviceBuffer w13_d(w13.size()), w2_d(w2.size()), w13s_d(s.experts * 4), w2s_d(s.experts * 4),
      a1_d(4), a2_d(4);
  w13_d.upload(w13.data(), w13.size());
  w2_d.upload(w2.data(), w2.size());
  w13s_d.upload(w13_scale.data(), s.experts * 4);
  w2s_d.upload(w2_scale.data(), s.experts * 4);
  a1_d.upload(&a1_scale, 4);
  a2_d.upload(&a2_scale, 4);
  // The same weights packed (moe_pack_weights), byte for byte where moe_packed_weight_offset
  // puts them: every wgmma case below also runs on them and must give the same output bytes.
  DeviceBuffer w13p_d(w13.size()), w2p_d(w2.size());
  {
    const DType dtype = fp8 ? DType::e4m3 : DType::bf16;
    w13p_d.poison();
    w2p_d.poison();
    const TensorRef w13_t{w13_d.ptr(), dtype, {s.experts, 2 * s.intermediate, s.hidden}, {}},
        w2_t{w2_d.ptr(), dtype, {s.experts, s.hidden, s.intermediate}, {}};
    require_ok(moe_pack_weights(engine, w13_t, {w13p_d.ptr(), dtype, w13_t.shape, {}}, nullptr));
    require_ok(moe_pack_weights(engine, w2_t, {w2p_d.ptr(), dtype, w2_t.shape, {}}, nullptr));
    require_ok(drv().check(drv().cuCtxSynchronize(), "cuCtxSynchronize"));
    for (auto [host, packed_d, k_bytes] :
         {std::tuple{&w13, &w13p_d, s.hidden * static_cast<int64_t>(elem)},
          std::tuple{&w2, &w2p_d, s.intermediate * static_cast<int64_t>(elem)}}) {
      std::vector<uint8_t> packed(host->size());
      packed_d->download(packed.data(), packed.size());
      const int64_t rows = static_cast<int64_t>(host->size()) / k_bytes;
      int64_t misplaced = 0;
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t k = 0; k < k_bytes; k += 16)
          misplaced += std::memcmp(packed.data() + moe_packed_weight_offset(row, k, k_bytes),
                                   host->data() + row * k_bytes + k, 16) != 0;
      CHECK(misplaced == 0);
    }
  }

  reference::MoeWeights ref;
  ref.experts = s.experts;
  ref.top_k = s.top_k;
  ref.hidden = s.hidden;
  ref.intermediate = s.intermediate;
  ref.fp8 = fp8;
  ref.w13 = w13.data();
  ref.w2 = w2.data();
  ref.a1_scale = a1_scale;
  ref.a2_scale = a2_scale;
  ref.w13_scale = w13_scale.data();
  ref.w2_scale = w2_scale.data();

  std::vector<int64_t> token_counts(std::begin(k_token_counts), std::end(k_token_counts));
  if (table != nullptr)
    token_counts.push_back(4000);
  for (int64_t tokens : token_counts) {
    if (!tokens_selected(tokens))
      continue;
    INFO(std::string(model.name) << " " << moe_dtype_name(s.dtype).str() << " T=" << tokens);
    std::vector<uint8_t> x(tokens * s.hidden * elem);
    fill_random(x.data(), tokens * s.hidden, fp8, 0, 100 + tokens);
    std::vector<float> logits(tokens * s.experts);
    uint64_t state = 7 + tokens;
    for (float& l : logits)
      l = static_cast<float>(splitmix(state) >> 40) * 0x1.0p-24f * 6.0f - 3.0f;

    const MoeWorkspaceLayout layout = moe_workspace_layout(s, tokens);
    DeviceBuffer x_d(x.size()), logits_d(logits.size() * 4), out_d(tokens * s.hidden * 2),
        work_d(layout.bytes);
    x_d.upload(x.data(), x.size());
    logits_d.upload(logits.data(), logits.size() * 4);
    work_d.poison();

    FusedMoeTensors t;
    const DType dtype = fp8 ? DType::e4m3 : DType::bf16;
    t.hidden = {x_d.ptr(), dtype, {tokens, s.hidden}, {}};
    t.router_logits = {logits_d.ptr(), DType::f32, {tokens, s.experts}, {}};
    const bool packed = weight_layout == MoeWeightLayout::packed;
    t.w13 = {
        packed ? w13p_d.ptr() : w13_d.ptr(), dtype, {s.experts, 2 * s.intermediate, s.hidden}, {}};
    t.w2 = {packed ? w2p_d.ptr() : w2_d.ptr(), dtype, {s.experts, s.hidden, s.intermediate}, {}};
    t.weight_layout = weight_layout;
    t.a1_scale = {a1_d.ptr(), DType::f32, {1}, {}};
    t.w13_scale = {w13s_d.ptr(), DType::f32, {s.experts}, {}};
    t.a2_scale = {a2_d.ptr(), DType::f32, {1}, {}};
    t.w2_scale = {w2s_d.ptr(), DType::f32, {s.experts}, {}};
    t.out = {out_d.ptr(), DType::bf16, {tokens, s.hidden}, {}};
    t.workspace = {work_d.ptr(), DType::u8, {static_cast<int64_t>(layout.bytes)}, {}};
    TunedMoeOptions options;
    options.config = forced_config(s, tokens, forced);
    options.handoff = handoff;
    options.launch_order = order;
    options.table = table;
    options.accumulation = accumulation;
    for (int call = 0; call < calls; ++call) {
      out_d.poison();
      options.stages =
          call == 0 ? moe_stage_all : moe_stage_gemm1 | moe_stage_gemm2 | moe_stage_reduce;
      require_ok(fused_moe(engine, s, t, options, nullptr));
      require_ok(drv().check(drv().cuCtxSynchronize(), "cuCtxSynchronize"));
      if (calls > 1) {
        std::vector<int32_t> counters(layout.counter_ints);
        work_d.download(counters.data(), counters.size() * 4, layout.stream_k);
        CHECK(std::count(counters.begin(), counters.end(), 0) == layout.counter_ints);
      }
    }

    // Routing: ids exactly, weights to float rounding.
    const int64_t slots = tokens * s.top_k;
    reference::MoeRouting routing =
        reference::moe_route(logits.data(), tokens, s.experts, s.top_k, true);
    std::vector<int32_t> ids(slots);
    std::vector<float> weights(slots);
    work_d.download(ids.data(), slots * 4, layout.topk_ids);
    work_d.download(weights.data(), slots * 4, layout.topk_weights);
    CHECK(ids == routing.ids);
    float worst_weight = 0;
    for (int64_t i = 0; i < slots; ++i)
      worst_weight = std::max(worst_weight, std::fabs(weights[i] - routing.weights[i]));
    CHECK(worst_weight < 1e-5f);

    // Grouping, at the block size the op chose for this T.
    auto resolved = resolve_moe_config(s, tokens, engine.device_facts(), table, weight_layout);
    REQUIRE(static_cast<bool>(resolved));
    if (options.config)
      resolved->config = *options.config;
    const int block_m = resolved->config.block_m;
    reference::MoeGrouping grouping = reference::moe_align(routing.ids, s.experts, block_m);
    int32_t padded = 0;
    work_d.download(&padded, 4, layout.num_post_padded);
    REQUIRE(padded == grouping.num_post_padded);
    std::vector<int32_t> sorted(padded), experts_of_block(padded / block_m);
    work_d.download(sorted.data(), padded * 4, layout.sorted_ids);
    work_d.download(experts_of_block.data(), experts_of_block.size() * 4, layout.expert_ids);
    CHECK(experts_of_block == grouping.expert_ids);
    // Each expert's segment: its slots, then its padding; in the reference's (increasing) order
    // when the call asks for a stable grouping (stream-K).
    const bool stable = resolved->config.gemm1.stream_k() || resolved->config.gemm2.stream_k();
    CHECK(grouping_matches(sorted, grouping, block_m, tokens * s.top_k, stable));

    // Output: no poison left anywhere, and a sample of rows against the reference.
    std::vector<uint16_t> out(tokens * s.hidden);
    out_d.download(out.data(), out.size() * 2);
    const uint16_t poison = static_cast<uint16_t>(k_poison | (k_poison << 8));
    CHECK(std::count(out.begin(), out.end(), poison) == 0);
    {
      // The same call again gives the same bytes, whatever the schedule (stream-K's split
      // tiles included: their pieces meet in order of K, on a stable grouping).
      out_d.poison();
      options.stages = moe_stage_all;
      require_ok(fused_moe(engine, s, t, options, nullptr));
      require_ok(drv().check(drv().cuCtxSynchronize(), "cuCtxSynchronize"));
      std::vector<uint16_t> again(out.size());
      out_d.download(again.data(), again.size() * 2);
      CHECK(again == out);
      // And the same tiles on the other layouts: row-major, packed read by bulk copies and
      // packed through a tensor map; the same bytes where wgmma tiles read packed weights,
      // refused (naming them) where a tile cannot.
      const MoeTileConfig& c = resolved->config;
      const bool readable = moe_tile_reads_packed(1, c.gemm1) && moe_tile_reads_packed(2, c.gemm2);
      for (auto [layout, reads] :
           {std::pair{MoeWeightLayout::row_major, MoePackedReads::automatic},
            std::pair{MoeWeightLayout::packed, MoePackedReads::bulk},
            std::pair{MoeWeightLayout::packed, MoePackedReads::tensor_map}}) {
        const bool other_packed = layout == MoeWeightLayout::packed;
        if (!packed && !other_packed)
          continue;
        INFO("the same tiles on " << std::string(!other_packed ? "row-major weights"
                                                 : reads == MoePackedReads::bulk
                                                     ? "packed weights, bulk copies"
                                                     : "packed weights, tensor map"));
        FusedMoeTensors other_t = t;
        other_t.w13.data = other_packed ? w13p_d.ptr() : w13_d.ptr();
        other_t.w2.data = other_packed ? w2p_d.ptr() : w2_d.ptr();
        other_t.weight_layout = layout;
        TunedMoeOptions other_options = options;
        other_options.config = c;
        other_options.packed_reads = reads;
        out_d.poison();
        llvm::Error err = fused_moe(engine, s, other_t, other_options, nullptr);
        if (readable || !other_packed) {
          require_ok(std::move(err));
          require_ok(drv().check(drv().cuCtxSynchronize(), "cuCtxSynchronize"));
          out_d.download(again.data(), again.size() * 2);
          CHECK(again == out);
        } else {
          const bool failed = static_cast<bool>(err);
          REQUIRE(failed);
          CHECK(summarize(std::move(err)).message.find("packed weights") != std::string::npos);
        }
      }
    }
    std::vector<int64_t> sample;
    const int64_t count = std::min(tokens, model.sampled_tokens);
    for (int64_t i = 0; i < count; ++i)
      sample.push_back(count == 1 ? 0 : i * (tokens - 1) / (count - 1));
    std::vector<float> got(count * s.hidden), emulated(count * s.hidden), exact(count * s.hidden);
    // FP8 GEMM1 on e4m3 tensor cores, or GEMM2 over the whole K: the accuracy rule against the
    // layer's float64 truth. Exact accumulation runs neither: the emulating reference's bound.
    const MoeTileConfig& run = resolved->config;
    const bool e4m3 =
        fp8 && accumulation == MoeAccumulation::e4m3 && (run.gemm1.e4m3 || run.gemm2.whole_k);
    std::vector<float> truth(e4m3 ? count * s.hidden : 0);
    std::vector<std::thread> pool;
    for (int64_t i = 0; i < count; ++i)
      pool.emplace_back([&, i] {
        const int64_t tok = sample[i];
        const void* row = x.data() + tok * s.hidden * elem;
        reference::moe_token_emulated(ref, row, &routing.ids[tok * s.top_k],
                                      &routing.weights[tok * s.top_k], &emulated[i * s.hidden]);
        reference::moe_token_fp32(ref, row, &routing.ids[tok * s.top_k],
                                  &routing.weights[tok * s.top_k], &exact[i * s.hidden]);
        if (e4m3) {
          std::vector<double> row_truth(s.hidden);
          reference::moe_token_truth(ref, row, &routing.ids[tok * s.top_k],
                                     &routing.weights[tok * s.top_k], row_truth.data());
          std::copy(row_truth.begin(), row_truth.end(), truth.begin() + i * s.hidden);
        }
        for (int64_t h = 0; h < s.hidden; ++h)
          got[i * s.hidden + h] = reference::bf16_to_float(out[tok * s.hidden + h]);
      });
    for (std::thread& thread : pool)
      thread.join();
    const double vs_emulated = relative_error(got, emulated);
    const double vs_fp32 = relative_error(got, exact);
    MESSAGE(std::string(model.name)
            << " " << moe_dtype_name(s.dtype).str() << " T=" << tokens << " ("
            << resolved->config.describe()
            << (accumulation == MoeAccumulation::exact ? ", exact accumulation" : "")
            << "): rel. error vs emulated " << vs_emulated << ", vs fp32 " << vs_fp32 << " over "
            << count << " rows");
    if (e4m3) {
      // No larger than 1.04 x the error of the re-quantizing reference, as the peer measured
      // (../shared/KERNELS.md: its error against truth is 1.004-1.018 x the emulating one's).
      const double vs_truth = relative_error(got, truth);
      const double emulated_vs_truth = relative_error(emulated, truth);
      MESSAGE("  e4m3 accumulation: vs truth " << vs_truth << ", the emulating reference's "
                                               << emulated_vs_truth << " (ratio "
                                               << vs_truth / emulated_vs_truth << ")");
      CHECK(vs_truth <= 1.04 * emulated_vs_truth);
      // And close to the emulating reference: promoted once a stage 2e-2; either GEMM over the
      // whole K as the peer (1.15-1.66e-2 from it, ../shared/KERNELS.md) 3e-2.
      CHECK(vs_emulated <= (run.gemm1.whole_k || run.gemm2.whole_k ? 3e-2 : 2e-2));
    } else if (fp8)
      CHECK(vs_emulated <= 3e-3);
    else
      CHECK(vs_fp32 <= 1e-2);
  }
}

// moe_align alone, against the reference's grouping, stable and not, the stable one at every
// chunking of its per-chunk counters (32 chunks up to 256 experts, 16 up to 512, 8 up to 1024),
// with ids out of range (dropped, unchecked) and a skewed routing whose first expert takes about
// half of the slots; twice on poisoned outputs (stable: the same bytes).
void check_align(Engine& engine, int64_t experts, int64_t tokens, int64_t top_k, int block_m,
                 bool stable) {
  INFO("experts " << experts << " T=" << tokens << " top_k " << top_k << " block_m " << block_m
                  << (stable ? " stable" : ""));
  const int64_t slots = tokens * top_k;
  std::vector<int32_t> ids(slots);
  uint64_t state = 1000 + experts + tokens;
  for (int32_t& id : ids) {
    const uint64_t r = splitmix(state);
    id = r % 97 == 0  ? static_cast<int32_t>(experts + r % 5) // out of range: dropped
         : r % 2 == 0 ? 0
                      : static_cast<int32_t>((r >> 8) % experts);
  }
  const reference::MoeGrouping want = reference::moe_align(ids, experts, block_m);
  const int64_t max_padded = moe_max_padded(slots, experts, block_m);
  const int64_t max_blocks = (max_padded + block_m - 1) / block_m;
  DeviceBuffer ids_d(slots * 4), sorted_d(max_padded * 4), experts_d(max_blocks * 4), padded_d(4);
  ids_d.upload(ids.data());
  std::vector<int32_t> first;
  for (int call = 0; call < 2; ++call) {
    sorted_d.poison();
    experts_d.poison();
    padded_d.poison();
    require_ok(moe_align(engine, {ids_d.ptr(), DType::i32, {tokens, top_k}, {}}, experts, block_m,
                         {sorted_d.ptr(), DType::i32, {max_padded}, {}},
                         {experts_d.ptr(), DType::i32, {max_blocks}, {}},
                         {padded_d.ptr(), DType::i32, {1}, {}}, false, nullptr, {},
                         stable ? MoeSlotOrder::stable : MoeSlotOrder::any));
    require_ok(drv().check(drv().cuCtxSynchronize(), "cuCtxSynchronize"));
    int32_t padded = -1;
    padded_d.download(&padded, 4);
    REQUIRE(padded == want.num_post_padded);
    std::vector<int32_t> sorted(padded), of_block(padded / block_m);
    sorted_d.download(sorted.data(), padded * 4);
    experts_d.download(of_block.data(), of_block.size() * 4);
    CHECK(grouping_matches(sorted, want, block_m, slots, stable));
    CHECK(of_block == want.expert_ids);
    if (call == 0)
      first = sorted;
    else if (stable)
      CHECK(sorted == first);
  }
}

const Model k_qwen{"Qwen3-30B-A3B", {128, 8, 2048, 768, MoeDType::fp8}, 48};
const Model k_mixtral{"Mixtral-8x7B", {8, 2, 4096, 14336, MoeDType::fp8}, 12};
const Model k_deepseek{"DeepSeek-V3-TP8", {256, 8, 7168, 256, MoeDType::fp8}, 48};

Model as_bf16(Model model) {
  model.shape.dtype = MoeDType::bf16;
  return model;
}

} // namespace specjit::test::moe_gpu
