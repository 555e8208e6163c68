#include "runtime/kernel_source.h"

#include "jit/embedded_sources.h"
#include "support/error.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace specjit::runtime {

llvm::Expected<std::string> canonical_include_dir(llvm::StringRef kernel_id, llvm::StringRef dir) {
  llvm::SmallString<256> real;
  if (std::error_code ec = llvm::sys::fs::real_path(dir, real))
    return make_error(Errc::not_found, "kernel {}: include directory '{}' is not usable: {}",
                      kernel_id.str(), dir.str(), ec.message());
  // Opening it proves a readable directory without reading its entries (a large tree's
  // top-level listing costs a fresh process more than the rest of the definition).
  std::string path = real.str().str();
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const int err = fd < 0 ? errno : 0;
  if (err == ENOTDIR)
    return make_error(Errc::not_found, "kernel {}: include directory '{}' is not a directory",
                      kernel_id.str(), dir.str());
  if (fd < 0)
    return make_error(Errc::io, "kernel {}: include directory '{}' cannot be read: {}",
                      kernel_id.str(), dir.str(), std::strerror(err));
  ::close(fd);
  return path;
}

namespace {

llvm::Error read_source_file(const KernelDef& def, jit::CompileRequest& request) {
  auto buffer = llvm::MemoryBuffer::getFile(def.source.name, /*IsText=*/true);
  if (!buffer)
    return make_error(buffer.getError() == std::errc::no_such_file_or_directory ? Errc::not_found
                                                                                : Errc::io,
                      "kernel {}: source file '{}' cannot be read: {}", def.id, def.source.name,
                      buffer.getError().message());
  request.source_text = (*buffer)->getBuffer().str();
  request.source = llvm::sys::path::filename(def.source.name).str();
  llvm::SmallString<256> folder(def.source.name);
  llvm::sys::path::remove_filename(folder);
  if (folder.empty())
    folder = ".";
  auto canonical = canonical_include_dir(def.id, folder);
  if (!canonical)
    return canonical.takeError();
  request.include_dirs.push_back(std::move(*canonical));
  return llvm::Error::success();
}

Digest128 definition_digest(const KernelDef& def, const jit::CompileRequest& request) {
  FieldHasher hasher;
  hasher.add("definition.kind", static_cast<int64_t>(def.source.kind));
  hasher.add("definition.name", request.source);
  hasher.add("definition.text", *request.source_text);
  hasher.add("definition.headers", static_cast<int64_t>(request.headers.size()));
  for (const jit::HeaderFile& header : request.headers) {
    hasher.add("header.name", header.name);
    hasher.add("header.text", header.text);
  }
  std::vector<std::string> defines = def.defines;
  std::sort(defines.begin(), defines.end());
  hasher.add("definition.defines", static_cast<int64_t>(defines.size()));
  for (const std::string& define : defines)
    hasher.add("define", define);
  hasher.add("definition.include_dirs", static_cast<int64_t>(request.include_dirs.size()));
  return hasher.finish();
}

} // namespace

llvm::Expected<PreparedSource> prepare_source(const KernelDef& def) {
  PreparedSource prepared;
  jit::CompileRequest& request = prepared.request;
  request.options = def.options;
  for (const std::string& define : def.defines)
    request.options.push_back("-D" + define);
  if (def.source.kind == SourceKind::embedded) {
    request.source = def.source.name;
    auto digest = jit::source_digest(def.source.name);
    if (!digest)
      return make_error(Errc::not_found, "kernel {}: {}", def.id,
                        llvm::toString(digest.takeError()));
    prepared.definition_digest = *digest;
    return prepared;
  }
  if (def.source.kind == SourceKind::text) {
    request.source = def.source.name;
    request.source_text = def.source.text;
  } else if (llvm::Error error = read_source_file(def, request)) {
    return error;
  }
  for (const HeaderText& header : def.headers)
    request.headers.push_back({header.name, header.text});
  for (const std::string& dir : def.include_dirs) {
    auto canonical = canonical_include_dir(def.id, dir);
    if (!canonical)
      return canonical.takeError();
    request.include_dirs.push_back(std::move(*canonical));
  }
  prepared.definition_digest = definition_digest(def, request);
  return prepared;
}

} // namespace specjit::runtime
