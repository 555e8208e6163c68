// File-system helpers shared by the disk store tests.
#pragma once

#include "cache/disk_store.h"
#include "cache/file_io.h"

#include "cache_test_support.h"
#include "test_support.h"

#include <doctest/doctest.h>

#include <dirent.h>
#include <fcntl.h>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

namespace specjit::cache::test {

struct FileState {
  char type = 'f'; // f, d, l, o
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  std::string content; // regular files only
  friend bool operator==(const FileState&, const FileState&) = default;
};
using Snapshot = std::map<std::string, FileState>;

// Every file below `dir` (links not followed) with its type, size, mtime and bytes.
inline void snapshot_into(const std::string& dir, Snapshot& out) {
  DIR* handle = opendir(dir.c_str());
  if (!handle)
    return;
  std::vector<std::string> names;
  while (dirent* entry = readdir(handle)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..")
      names.push_back(name);
  }
  closedir(handle);
  for (const std::string& name : names) {
    std::string path = dir + "/" + name;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0)
      continue;
    FileState state;
    state.type = S_ISREG(st.st_mode)   ? 'f'
                 : S_ISDIR(st.st_mode) ? 'd'
                 : S_ISLNK(st.st_mode) ? 'l'
                                       : 'o';
    state.size = static_cast<uint64_t>(st.st_size);
    state.mtime_ns = st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
    if (state.type == 'f')
      state.content = specjit::test::read_file(path);
    out[path] = state;
    if (state.type == 'd')
      snapshot_into(path, out);
  }
}

inline Snapshot snapshot(const std::string& dir) {
  Snapshot out;
  snapshot_into(dir, out);
  return out;
}

// The names of the regular files and links directly in `dir` (empty when it does not exist).
inline std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& [path, state] : snapshot(dir))
    if (state.type != 'd' && path.rfind('/') == dir.size())
      names.push_back(path.substr(dir.size() + 1));
  return names;
}

inline void set_mtime(const std::string& path, int64_t seconds_ago) {
  struct timespec times[2];
  clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= seconds_ago;
  times[1] = times[0];
  REQUIRE(utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
}

inline int64_t mtime_ns(const std::string& path) {
  struct stat st;
  REQUIRE(lstat(path.c_str(), &st) == 0);
  return st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
}

inline bool exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

inline StoreOptions options_for(const std::string& root, std::vector<std::string> layers = {}) {
  StoreOptions options;
  options.root = root;
  options.readonly_layers = std::move(layers);
  return options;
}

// Publishes a sample entry and returns it.
inline SampleEntry publish_sample(DiskStore& store, const std::string& kernel, int variant,
                                  size_t cubin_size = 256) {
  SampleEntry entry = sample_entry(kernel, variant, cubin_size);
  llvm::Error error = store.publish(entry.key, kernel, entry.bytes);
  REQUIRE_MESSAGE(!error, llvm::toString(std::move(error)));
  return entry;
}

// Clears the fault injector when the test ends, however it ends.
struct InjectorGuard {
  explicit InjectorGuard(FaultInjector injector) { set_fault_injector(std::move(injector)); }
  ~InjectorGuard() { set_fault_injector(nullptr); }
};

} // namespace specjit::cache::test
