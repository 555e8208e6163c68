// specjit-bench: benchmarks that print a short table and write their full numbers as JSON.
//   specjit-bench engine            launch overhead, lookup cost, disk-load cost (issue: engine)
//   specjit-bench recompile-trace   what each num_tokens policy costs a serving trace
//   specjit-bench inv-rope          the fused inverse-RoPE + FP8 quantization kernel
//   specjit-bench moe               the fused MoE layer (and --tune: its tile table)
//   specjit-bench moe-routing       the moe benchmark's routings and their token blocks (no GPU)
//   specjit-bench remote            the fleet tier on Redis: fresh node, cold fleet (no GPU)
//   specjit-bench tp-startup        N tensor-parallel ranks starting at once on one cache
//   specjit-bench capi              what the C ABI adds to a launch, against cuLaunchKernel
//   specjit-bench byok              a CuTe kernel from source: compile and disk-ready time (no GPU)
//   specjit-bench digest            digests of the built-in ops' outputs on seeded random data
#include "bench_common.h"
#include "moe_routing.h"
#include "tp_startup.h"

#include <llvm/Support/raw_ostream.h>

#include <cstring>

int main(int argc, char** argv) {
  using namespace specjit::bench;
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0) {
    llvm::errs() << "usage: specjit-bench engine|recompile-trace|inv-rope|moe|moe-routing|"
                    "remote|tp-startup|capi|byok|digest [flags]\n"
                    "  each mode takes --help\n";
    return argc < 2 ? 2 : 0;
  }
  std::string mode = argv[1];
  if (mode == "engine")
    return run_engine_bench(argc, argv);
  if (mode == "recompile-trace")
    return run_recompile_trace(argc, argv);
  if (mode == "inv-rope")
    return run_inv_rope_bench(argc, argv);
  if (mode == "moe")
    return run_moe_bench(argc, argv);
  if (mode == "moe-routing")
    return run_moe_routing(argc, argv);
  if (mode == "remote")
    return run_remote_bench(argc, argv);
  if (mode == "tp-startup")
    return run_tp_startup(argc, argv);
  if (mode == "capi")
    return run_capi_bench(argc, argv);
  if (mode == "byok")
    return run_byok_bench(argc, argv);
  if (mode == "digest")
    return run_digest(argc, argv);
  llvm::errs() << "specjit-bench: unknown mode '" << mode
               << "'; expected engine, recompile-trace, inv-rope, moe, moe-routing, remote, "
                  "tp-startup, capi, byok or digest\n";
  return 2;
}
