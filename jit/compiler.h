// NVRTC: one source (embedded, or the caller's text with in-memory headers and include
// directories) + one name expression + options -> one cubin for one architecture, and the
// headers the compile read from the include directories. Knows nothing of caching or the
// driver. Thread-safe: every call owns its nvrtcProgram.
#pragma once

#include "support/arch.h"

#include <llvm/Support/Error.h>

#include <optional>
#include <string>
#include <vector>

namespace specjit::jit {

struct HeaderFile {
  std::string name; // as an #include spells it
  std::string text;
};

struct CompileRequest {
  // Embedded file name, e.g. "test/scale_tokens.cu"; with source_text, the program's name in
  // NVRTC's messages.
  std::string source;
  std::string name_expression; // e.g. "specjit_kernels::scale_tokens<128, 0LL>"
  // Extra NVRTC options, e.g. "-DFOO=1", "--use_fast_math". No architecture and no include
  // paths: compile() rejects them (Errc::invalid_argument), the arch comes from `arch` and
  // headers from the embedded sources or from `headers` and `include_dirs`.
  std::vector<std::string> options;
  Arch arch;
  // The caller's source text; nullopt: `source` names an embedded file.
  std::optional<std::string> source_text;
  std::vector<HeaderFile> headers; // in-memory headers (with source_text only)
  // Searched in order (with source_text only); passed as --include-path, never part of
  // effective_options(): paths stay out of cache keys.
  std::vector<std::string> include_dirs;
};

// Options compile() refuses: architecture, include paths and pre-includes (see options above).
bool is_reserved_option(llvm::StringRef option);

// ptxas' report for the kernel (from --ptxas-options=--verbose, always on).
struct ResourceUsage {
  int registers = 0;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
  int shared_bytes = 0; // static shared memory
  int stack_bytes = 0;
  // ptxas diagnostics for this kernel, verbatim: "ptxas warning" lines and coded
  // "ptxas info : (C75xx) ..." lines (NVRTC 13's ptxas reports wgmma serialization, C7511 /
  // C7515, at info level).
  std::vector<std::string> warnings;

  int spill_bytes() const { return spill_store_bytes + spill_load_bytes; }
};

struct CompiledKernel {
  std::string cubin;
  std::string lowered_name; // mangled name for cuModuleGetFunction
  std::string log;          // NVRTC's full log (ptxas report included)
  ResourceUsage resources;
  double compile_ms = 0;
  // With include_dirs: every header the compile read from the file system, as NVRTC named it
  // (an include directory joined with the spelled name), in first-read order, each once.
  // In-memory headers and NVRTC's built-in header are not listed.
  std::vector<std::string> included_files;
};

struct NvrtcVersion {
  int major = 0;
  int minor = 0;
  friend bool operator==(const NvrtcVersion&, const NvrtcVersion&) = default;
  std::string name() const; // "13.0"
};
// The linked NVRTC's version (asked once per process).
NvrtcVersion nvrtc_version();

// The options specjit always passes, in this order:
//   --std=c++20  --gpu-architecture=<arch.name()>  --ptxas-options=--verbose  -default-device
// followed by the request's own, unchanged (a request that sets its own --std=/-std= replaces
// the first). Include directories are not listed. Deterministic: the same request gives the same
// list. The cache key hashes this list sorted, so option order never matters.
std::vector<std::string> effective_options(const CompileRequest& request);

// Compiles. Failures of NVRTC are a CompileError carrying NVRTC's result, log, options and
// arch; an unknown source or a missing include is a SpecjitError (Errc::not_found), a forbidden
// option one with Errc::invalid_argument.
llvm::Expected<CompiledKernel> compile(const CompileRequest& request);

// The first `max_lines` lines of an NVRTC log, with a note of how many were left out; for error
// messages and the compile_failed event.
std::string trim_log(llvm::StringRef log, size_t max_lines = 20);

class CompileError : public llvm::ErrorInfo<CompileError> {
public:
  static char ID;
  CompileError(std::string stage, int nvrtc_result, std::string log,
               std::vector<std::string> options, Arch arch, std::string name_expression);
  const std::string& stage() const { return m_stage; }
  const std::string& nvrtc_log() const { return m_log; } // full, untrimmed
  int nvrtc_result() const { return m_result; }          // an nvrtcResult
  const std::vector<std::string>& options() const { return m_options; }
  Arch arch() const { return m_arch; }
  const std::string& name_expression() const { return m_name_expression; }
  // What the caller was compiling, in its terms (e.g. the kernel definition): the message's
  // first line.
  const std::string& context() const { return m_context; }
  void set_context(std::string context) { m_context = std::move(context); }
  // "[<context>\n]<stage> failed (<NVRTC error name>) for <name expression> on <arch>:
  // <trimmed log>"
  void log(llvm::raw_ostream& os) const override;
  std::error_code convertToErrorCode() const override;

private:
  std::string m_stage; // the NVRTC call that failed, e.g. "nvrtcCompileProgram"
  int m_result;
  std::string m_log;
  std::vector<std::string> m_options;
  Arch m_arch;
  std::string m_name_expression;
  std::string m_context;
};

} // namespace specjit::jit
