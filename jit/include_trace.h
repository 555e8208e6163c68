// Which headers an NVRTC compile really read. NVRTC 13 has no -MD, but --fdevice-time-trace
// writes a Chrome trace whose "Processing Header File" events carry each header's path in
// args.detail: an include directory joined with the spelled name for headers found on disk,
// the spelled name for in-memory headers, "__nv_nvrtc_builtin_header.h" for NVRTC's own.
// Tracing costs no measurable compile time (611 headers of cub::BlockReduce). NVRTC aborts the
// process when it cannot create the trace file, so the folder is private and made first.
#pragma once

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Error.h>

#include <string>
#include <vector>

namespace specjit::jit {

// A private temporary folder for one compile's trace, removed with everything in it when the
// object goes away.
class IncludeTrace {
public:
  static llvm::Expected<IncludeTrace> create();
  IncludeTrace(IncludeTrace&& other) noexcept;
  IncludeTrace& operator=(IncludeTrace&&) = delete;
  ~IncludeTrace();

  // The option that makes NVRTC write the trace here.
  std::string option() const;
  // The file-system headers the traced compile read, each once, in first-read order: every
  // name except NVRTC's built-in header and `in_memory` (the spelled in-memory names). A missing
  // or unreadable trace is an error, never an empty list.
  llvm::Expected<std::vector<std::string>> included_files(llvm::ArrayRef<std::string> in_memory) const;

private:
  explicit IncludeTrace(std::string dir) : m_dir(std::move(dir)) {}
  std::string m_dir;
};

// The header paths of a Chrome-trace JSON text, as included_files() reads them.
llvm::Expected<std::vector<std::string>> parse_include_trace(llvm::StringRef json,
                                                             llvm::ArrayRef<std::string> in_memory);

} // namespace specjit::jit
