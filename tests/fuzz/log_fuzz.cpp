// libFuzzer target for the recompilation log reader (F1): deploy::parse_log (the hand-written
// line scanner of runtime/log_line.h, then llvm::json for variant and diff) must read any text
// into events and counted bad lines, never crash, hang or leak.
#include "deploy/log_reader.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char*>(data), size);
  specjit::deploy::LogContents log = specjit::deploy::parse_log(text);
  if (log.events.size() + log.bad_lines > log.lines)
    __builtin_trap(); // every non-empty line is an event or a bad line, once
  return 0;
}
