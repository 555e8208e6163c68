// Direct mode for definitions with include directories: the source digest comes from a stored
// dependency set that still holds (checked once per process and definition), else from the
// headers a compile really read (docs/kernels-from-source.md, "Keys").
#include "runtime/engine_impl.h"

namespace specjit::runtime {

std::optional<Digest128> Engine::Impl::settled_source_digest(KernelState& kernel,
                                                             bool look_again) {
  std::lock_guard<std::mutex> lock(kernel.mutex);
  if (!kernel.prepared.has_include_dirs() || kernel.deps_settled)
    return kernel.source_digest;
  if (kernel.deps_checked && !look_again)
    return std::nullopt;
  kernel.deps_checked = true;
  const Digest128& definition = kernel.prepared.definition_digest;
  const std::vector<std::string>& dirs = kernel.prepared.request.include_dirs;
  bool newest = true;
  for (cache::DependencySet& set : cache::read_dependency_sets(store, definition)) {
    std::optional<HeaderChange> change = check_dependency_set(set, dirs);
    if (!change) {
      kernel.source_digest = dependency_source_digest(definition, set);
      kernel.deps = std::move(set);
      kernel.deps_settled = true;
      kernel.header_change.reset();
      return kernel.source_digest;
    }
    if (newest)
      kernel.header_change = std::move(change);
    newest = false;
  }
  return std::nullopt;
}

llvm::Expected<Digest128>
Engine::Impl::record_dependencies(KernelState& kernel,
                                  llvm::ArrayRef<std::string> included_files) {
  llvm::Expected<cache::DependencySet> set =
      dependencies_of(included_files, kernel.prepared.request.include_dirs);
  if (!set)
    return set.takeError();
  Digest128 digest = dependency_source_digest(kernel.prepared.definition_digest, *set);
  std::lock_guard<std::mutex> lock(kernel.mutex);
  // The compile is the truth: a set settled meanwhile (another thread) gives the same digest
  // unless the tree changed in between, and then this compile's reading wins.
  kernel.source_digest = digest;
  kernel.deps = std::move(*set);
  kernel.deps_settled = true;
  kernel.deps_checked = true;
  return digest;
}

llvm::Error Engine::Impl::publish_dependencies(KernelState& kernel) {
  cache::DependencySet set;
  {
    std::lock_guard<std::mutex> lock(kernel.mutex);
    set = kernel.deps;
  }
  return cache::publish_dependency_set(store, kernel.prepared.definition_digest, set);
}

} // namespace specjit::runtime
