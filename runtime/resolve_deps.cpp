// Direct mode for definitions with include directories: the source digest comes from a stored
// dependency set that still holds (checked once per process and definition, re-hashing only
// the headers this user's stat hints do not vouch for), else from the headers a compile really
// read (docs/kernels-from-source.md, "Keys" and "Stat hints").
#include "runtime/engine_impl.h"

#include "cache/stat_hints.h"

namespace specjit::runtime {

namespace {

// Hints are only ever a shortcut: one that cannot be written costs a re-hash next time.
void keep_hints(Engine::Impl& engine, const Digest128& definition, const cache::StatHints& hints,
                const HeaderReader& reader) {
  engine.counters.headers_hashed.fetch_add(reader.counts().hashed, std::memory_order_relaxed);
  engine.counters.headers_from_hints.fetch_add(reader.counts().from_hints,
                                               std::memory_order_relaxed);
  if (hints.changed() && engine.store.writable())
    llvm::consumeError(cache::publish_stat_hints(engine.store, definition, hints));
}

} // namespace

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
  std::vector<cache::DependencySet> sets = cache::read_dependency_sets(store, definition);
  if (sets.empty())
    return std::nullopt;
  cache::StatHints hints = cache::read_stat_hints(store, definition);
  HeaderReader reader(dirs, {&hints, HintUse::lookup});
  bool newest = true;
  for (cache::DependencySet& set : sets) {
    std::optional<HeaderChange> change = check_dependency_set(set, reader);
    if (!change) {
      keep_hints(*this, definition, hints, reader);
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
  keep_hints(*this, definition, hints, reader);
  return std::nullopt;
}

llvm::Expected<Digest128>
Engine::Impl::record_dependencies(KernelState& kernel,
                                  llvm::ArrayRef<std::string> included_files) {
  const Digest128& definition = kernel.prepared.definition_digest;
  // The compile's reading is the truth, so every header is hashed; the hints it records let
  // the next fresh process skip that.
  cache::StatHints hints = cache::read_stat_hints(store, definition);
  HeaderReader reader(kernel.prepared.request.include_dirs, {&hints, HintUse::record_only});
  llvm::Expected<cache::DependencySet> set =
      dependencies_of(included_files, kernel.prepared.request.include_dirs, reader);
  if (!set)
    return set.takeError();
  keep_hints(*this, definition, hints, reader);
  Digest128 digest = dependency_source_digest(definition, *set);
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
