// inv_rope_fp8_quant without a GPU: the kernel compiles for sm_90a under NVRTC with zero spills
// and no ptxas diagnostics, the op's definition produces the expected variants, and every
// argument is validated on the host before anything touches a device.
#include "engine_fixture.h"

#include "ops/inv_rope/inv_rope_fp8_quant.h"
#include "runtime/engine.h"

#include "jit/compiler.h"
#include "support/error.h"

using namespace specjit;
using namespace specjit::runtime;
using specjit::ops::InvRopeFp8QuantOptions;
using specjit::test::TempDir;

namespace {

void check_compiles_cleanly(const std::string& name_expression) {
  jit::CompileRequest request{"inv_rope_fp8_quant.cu", name_expression, {}, Arch{9, 0, true}};
  auto compiled = jit::compile(request);
  REQUIRE_MESSAGE(static_cast<bool>(compiled), llvm::toString(compiled.takeError()));
  const jit::ResourceUsage& usage = compiled->resources;
  INFO(name_expression << ": " << usage.registers << " registers\n" << compiled->log);
  CHECK(llvm::StringRef(compiled->cubin)
            .startswith("\x7f"
                        "ELF"));
  CHECK(usage.registers > 0);
  CHECK(usage.registers <= 64); // keeps >= 4 CTAs of 256 threads per SM
  CHECK(usage.spill_bytes() == 0);
  CHECK(usage.stack_bytes == 0);
  CHECK(usage.shared_bytes == 0);
  CHECK(usage.warnings.empty());
}

// Plausible device addresses: validation never dereferences them.
constexpr CUdeviceptr k_base = 0x7f0000000000ull;

struct Args {
  TensorRef o, positions, cos_sin_cache, out_fp8, out_scales;
  InvRopeFp8QuantOptions options;
};

Args valid_args(int64_t groups, int64_t heads_per_group, int64_t tokens, int64_t max_pos = 8192) {
  Args args;
  const int64_t ta = (tokens + 3) / 4 * 4;
  args.o = {k_base, DType::bf16, {tokens, groups * heads_per_group, 512}, {}};
  args.positions = {k_base + 0x10000000, DType::i64, {tokens}, {}};
  args.cos_sin_cache = {k_base + 0x20000000, DType::f32, {max_pos, 64}, {}};
  args.out_fp8 = {k_base + 0x30000000, DType::e4m3, {groups, tokens, heads_per_group * 512}, {}};
  args.out_scales = {k_base + 0x40000000, DType::f32, {groups, heads_per_group * 4, ta}, {}};
  args.options.num_groups = groups;
  args.options.heads_per_group = heads_per_group;
  return args;
}

ErrorSummary call(Engine& engine, const Args& args) {
  return summarize(ops::inv_rope_fp8_quant(engine, args.o, args.positions, args.cos_sin_cache,
                                           args.out_fp8, args.out_scales, args.options, nullptr));
}

// The call fails with invalid_argument, its message contains `fragment`, and the engine was
// never asked for a variant (so no device was needed).
void check_rejected(const Args& args, const std::string& fragment) {
  TempDir dir;
  Engine engine(test::config_in(dir));
  ErrorSummary error = call(engine, args);
  INFO("message: " << error.message);
  CHECK(error.code == Errc::invalid_argument);
  CHECK(error.message.find(fragment) != std::string::npos);
  CHECK(error.message.rfind("inv_rope_fp8_quant: ", 0) == 0);
  CHECK(engine.stats().requests == 0);
}

// One call the op must refuse: `args` with `change` applied, and a fragment of its message.
struct Rejection {
  const char* what;
  Args args;
  void (*change)(Args&);
  const char* fragment;
};

void check_all_rejected(std::initializer_list<Rejection> rejections) {
  for (const Rejection& r : rejections) {
    INFO(r.what);
    Args args = r.args;
    r.change(args);
    check_rejected(args, r.fragment);
  }
}

} // namespace

TEST_CASE("the inv_rope kernel compiles for sm_90a with no spills, stack or ptxas diagnostics") {
  check_compiles_cleanly("specjit_kernels::inv_rope_fp8_quant<8, 16, 0LL>");
  check_compiles_cleanly("specjit_kernels::inv_rope_fp8_quant<1, 1, 0LL>");
  // The exact and bucketed policies' spec words compile too (benchmarks compare them).
  check_compiles_cleanly("specjit_kernels::inv_rope_fp8_quant<8, 16, 1000000000017LL>");
  check_compiles_cleanly("specjit_kernels::inv_rope_fp8_quant<8, 16, 2000000000032LL>");
}

TEST_CASE("one dynamic variant per head layout serves every token count") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  InvRopeFp8QuantOptions options;
  options.num_groups = 8;
  options.heads_per_group = 16;
  const Variant* first = nullptr;
  for (int64_t tokens : {1, 17, 4096}) {
    auto variant = ops::prepare_inv_rope_fp8_quant(engine, tokens, options);
    REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
    if (!first)
      first = *variant;
    CHECK(*variant == first);
  }
  CHECK(first->name_expression == "specjit_kernels::inv_rope_fp8_quant<8, 16, 0LL>");
  CHECK(first->spill_bytes == 0);
  CHECK(engine.stats().compiles == 1);

  options.num_groups = 1;
  options.heads_per_group = 1;
  auto single = ops::prepare_inv_rope_fp8_quant(engine, 3, options);
  REQUIRE_MESSAGE(static_cast<bool>(single), llvm::toString(single.takeError()));
  CHECK((*single)->name_expression == "specjit_kernels::inv_rope_fp8_quant<1, 1, 0LL>");
  CHECK(engine.stats().compiles == 2);
}

TEST_CASE("the exact num_tokens policy compiles one variant per token count") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  InvRopeFp8QuantOptions options;
  options.num_tokens_policy = Policy::exact();
  auto variant = ops::prepare_inv_rope_fp8_quant(engine, 17, options);
  REQUIRE_MESSAGE(static_cast<bool>(variant), llvm::toString(variant.takeError()));
  CHECK((*variant)->name_expression ==
        "specjit_kernels::inv_rope_fp8_quant<1, 1, 1000000000017LL>");
  auto other = ops::prepare_inv_rope_fp8_quant(engine, 18, options);
  REQUIRE_MESSAGE(static_cast<bool>(other), llvm::toString(other.takeError()));
  CHECK(*other != *variant);
  CHECK(engine.stats().compiles == 2);
}

TEST_CASE("inv_rope_fp8_quant names the argument whose dtype or shape is wrong") {
  check_all_rejected({
      {"o dtype", valid_args(8, 16, 17), [](Args& a) { a.o.dtype = DType::f16; },
       "o: expected bf16[*, 128, 512], got f16[17, 128, 512]"},
      {"o head count differs from groups x heads per group", valid_args(8, 16, 17),
       [](Args& a) { a.options.heads_per_group = 8; },
       "o: expected bf16[*, 64, 512], got bf16[17, 128, 512]"},
      {"o head dim", valid_args(1, 1, 4),
       [](Args& a) {
         a.o.shape = {4, 1, 256};
       },
       "o: expected bf16[*, 1, 512], got bf16[4, 1, 256]"},
      {"positions length", valid_args(8, 16, 17), [](Args& a) { a.positions.shape = {16}; },
       "positions: expected i64[17], got i64[16]"},
      {"positions dtype", valid_args(8, 16, 17), [](Args& a) { a.positions.dtype = DType::i32; },
       "positions: expected i64[17], got i32[17]"},
      {"cos_sin_cache width", valid_args(8, 16, 17),
       [](Args& a) {
         a.cos_sin_cache.shape = {8192, 32};
       },
       "cos_sin_cache: expected f32[*, 64], got f32[8192, 32]"},
      {"cos_sin_cache without rows", valid_args(1, 1, 2, 0), [](Args&) {},
       "cos_sin_cache: has no positions"},
      {"out_fp8 layout [G, T, hpg*512]", valid_args(8, 16, 17),
       [](Args& a) {
         a.out_fp8.shape = {17, 8, 16 * 512};
       },
       "out_fp8: expected e4m3[8, 17, 8192], got e4m3[17, 8, 8192]"},
      {"out_fp8 dtype", valid_args(1, 1, 4), [](Args& a) { a.out_fp8.dtype = DType::u8; },
       "out_fp8: expected e4m3[1, 4, 512], got u8[1, 4, 512]"},
      {"out_scales rows must be T rounded up to 4", valid_args(8, 16, 17),
       [](Args& a) {
         a.out_scales.shape = {8, 64, 17};
       },
       "out_scales: expected f32[8, 64, 20], got f32[8, 64, 17]"},
      {"num_groups", valid_args(1, 1, 4), [](Args& a) { a.options.num_groups = 0; },
       "num_groups must be >= 1, got 0"},
      {"heads_per_group", valid_args(1, 1, 4), [](Args& a) { a.options.heads_per_group = -2; },
       "heads_per_group must be >= 1, got -2"},
  });
}

TEST_CASE("inv_rope_fp8_quant rejects misaligned, strided and null tensors") {
  check_all_rejected({
      {"o not 16-byte aligned", valid_args(8, 16, 17), [](Args& a) { a.o.data += 8; },
       "o: data address 0x7f0000000008 is not 16-byte aligned"},
      {"out_fp8 not 16-byte aligned", valid_args(8, 16, 17), [](Args& a) { a.out_fp8.data += 4; },
       "out_fp8: data address"},
      {"cos_sin_cache not 16-byte aligned", valid_args(8, 16, 17),
       [](Args& a) { a.cos_sin_cache.data += 4; }, "cos_sin_cache: data address"},
      {"positions not 8-byte aligned", valid_args(8, 16, 17),
       [](Args& a) { a.positions.data += 4; }, "positions: data address"},
      {"o with transposed strides", valid_args(1, 2, 4),
       [](Args& a) {
         a.o.strides = {512, 2048, 1};
       },
       "o: expected a contiguous (row-major) tensor"},
      {"null out_scales", valid_args(1, 1, 4), [](Args& a) { a.out_scales.data = 0; },
       "out_scales: f32[1, 4, 4] has a null data pointer"},
      {"too many items for 32-bit indices", valid_args(8, 16, int64_t{1} << 24), [](Args&) {},
       "exceeds the kernel's 2^31 items"},
  });
}

TEST_CASE("zero tokens is a successful call that launches nothing") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  Args args = valid_args(8, 16, 0);
  args.o.data = args.positions.data = args.out_fp8.data = args.out_scales.data = 0;
  ErrorSummary error = call(engine, args);
  CHECK_MESSAGE(error.message.empty(), error.message);
  CHECK(engine.stats().requests == 0);
}

TEST_CASE("tensor descriptions and contiguity follow the row-major convention") {
  TensorRef t{k_base, DType::bf16, {16, 128, 512}, {}};
  CHECK(t.describe() == "bf16[16, 128, 512]");
  CHECK(t.numel() == 16 * 128 * 512);
  CHECK(t.contiguous());
  t.strides = {128 * 512, 512, 1};
  CHECK(t.contiguous());
  t.strides = {128 * 512, 1, 128};
  CHECK(!t.contiguous());
  // Extent-1 dimensions may carry any stride.
  TensorRef u{k_base, DType::f32, {1, 4}, {999, 1}};
  CHECK(u.contiguous());
  CHECK(dtype_size(DType::e4m3) == 1);
  CHECK(dtype_size(DType::i64) == 8);
  CHECK(dtype_name(DType::e4m3) == "e4m3");
  CHECK(!expect_tensor("op", "x", u, DType::f32, {1, -1}, 16));
}

TEST_CASE("prepare rejects a negative token count and bad head layouts") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  InvRopeFp8QuantOptions options;
  ErrorSummary error = summarize(ops::prepare_inv_rope_fp8_quant(engine, -1, options).takeError());
  CHECK(error.code == Errc::invalid_argument);
  CHECK(error.message.find("num_tokens must be >= 0") != std::string::npos);
  options.num_groups = 0;
  error = summarize(ops::prepare_inv_rope_fp8_quant(engine, 4, options).takeError());
  CHECK(error.message.find("num_groups must be >= 1") != std::string::npos);
}
