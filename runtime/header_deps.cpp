#include "runtime/header_deps.h"

#include "support/error.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>

#include <algorithm>

namespace specjit::runtime {

namespace {

// `path` relative to `dir` when it lies below it.
std::optional<std::string> relative_to(llvm::StringRef path, llvm::StringRef dir) {
  if (!path.consume_front(dir) || !path.consume_front("/") || path.empty())
    return std::nullopt;
  return path.str();
}

// The include directory (index, relative name) holding `file`: as NVRTC spelled it first, then
// by its real path (a header reached through a link in the tree).
std::optional<std::pair<uint32_t, std::string>> locate(const std::string& file,
                                                       llvm::ArrayRef<std::string> dirs) {
  llvm::SmallString<256> clean(file);
  llvm::sys::path::remove_dots(clean, /*remove_dot_dot=*/true);
  llvm::SmallString<256> real;
  bool have_real = !llvm::sys::fs::real_path(file, real);
  for (llvm::StringRef candidate : {clean.str(), real.str()}) {
    if (candidate.empty() || (candidate == real.str() && !have_real))
      continue;
    for (uint32_t i = 0; i < dirs.size(); ++i)
      if (std::optional<std::string> name = relative_to(candidate, dirs[i]))
        return std::make_pair(i, std::move(*name));
  }
  return std::nullopt;
}

} // namespace

llvm::Expected<cache::DependencySet>
dependencies_of(llvm::ArrayRef<std::string> included_files,
                llvm::ArrayRef<std::string> include_dirs) {
  HeaderReader reader(include_dirs);
  return dependencies_of(included_files, include_dirs, reader);
}

llvm::Expected<cache::DependencySet> dependencies_of(llvm::ArrayRef<std::string> included_files,
                                                     llvm::ArrayRef<std::string> include_dirs,
                                                     HeaderReader& reader) {
  cache::DependencySet set;
  for (const std::string& file : included_files) {
    auto located = locate(file, include_dirs);
    if (!located)
      return make_error(Errc::unsupported,
                        "the compile read '{}', which lies in none of the include directories; "
                        "its contents could not be keyed, so the variant is not cached",
                        file);
    std::optional<Digest128> digest = reader.hash_path(file);
    if (!digest)
      return make_error(Errc::io, "header '{}' cannot be read for its digest", file);
    set.push_back({std::move(located->second), located->first, *digest});
  }
  std::sort(set.begin(), set.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  set.erase(std::unique(set.begin(), set.end(),
                        [](const auto& a, const auto& b) { return a.name == b.name; }),
            set.end());
  return set;
}

Digest128 dependency_source_digest(const Digest128& definition, const cache::DependencySet& set) {
  FieldHasher hasher;
  hasher.add("deps.definition", definition);
  hasher.add("deps.count", static_cast<int64_t>(set.size()));
  for (const cache::HeaderDependency& header : set) {
    hasher.add("deps.name", header.name);
    hasher.add("deps.digest", header.digest);
  }
  return hasher.finish();
}

std::optional<HeaderChange> check_dependency_set(const cache::DependencySet& set,
                                                 llvm::ArrayRef<std::string> include_dirs) {
  HeaderReader reader(include_dirs);
  return check_dependency_set(set, reader);
}

std::optional<HeaderChange> check_dependency_set(const cache::DependencySet& set,
                                                 HeaderReader& reader) {
  reader.resolve_all(set);
  for (const cache::HeaderDependency& header : set) {
    std::optional<HeaderReader::Resolved> found = reader.resolve(header.name);
    if (!found)
      return HeaderChange{header.name, header.digest.hex(), "(missing)"};
    if (found->include_dir != header.include_dir)
      return HeaderChange{header.name, header.digest.hex(),
                          "(now found in include dir " + std::to_string(found->include_dir) + ")"};
    if (!found->digest) // found by its status, but it cannot be read
      return HeaderChange{header.name, header.digest.hex(), "(missing)"};
    if (*found->digest != header.digest)
      return HeaderChange{header.name, header.digest.hex(), found->digest->hex()};
  }
  return std::nullopt;
}

} // namespace specjit::runtime
