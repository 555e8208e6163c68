#include "jit/ptxas_report.h"

#include <doctest/doctest.h>

using specjit::jit::parse_ptxas_report;
using specjit::jit::ResourceUsage;

namespace {

// Captured from NVRTC 13.0 (sm_90a): two entries, one spilling under --maxrregcount=32 with
// --ptxas-options=--warn-on-spills, one using static shared memory.
constexpr const char* k_spill_and_smem_log =
    "ptxas info    : Overriding maximum register limit 256 for 'spill_kernel' with  32 of "
    "maxrregcount option\n"
    "ptxas info    : Overriding maximum register limit 256 for 'smem_kernel' with  32 of "
    "maxrregcount option\n"
    "ptxas warning : Registers are spilled to local memory in function 'spill_kernel', 820 bytes "
    "spill stores, 728 bytes spill loads\n"
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'spill_kernel' for 'sm_90a'\n"
    "ptxas info    : Function properties for spill_kernel\n"
    "ptxas         .     816 bytes stack frame, 820 bytes spill stores, 728 bytes spill loads\n"
    "ptxas info    : Used 32 registers, used 0 barriers, 816 bytes cumulative stack size\n"
    "ptxas info    : Compile time = 55.392 ms\n"
    "ptxas info    : Compiling entry function 'smem_kernel' for 'sm_90a'\n"
    "ptxas info    : Function properties for smem_kernel\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 12 registers, used 1 barriers, 384 bytes smem\n"
    "ptxas info    : Compile time = 2.472 ms\n";

// Captured from NVRTC 13.0 (sm_90a): an FP8 wgmma whose accumulators are written between
// wgmmas. NVRTC 13's ptxas reports these at info level, with a code.
constexpr const char* k_wgmma_log =
    "ptxas info    : (C7519) warpgroup.arrive is injected in around line 53 by compiler to allow "
    "use of registers in GMMA in function 'wg'\n"
    "ptxas info    : (C7517) warpgroup.wait is injected in around line 48 by compiler to allow "
    "use of registers defined by GMMA in function 'wg'\n"
    "ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are "
    "serialized due to insufficient register resources for the wgmma pipeline in the function "
    "'wg'\n"
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'wg' for 'sm_90a'\n"
    "ptxas info    : Function properties for wg\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 34 registers, used 0 barriers\n"
    "ptxas info    : Compile time = 4.258 ms\n";

// The older layout (CUDA 12): an indented properties line, cmem on the registers line, and the
// wgmma diagnostic as a warning.
constexpr const char* k_cuda12_log =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function '_Z4gemmPKvPf' for 'sm_90a'\n"
    "ptxas info    : Function properties for _Z4gemmPKvPf\n"
    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 168 registers, used 1 barriers, 33280 bytes smem, 380 bytes cmem[0]\n"
    "ptxas warning : (C7515) Potential Performance Loss: wgmma.mma_async instructions are "
    "serialized due to the presence of Extern calls in the function '_Z4gemmPKvPf'.\n"
    "ptxas warning : (C7515) Potential Performance Loss: wgmma.mma_async instructions are "
    "serialized in the function '_Z5otherv'.\n";

} // namespace

TEST_CASE("a spilling entry reports its registers, stack and spill bytes and its spill warning") {
  ResourceUsage usage = parse_ptxas_report(k_spill_and_smem_log, "spill_kernel");
  CHECK(usage.registers == 32);
  CHECK(usage.stack_bytes == 816);
  CHECK(usage.spill_store_bytes == 820);
  CHECK(usage.spill_load_bytes == 728);
  CHECK(usage.spill_bytes() == 1548);
  CHECK(usage.shared_bytes == 0);
  REQUIRE(usage.warnings.size() == 1);
  CHECK(usage.warnings[0] == "ptxas warning : Registers are spilled to local memory in function "
                             "'spill_kernel', 820 bytes spill stores, 728 bytes spill loads");
}

TEST_CASE("the report of one entry is not confused with the next entry in the same log") {
  ResourceUsage usage = parse_ptxas_report(k_spill_and_smem_log, "smem_kernel");
  CHECK(usage.registers == 12);
  CHECK(usage.shared_bytes == 384);
  CHECK(usage.stack_bytes == 0);
  CHECK(usage.spill_bytes() == 0);
  CHECK(usage.warnings.empty());
}

TEST_CASE("coded wgmma diagnostics at info level are kept verbatim as warnings") {
  ResourceUsage usage = parse_ptxas_report(k_wgmma_log, "wg");
  CHECK(usage.registers == 34);
  REQUIRE(usage.warnings.size() == 3);
  CHECK(usage.warnings[0].find("(C7519)") != std::string::npos);
  CHECK(usage.warnings[2].rfind("ptxas info    : (C7511) Potential Performance Loss", 0) == 0);
  CHECK(usage.warnings[2].find("'wg'") != std::string::npos);
  CHECK(parse_ptxas_report(k_wgmma_log, "ptxas info").warnings.empty());
}

TEST_CASE("the CUDA 12 layout is parsed and warnings about other functions are left out") {
  ResourceUsage usage = parse_ptxas_report(k_cuda12_log, "_Z4gemmPKvPf");
  CHECK(usage.registers == 168);
  CHECK(usage.shared_bytes == 33280);
  CHECK(usage.spill_bytes() == 0);
  REQUIRE(usage.warnings.size() == 1);
  CHECK(usage.warnings[0].find("C7515") != std::string::npos);
  CHECK(usage.warnings[0].find("Extern calls") != std::string::npos);
}

TEST_CASE("a log without the kernel, or no log at all, gives an empty report") {
  for (const char* log : {"", "garbage\n\n  \n", k_wgmma_log}) {
    ResourceUsage usage = parse_ptxas_report(log, "_Z7missingv");
    CHECK(usage.registers == 0);
    CHECK(usage.shared_bytes == 0);
    CHECK(usage.spill_bytes() == 0);
  }
  CHECK(parse_ptxas_report("", "x").warnings.empty());
}
