#include "runtime/ops/fused_moe.h"

#include "runtime/driver.h"
#include "runtime/tensor_map.h"

#include "support/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>

namespace specjit::ops {

using runtime::DType;
using runtime::KernelDef;
using runtime::ParamDef;
using runtime::ParamEncoding;
using runtime::Policy;
using runtime::TensorRef;

namespace {

constexpr llvm::StringLiteral k_op = "fused_moe";
constexpr int k_route_warps = 8;     // kernels_src/moe/route.cu
constexpr int k_align_threads = 1024; // kernels_src/moe/align.cu
constexpr int k_max_block_m = 256;
constexpr int k_min_block_m = 8; // sizes expert_ids in the workspace
constexpr int64_t k_max_grid_y = 65535;

ParamDef raw(const char* name) { return {name, Policy::exact(), ParamEncoding::raw}; }
ParamDef tokens() { return {"num_tokens", Policy::dynamic(), ParamEncoding::spec_word}; }

size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }
int64_t element_bytes(MoeDType dtype) { return dtype == MoeDType::fp8 ? 1 : 2; }
DType tensor_dtype(MoeDType dtype) { return dtype == MoeDType::fp8 ? DType::e4m3 : DType::bf16; }

enum KernelIndex {
  k_route,
  k_align,
  k_gemm1_fp8,
  k_gemm1_bf16,
  k_gemm2_fp8,
  k_gemm2_bf16,
  k_reduce,
  k_wgmma1_fp8,
  k_wgmma1_bf16,
  k_wgmma2_fp8,
  k_wgmma2_bf16,
  k_kernel_count
};

// Kernel ids per engine, remembered per thread (see inv_rope_fp8_quant.cpp's register_kernel).
llvm::Expected<runtime::KernelId> kernel_id(runtime::Engine& engine, KernelIndex index) {
  thread_local uint64_t cached_engine = 0;
  thread_local std::array<runtime::KernelId, k_kernel_count> ids;
  if (cached_engine != engine.instance_id()) {
    static const std::vector<KernelDef> defs = moe_kernels();
    for (size_t i = 0; i < defs.size(); ++i) {
      auto id = engine.add_kernel(defs[i]);
      if (!id)
        return id.takeError();
      ids[i] = *id;
    }
    cached_engine = engine.instance_id();
  }
  return ids[index];
}

KernelIndex gemm_index(int gemm, MoeDType dtype, MoeGemmKernel kernel) {
  const bool fp8 = dtype == MoeDType::fp8;
  if (kernel == MoeGemmKernel::wgmma) {
    if (gemm == 1)
      return fp8 ? k_wgmma1_fp8 : k_wgmma1_bf16;
    return fp8 ? k_wgmma2_fp8 : k_wgmma2_bf16;
  }
  if (gemm == 1)
    return fp8 ? k_gemm1_fp8 : k_gemm1_bf16;
  return fp8 ? k_gemm2_fp8 : k_gemm2_bf16;
}

// The template values of a GEMM variant (see moe_gemm_kernel for their names).
std::vector<int64_t> gemm_values(const MoeShape& shape, int gemm, int block_m, const GemmTile& t,
                                 int64_t num_tokens) {
  const int64_t n = gemm == 1 ? shape.intermediate : shape.hidden;
  const int64_t k = gemm == 1 ? shape.hidden : shape.intermediate;
  if (t.kernel == MoeGemmKernel::wgmma)
    return {n, k, t.swap_ab ? 1 : 0, block_m, t.block_n, t.warpgroups, t.stages, num_tokens};
  return {n, k, block_m, t.block_n, t.warps_m, t.warps_n, t.stages, num_tokens};
}

llvm::Error launch_variant(runtime::Engine& engine, KernelIndex index,
                           llvm::ArrayRef<int64_t> values, const runtime::LaunchConfig& config,
                           auto... args) {
  auto id = kernel_id(engine, index);
  if (!id)
    return id.takeError();
  auto variant = engine.get(*id, values);
  if (!variant)
    return variant.takeError();
  return engine.launch(**variant, config, args...);
}

llvm::Error expect(llvm::StringRef argument, const TensorRef& tensor, DType dtype,
                   llvm::ArrayRef<int64_t> shape, size_t alignment) {
  return runtime::expect_tensor(k_op, argument, tensor, dtype, shape, alignment);
}

// A 1-D tensor of at least `minimum` elements.
llvm::Error expect_capacity(llvm::StringRef argument, const TensorRef& tensor, DType dtype,
                            int64_t minimum, size_t alignment) {
  if (auto err = expect(argument, tensor, dtype, {-1}, alignment))
    return err;
  if (tensor.shape[0] < minimum)
    return make_error(Errc::invalid_argument, "{}: {}: needs at least {} elements, got {}",
                      k_op.str(), argument.str(), minimum, tensor.describe());
  return llvm::Error::success();
}

llvm::Error validate(const MoeShape& s, const FusedMoeTensors& t) {
  if (auto err = check_moe_shape(s))
    return err;
  const DType dtype = tensor_dtype(s.dtype);
  if (auto err = expect("hidden", t.hidden, dtype, {-1, s.hidden}, 16))
    return err;
  const int64_t tokens = t.hidden.shape[0];
  if (tokens * s.top_k >= (int64_t{1} << 31) / 2)
    return make_error(Errc::invalid_argument, "{}: {} tokens x top-{} is too many slots",
                      k_op.str(), tokens, s.top_k);
  if (auto err = expect("router_logits", t.router_logits, DType::f32, {tokens, s.experts}, 4))
    return err;
  if (auto err = expect("w13", t.w13, dtype, {s.experts, 2 * s.intermediate, s.hidden}, 16))
    return err;
  if (auto err = expect("w2", t.w2, dtype, {s.experts, s.hidden, s.intermediate}, 16))
    return err;
  if (s.dtype == MoeDType::fp8) {
    if (auto err = expect("a1_scale", t.a1_scale, DType::f32, {1}, 4))
      return err;
    if (auto err = expect("w13_scale", t.w13_scale, DType::f32, {s.experts}, 4))
      return err;
    if (auto err = expect("a2_scale", t.a2_scale, DType::f32, {1}, 4))
      return err;
    if (auto err = expect("w2_scale", t.w2_scale, DType::f32, {s.experts}, 4))
      return err;
  }
  if (auto err = expect("out", t.out, DType::bf16, {tokens, s.hidden}, 16))
    return err;
  return expect_capacity("workspace", t.workspace, DType::u8,
                         static_cast<int64_t>(moe_workspace_layout(s, tokens).bytes), 256);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace

KernelDef moe_route_kernel() {
  return {"moe_route", "moe/route.cu", "specjit_kernels::moe_route",
          {raw("experts"), raw("top_k"), raw("renormalize"), tokens()}, {}};
}

KernelDef moe_align_kernel() {
  return {"moe_align", "moe/align.cu", "specjit_kernels::moe_align",
          {raw("experts"), raw("block_m"), tokens()}, {}};
}

KernelDef moe_gemm_kernel(int gemm, MoeDType dtype, MoeGemmKernel kernel) {
  if (kernel == MoeGemmKernel::wgmma) {
    std::string name = fmt::format("moe_wgmma{}_{}", gemm, moe_dtype_name(dtype).str());
    return {name,
            "moe/gemm_wgmma.cu",
            "specjit_kernels::" + name,
            {raw("n"), raw("k"), raw("swap_ab"), raw("block_m"), raw("block_n"), raw("warpgroups"),
             raw("stages"), tokens()},
            {}};
  }
  std::string name = fmt::format("moe_gemm{}_{}", gemm, moe_dtype_name(dtype).str());
  return {name,
          "moe/gemm.cu",
          "specjit_kernels::" + name,
          {raw("n"), raw("k"), raw("block_m"), raw("block_n"), raw("warps_m"), raw("warps_n"),
           raw("stages"), tokens()},
          {}};
}

KernelDef moe_reduce_kernel() {
  return {"moe_reduce", "moe/reduce.cu", "specjit_kernels::moe_reduce", {raw("top_k"), tokens()},
          {}};
}

std::vector<KernelDef> moe_kernels() {
  return {moe_route_kernel(),
          moe_align_kernel(),
          moe_gemm_kernel(1, MoeDType::fp8),
          moe_gemm_kernel(1, MoeDType::bf16),
          moe_gemm_kernel(2, MoeDType::fp8),
          moe_gemm_kernel(2, MoeDType::bf16),
          moe_reduce_kernel(),
          moe_gemm_kernel(1, MoeDType::fp8, MoeGemmKernel::wgmma),
          moe_gemm_kernel(1, MoeDType::bf16, MoeGemmKernel::wgmma),
          moe_gemm_kernel(2, MoeDType::fp8, MoeGemmKernel::wgmma),
          moe_gemm_kernel(2, MoeDType::bf16, MoeGemmKernel::wgmma)};
}

llvm::Error check_moe_shape(const MoeShape& s) {
  if (s.experts < 1 || s.experts > k_align_threads)
    return make_error(Errc::invalid_argument, "{}: experts must be in [1, 1024], got {}",
                      k_op.str(), s.experts);
  if (s.top_k < 1 || s.top_k > std::min<int64_t>(s.experts, 32))
    return make_error(Errc::invalid_argument, "{}: top_k must be in [1, min(experts, 32)], got {}",
                      k_op.str(), s.top_k);
  const int64_t values_per_row = 128 / element_bytes(s.dtype);
  for (auto [name, value] : {std::pair<const char*, int64_t>{"hidden", s.hidden},
                             {"intermediate", s.intermediate}})
    if (value < values_per_row || value % values_per_row != 0 || value > (1 << 20))
      return make_error(Errc::invalid_argument,
                        "{}: {} must be a positive multiple of {} ({}), got {}", k_op.str(), name,
                        values_per_row, moe_dtype_name(s.dtype).str(), value);
  return llvm::Error::success();
}

int64_t moe_max_padded(int64_t slots, int64_t experts, int block_m) {
  return slots + std::min(experts, slots) * (block_m - 1);
}

MoeWorkspaceLayout moe_workspace_layout(const MoeShape& s, int64_t num_tokens) {
  MoeWorkspaceLayout l;
  const int64_t slots = num_tokens * s.top_k;
  l.max_padded = moe_max_padded(slots, s.experts, k_max_block_m);
  size_t at = 0;
  auto take = [&](size_t& field, size_t bytes) {
    field = at;
    at += align256(bytes);
  };
  take(l.topk_weights, slots * 4);
  take(l.topk_ids, slots * 4);
  take(l.sorted_ids, l.max_padded * 4);
  take(l.expert_ids, ceil_div(l.max_padded, k_min_block_m) * 4);
  take(l.num_post_padded, 4);
  take(l.intermediate, slots * s.intermediate * element_bytes(s.dtype));
  take(l.slot_out, slots * s.hidden * 2);
  l.bytes = at;
  return l;
}

llvm::Error moe_route(runtime::Engine& engine, const TensorRef& logits,
                      const TensorRef& topk_weights, const TensorRef& topk_ids, bool renormalize,
                      CUstream stream) {
  if (auto err = expect("router_logits", logits, DType::f32, {-1, -1}, 4))
    return err;
  const int64_t tokens = logits.shape[0], experts = logits.shape[1];
  if (auto err = expect("topk_weights", topk_weights, DType::f32, {tokens, -1}, 4))
    return err;
  const int64_t top_k = topk_weights.shape[1];
  if (auto err = check_moe_shape({experts, top_k, 128, 128, MoeDType::fp8}))
    return err;
  if (auto err = expect("topk_ids", topk_ids, DType::i32, {tokens, top_k}, 4))
    return err;
  if (tokens == 0)
    return llvm::Error::success();
  runtime::LaunchConfig config;
  config.grid[0] = static_cast<unsigned>(ceil_div(tokens, k_route_warps));
  config.block[0] = k_route_warps * 32;
  config.stream = stream;
  return launch_variant(engine, k_route, {experts, top_k, renormalize ? 1 : 0, tokens}, config,
                        logits.data, topk_weights.data, topk_ids.data, static_cast<int>(tokens));
}

static llvm::Error check_ids_on_host(runtime::Engine& engine, const TensorRef& topk_ids,
                                     int64_t experts, CUstream stream) {
  auto drv = runtime::driver();
  if (!drv)
    return drv.takeError();
  if (auto err = engine.make_context_current())
    return err;
  if (auto err = drv->check(drv->cuStreamSynchronize(stream), "cuStreamSynchronize"))
    return err;
  std::vector<int32_t> host(static_cast<size_t>(topk_ids.numel()));
  if (auto err = drv->check(drv->cuMemcpyDtoH(host.data(), topk_ids.data, host.size() * 4),
                            "cuMemcpyDtoH"))
    return err;
  for (size_t i = 0; i < host.size(); ++i)
    if (host[i] < 0 || host[i] >= experts)
      return make_error(Errc::invalid_argument, "{}: topk_ids: topk_ids[{}] = {} is outside [0, {})",
                        k_op.str(), i, host[i], experts);
  return llvm::Error::success();
}

llvm::Error moe_align(runtime::Engine& engine, const TensorRef& topk_ids, int64_t experts,
                      int block_m, const TensorRef& sorted_ids, const TensorRef& expert_ids,
                      const TensorRef& num_post_padded, bool checked, CUstream stream) {
  if (auto err = expect("topk_ids", topk_ids, DType::i32, {-1, -1}, 4))
    return err;
  const int64_t tokens = topk_ids.shape[0], top_k = topk_ids.shape[1];
  if (auto err = check_moe_shape({experts, top_k, 128, 128, MoeDType::fp8}))
    return err;
  if (block_m < 1 || block_m > k_max_block_m)
    return make_error(Errc::invalid_argument, "{}: block_m must be in [1, 256], got {}",
                      k_op.str(), block_m);
  const int64_t max_padded = moe_max_padded(tokens * top_k, experts, block_m);
  if (auto err = expect_capacity("sorted_ids", sorted_ids, DType::i32, max_padded, 4))
    return err;
  if (auto err = expect_capacity("expert_ids", expert_ids, DType::i32,
                                 ceil_div(max_padded, block_m), 4))
    return err;
  if (auto err = expect("num_post_padded", num_post_padded, DType::i32, {1}, 4))
    return err;
  if (checked)
    if (auto err = check_ids_on_host(engine, topk_ids, experts, stream))
      return err;
  runtime::LaunchConfig config;
  config.block[0] = k_align_threads;
  config.stream = stream;
  return launch_variant(engine, k_align, {experts, block_m, tokens}, config, topk_ids.data,
                        sorted_ids.data, expert_ids.data, num_post_padded.data,
                        static_cast<int>(tokens), static_cast<int>(top_k));
}

llvm::Error fused_moe(runtime::Engine& engine, const MoeShape& s, const FusedMoeTensors& t,
                      const FusedMoeOptions& options, CUstream stream) {
  if (auto err = validate(s, t))
    return err;
  const int64_t tokens = t.hidden.shape[0];
  if (tokens == 0)
    return llvm::Error::success();
  MoeTileConfig config;
  if (options.config) {
    config = *options.config;
    if (auto err = check_moe_config(s, config, engine.arch()))
      return err;
  } else {
    auto resolved = resolve_moe_config(s, tokens, engine.arch(), options.table);
    if (!resolved)
      return resolved.takeError();
    config = resolved->config;
  }
  const int64_t slots = tokens * s.top_k;
  const int64_t blocks = ceil_div(moe_max_padded(slots, s.experts, config.block_m), config.block_m);
  if (blocks > k_max_grid_y)
    return make_error(Errc::invalid_argument, "{}: {} slots need {} blocks of {} (at most {})",
                      k_op.str(), slots, blocks, config.block_m, k_max_grid_y);

  const MoeWorkspaceLayout l = moe_workspace_layout(s, tokens);
  const CUdeviceptr w = t.workspace.data;
  const CUdeviceptr topk_weights = w + l.topk_weights, topk_ids = w + l.topk_ids,
                    sorted = w + l.sorted_ids, expert_ids = w + l.expert_ids,
                    npp = w + l.num_post_padded, inter = w + l.intermediate,
                    slot_out = w + l.slot_out;
  const int n_tokens = static_cast<int>(tokens), top_k = static_cast<int>(s.top_k);

  if (options.stages & moe_stage_route)
    if (auto err = moe_route(engine, t.router_logits, {topk_weights, DType::f32, {tokens, s.top_k}, {}},
                             {topk_ids, DType::i32, {tokens, s.top_k}, {}}, options.renormalize,
                             stream))
      return err;
  if (options.stages & moe_stage_align)
    if (auto err = moe_align(engine, {topk_ids, DType::i32, {tokens, s.top_k}, {}}, s.experts,
                             config.block_m, {sorted, DType::i32, {l.max_padded}, {}},
                             {expert_ids, DType::i32, {ceil_div(l.max_padded, k_min_block_m)}, {}},
                             {npp, DType::i32, {1}, {}}, false, stream))
      return err;
  for (int gemm = 1; gemm <= 2; ++gemm) {
    if (!(options.stages & (gemm == 1 ? moe_stage_gemm1 : moe_stage_gemm2)))
      continue;
    const GemmTile& tile = gemm == 1 ? config.gemm1 : config.gemm2;
    runtime::LaunchConfig launch;
    const int64_t rows = gemm == 1 ? 2 * s.intermediate : s.hidden;
    launch.grid[0] = static_cast<unsigned>(rows / tile.block_n);
    launch.grid[1] = static_cast<unsigned>(blocks);
    launch.block[0] = tile.threads();
    launch.shared_bytes = moe_gemm_shared_bytes(config.block_m, tile, s.dtype);
    launch.stream = stream;
    const auto values = gemm_values(s, gemm, config.block_m, tile, tokens);
    const KernelIndex index = gemm_index(gemm, s.dtype, tile.kernel);
    llvm::Error err = llvm::Error::success();
    if (tile.kernel == MoeGemmKernel::wgmma) {
      // 1-D grid in groups of 8 token blocks (kernels_src/moe/gemm_wgmma.cu, moe_wgmma_setup).
      const int64_t tiles = rows / tile.block_n;
      launch.grid[0] = static_cast<unsigned>(ceil_div(blocks, 8) * 8 * tiles);
      launch.grid[1] = 1;
      launch.programmatic_serialization = gemm == 2 && options.programmatic_launch;
      // Weights through TMA: rows of K bytes per expert, boxes of 128 bytes x the tile's rows
      // (GEMM1: its gate half and its up half, loaded separately).
      const int64_t k_bytes = (gemm == 1 ? s.hidden : s.intermediate) * element_bytes(s.dtype);
      const uint32_t box_rows = static_cast<uint32_t>(gemm == 1 ? tile.block_n / 2 : tile.block_n);
      auto map = runtime::tensor_map_u8_3d(
          gemm == 1 ? t.w13.data : t.w2.data,
          {static_cast<uint64_t>(k_bytes), static_cast<uint64_t>(rows),
           static_cast<uint64_t>(s.experts)},
          {128, box_rows, 1});
      if (!map)
        return map.takeError();
      err = gemm == 1 ? launch_variant(engine, index, values, launch, *map, t.hidden.data, sorted,
                                       expert_ids, npp, t.a1_scale.data, t.w13_scale.data,
                                       t.a2_scale.data, inter, n_tokens, top_k)
                      : launch_variant(engine, index, values, launch, *map, inter, sorted,
                                       expert_ids, npp, t.a2_scale.data, t.w2_scale.data,
                                       topk_weights, slot_out, n_tokens, top_k);
    } else {
      err = gemm == 1 ? launch_variant(engine, index, values, launch, t.hidden.data, t.w13.data,
                                       sorted, expert_ids, npp, t.a1_scale.data,
                                       t.w13_scale.data, t.a2_scale.data, inter, n_tokens, top_k)
                      : launch_variant(engine, index, values, launch, inter, t.w2.data, sorted,
                                       expert_ids, npp, t.a2_scale.data, t.w2_scale.data,
                                       topk_weights, slot_out, n_tokens, top_k);
    }
    if (err)
      return err;
  }
  if (options.stages & moe_stage_reduce) {
    runtime::LaunchConfig launch;
    launch.grid[0] =
        static_cast<unsigned>(std::min<int64_t>(ceil_div(tokens * s.hidden / 8, 256), 132 * 16));
    launch.block[0] = 256;
    launch.stream = stream;
    if (auto err = launch_variant(engine, k_reduce, {s.top_k, tokens}, launch, slot_out,
                                  t.out.data, n_tokens, static_cast<int>(s.hidden)))
      return err;
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<runtime::VariantRequest>>
fused_moe_variants(const MoeShape& s, const FusedMoeOptions& options, const Arch& arch,
                   llvm::ArrayRef<int64_t> token_counts) {
  if (auto err = check_moe_shape(s))
    return err;
  auto all = resolve_moe_config(s, 1, arch, options.table);
  if (!all)
    return all.takeError();
  std::vector<int64_t> counts(token_counts.begin(), token_counts.end());
  if (counts.empty())
    counts = all->bounds;
  std::vector<runtime::VariantRequest> out;
  std::set<std::string> seen;
  const std::vector<KernelDef> defs = moe_kernels();
  auto add = [&](KernelIndex index, std::vector<int64_t> values) {
    std::string key = defs[index].id;
    for (size_t p = 0; p < values.size(); ++p)
      key += fmt::format(
          "|{}", defs[index].params[p].policy.kind == runtime::PolicyKind::dynamic ? 0 : values[p]);
    if (seen.insert(key).second)
      out.push_back({defs[index], std::move(values)});
  };
  for (int64_t count : counts) {
    MoeTileConfig config;
    if (options.config) {
      config = *options.config;
    } else {
      auto resolved = resolve_moe_config(s, count, arch, options.table);
      if (!resolved)
        return resolved.takeError();
      config = resolved->config;
    }
    add(k_route, {s.experts, s.top_k, options.renormalize ? 1 : 0, count});
    add(k_align, {s.experts, config.block_m, count});
    add(gemm_index(1, s.dtype, config.gemm1.kernel),
        gemm_values(s, 1, config.block_m, config.gemm1, count));
    add(gemm_index(2, s.dtype, config.gemm2.kernel),
        gemm_values(s, 2, config.block_m, config.gemm2, count));
    add(k_reduce, {s.top_k, count});
  }
  return out;
}

llvm::Expected<std::vector<const runtime::Variant*>>
prepare_fused_moe(runtime::Engine& engine, const MoeShape& shape, const FusedMoeOptions& options,
                  llvm::ArrayRef<int64_t> token_counts) {
  auto requests = fused_moe_variants(shape, options, engine.arch(), token_counts);
  if (!requests)
    return requests.takeError();
  std::vector<const runtime::Variant*> variants;
  for (const runtime::VariantRequest& request : *requests) {
    auto id = engine.add_kernel(request.def);
    if (!id)
      return id.takeError();
    auto variant = engine.prepare(*id, request.values);
    if (!variant)
      return variant.takeError();
    variants.push_back(*variant);
  }
  return variants;
}

} // namespace specjit::ops
