#include "jit/include_trace.h"

#include "support/error.h"

#include <llvm/ADT/StringSet.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>

namespace specjit::jit {

namespace {

constexpr llvm::StringLiteral k_builtin_header = "__nv_nvrtc_builtin_header.h";
// NVRTC appends ".json" to the path it is given, always ("x.json" becomes "x.json.json"), and
// aborts the process when it cannot create the file: the folder must exist for the compile.
constexpr llvm::StringLiteral k_trace_stem = "trace";
constexpr llvm::StringLiteral k_trace_name = "trace.json";

} // namespace

llvm::Expected<IncludeTrace> IncludeTrace::create() {
  llvm::SmallString<128> dir;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("specjit-trace", dir))
    return make_error(Errc::io, "cannot create a temporary folder for NVRTC's include trace: {}",
                      ec.message());
  return IncludeTrace(dir.str().str());
}

IncludeTrace::IncludeTrace(IncludeTrace&& other) noexcept : m_dir(std::move(other.m_dir)) {
  other.m_dir.clear();
}

IncludeTrace::~IncludeTrace() {
  if (!m_dir.empty())
    llvm::sys::fs::remove_directories(m_dir, /*IgnoreErrors=*/true);
}

std::string IncludeTrace::option() const {
  return "--fdevice-time-trace=" + m_dir + "/" + k_trace_stem.str();
}

llvm::Expected<std::vector<std::string>>
IncludeTrace::included_files(llvm::ArrayRef<std::string> in_memory) const {
  std::string path = m_dir + "/" + k_trace_name.str();
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return make_error(Errc::io,
                      "NVRTC wrote no include trace ({}: {}); the headers this compile read are "
                      "unknown, so it cannot be cached",
                      path, buffer.getError().message());
  return parse_include_trace((*buffer)->getBuffer(), in_memory);
}

llvm::Expected<std::vector<std::string>> parse_include_trace(llvm::StringRef json,
                                                             llvm::ArrayRef<std::string> in_memory) {
  auto bad = [](llvm::StringRef what) {
    return make_error(Errc::corrupt,
                      "NVRTC's include trace is unreadable ({}); the headers this compile read "
                      "are unknown, so it cannot be cached",
                      what.str());
  };
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(json);
  if (!value)
    return bad(llvm::toString(value.takeError()));
  const llvm::json::Object* root = value->getAsObject();
  const llvm::json::Array* events = root ? root->getArray("traceEvents") : nullptr;
  if (events == nullptr)
    return bad("no traceEvents array");
  llvm::StringSet<> skip;
  skip.insert(k_builtin_header);
  for (const std::string& name : in_memory)
    skip.insert(name);
  std::vector<std::string> files;
  llvm::StringSet<> seen;
  for (const llvm::json::Value& event : *events) {
    const llvm::json::Object* object = event.getAsObject();
    if (object == nullptr || object->getString("name").getValueOr("") != "Processing Header File")
      continue;
    const llvm::json::Object* args = object->getObject("args");
    llvm::StringRef detail = args ? args->getString("detail").getValueOr("") : "";
    if (detail.empty())
      return bad("a header event without a path");
    if (skip.contains(detail) || !seen.insert(detail).second)
      continue;
    files.push_back(detail.str());
  }
  return files;
}

} // namespace specjit::jit
