#include "jit/embedded_sources.h"

#include "jit/source_closure.h"

#include <algorithm>

namespace specjit::jit {
namespace {

std::optional<EmbeddedFile> find_file(llvm::StringRef name) {
  // The generated table is sorted by name (cmake/embed_sources_script.cmake).
  llvm::ArrayRef<EmbeddedFile> files = embedded_files();
  const EmbeddedFile* it = std::lower_bound(
      files.begin(), files.end(), name,
      [](const EmbeddedFile& file, llvm::StringRef key) { return file.name < key; });
  if (it == files.end() || it->name != name)
    return std::nullopt;
  return *it;
}

} // namespace

std::optional<llvm::StringRef> find_embedded(llvm::StringRef name) {
  if (std::optional<EmbeddedFile> file = find_file(name))
    return file->text;
  return std::nullopt;
}

llvm::Expected<std::vector<ClosureFile>> embedded_closure(llvm::StringRef name) {
  return closure_of(name, find_file);
}

llvm::Expected<std::vector<EmbeddedFile>> source_closure(llvm::StringRef name) {
  llvm::Expected<std::vector<ClosureFile>> closure = embedded_closure(name);
  if (!closure)
    return closure.takeError();
  std::vector<EmbeddedFile> files;
  files.reserve(closure->size());
  for (const ClosureFile& entry : *closure)
    files.push_back(entry.file);
  return files;
}

llvm::Expected<Digest128> source_digest(llvm::StringRef name) {
  llvm::Expected<std::vector<EmbeddedFile>> files = source_closure(name);
  if (!files)
    return files.takeError();
  return closure_digest(*files);
}

} // namespace specjit::jit
