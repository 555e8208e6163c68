// NVRTC: one embedded source + one name expression + options -> one cubin for one architecture.
// Knows nothing of caching or the driver. Thread-safe: every call owns its nvrtcProgram.
#pragma once

#include "support/arch.h"

#include <llvm/Support/Error.h>

#include <string>
#include <vector>

namespace specjit::jit {

struct CompileRequest {
  std::string source;               // embedded file name, e.g. "test/scale_tokens.cu"
  std::string name_expression;      // e.g. "specjit_kernels::scale_tokens<128, 0>"
  std::vector<std::string> options; // extra NVRTC options, e.g. "-DFOO=1"; no arch, no -I
  Arch arch;
};

// ptxas' report for the kernel (from --ptxas-options=--verbose, always on).
struct ResourceUsage {
  int registers = 0;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
  int shared_bytes = 0; // static shared memory
  int stack_bytes = 0;
  std::vector<std::string> warnings; // ptxas warning lines, e.g. C7515 diagnostics

  int spill_bytes() const { return spill_store_bytes + spill_load_bytes; }
};

struct CompiledKernel {
  std::string cubin;
  std::string lowered_name; // mangled name for cuModuleGetFunction
  std::string log;          // NVRTC's full log (ptxas report included)
  ResourceUsage resources;
  double compile_ms = 0;
};

struct NvrtcVersion {
  int major = 0;
  int minor = 0;
  std::string name() const; // "13.0"
};
NvrtcVersion nvrtc_version();

// The options specjit always passes (language standard, arch, ptxas verbosity, ...) followed by
// the request's own. The cache key hashes this list sorted, so option order never matters.
std::vector<std::string> effective_options(const CompileRequest& request);

// Compiles. Failures are a CompileError carrying NVRTC's result, log, options and arch.
llvm::Expected<CompiledKernel> compile(const CompileRequest& request);

class CompileError : public llvm::ErrorInfo<CompileError> {
public:
  static char ID;
  CompileError(std::string stage, int nvrtc_result, std::string log, std::vector<std::string> options,
               Arch arch, std::string name_expression);
  const std::string& nvrtc_log() const { return m_log; }
  int nvrtc_result() const { return m_result; }
  const std::vector<std::string>& options() const { return m_options; }
  Arch arch() const { return m_arch; }
  void log(llvm::raw_ostream& os) const override;
  std::error_code convertToErrorCode() const override;

private:
  std::string m_stage; // the NVRTC call that failed, e.g. "nvrtcCompileProgram"
  int m_result;
  std::string m_log;
  std::vector<std::string> m_options;
  Arch m_arch;
  std::string m_name_expression;
};

} // namespace specjit::jit
