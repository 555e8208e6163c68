#include "runtime/header_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <functional>
#include <system_error>
#include <thread>

namespace specjit::runtime {

namespace {

// About 1 us a header with a hint, several without: below this many a thread costs more to
// start than it saves.
constexpr size_t k_files_per_thread = 64;
constexpr unsigned k_max_threads = 8;

bool plain_relative_name(llvm::StringRef name) {
  if (name.empty() || name.front() == '/' || name.back() == '/')
    return false;
  while (!name.empty()) {
    auto [component, rest] = name.split('/');
    if (component.empty() || component == "." || component == "..")
      return false;
    name = rest;
  }
  return true;
}

int64_t realtime_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace

HeaderReader::HeaderReader(llvm::ArrayRef<std::string> include_dirs, HeaderReaderOptions options)
    : m_subtrees(include_dirs.size()), m_options(options),
      m_settled_before_ns(realtime_ns() - options.settle.count()) {
  // Opened as the user spelled them, links included, exactly as NVRTC searches them.
  for (const std::string& dir : include_dirs)
    m_dirs.emplace_back(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}

std::optional<HeaderReader::Resolved> HeaderReader::resolve(const std::string& name) {
  auto [it, inserted] = m_resolved.try_emplace(name);
  if (!inserted)
    return it->second;
  std::optional<Found> found = plain_relative_name(name) ? find(name) : std::nullopt;
  if (!found)
    return std::nullopt;
  std::optional<Digest128> digest = hinted(found->stat);
  if (!digest) {
    cache::UniqueFd fd(open_in(found->include_dir, name));
    digest = learn(m_hasher.hash(fd.get()));
  }
  it->second = Resolved{found->include_dir, digest};
  return it->second;
}

void HeaderReader::resolve_all(const cache::DependencySet& set) {
  std::vector<Pending> todo;
  for (const cache::HeaderDependency& header : set) {
    auto [it, inserted] = m_resolved.try_emplace(header.name);
    if (inserted && plain_relative_name(header.name))
      todo.push_back({&header.name, &*it});
  }
  // The subtree probes first, so that the threads below only read what they found.
  for (const Pending& file : todo)
    for (uint32_t i = 0; i < m_dirs.size(); ++i)
      (void)may_hold(i, *file.name);
  const bool use_hints = m_options.hints && m_options.use == HintUse::lookup;
  std::atomic<uint64_t> probes{0};
  in_parallel(todo.size(), [&](size_t i, FileHasher& hasher) {
    Pending& file = todo[i];
    uint64_t made = 0;
    file.found = find_known(*file.name, made);
    probes.fetch_add(made, std::memory_order_relaxed);
    if (!file.found)
      return;
    if (use_hints)
      file.hint = m_options.hints->peek(file.found->stat);
    if (!file.hint) {
      cache::UniqueFd fd(open_in(file.found->include_dir, *file.name));
      file.hashed = hasher.hash(fd.get());
    }
  });
  m_counts.probes += probes.load();
  // Back on this thread, in order: hints marked used, what was hashed learnt.
  for (const Pending& file : todo) {
    if (!file.found)
      continue;
    std::optional<Digest128> digest = file.hint ? hinted(file.found->stat) : learn(file.hashed);
    file.entry->second = Resolved{file.found->include_dir, digest};
  }
}

void HeaderReader::in_parallel(size_t count, const std::function<void(size_t, FileHasher&)>& body) {
  unsigned threads = m_options.threads;
  if (threads == 0)
    threads = static_cast<unsigned>(
        std::min<size_t>({count / k_files_per_thread, k_max_threads,
                          std::max(1u, std::thread::hardware_concurrency())}));
  threads = static_cast<unsigned>(std::min<size_t>(threads, count));
  std::atomic<size_t> next{0};
  auto work = [&](FileHasher& hasher) {
    for (;;) {
      size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= count)
        return;
      body(i, hasher);
    }
  };
  std::vector<std::thread> helpers;
  for (unsigned t = 1; t < threads; ++t) {
    try {
      helpers.emplace_back([&] {
        FileHasher hasher;
        work(hasher);
      });
    } catch (const std::system_error&) {
      break; // no more threads to be had: the ones there and this one do the rest
    }
  }
  work(m_hasher);
  for (std::thread& helper : helpers)
    helper.join();
}

std::optional<HeaderReader::Found> HeaderReader::find(const std::string& name) {
  for (uint32_t i = 0; i < m_dirs.size(); ++i)
    (void)may_hold(i, name);
  return find_known(name, m_counts.probes);
}

// find() once may_hold() has seen the name in every directory: reads the memo only.
std::optional<HeaderReader::Found> HeaderReader::find_known(const std::string& name,
                                                            uint64_t& probes) const {
  size_t slash = name.find('/');
  for (uint32_t i = 0; i < m_dirs.size(); ++i) {
    if (!m_dirs[i].valid())
      continue;
    if (slash != std::string::npos) {
      auto it = m_subtrees[i].find(llvm::StringRef(name).take_front(slash));
      if (it != m_subtrees[i].end() && !it->second)
        continue;
    }
    struct stat st;
    ++probes;
    if (::fstatat(m_dirs[i].get(), name.c_str(), &st, 0) == 0 && S_ISREG(st.st_mode))
      return Found{i, cache::FileStat::of(st)};
  }
  return std::nullopt;
}

// False only when the directory certainly holds no "first/..." (no such subdirectory); any
// other answer (an error, a link to check) means probing the full name.
bool HeaderReader::may_hold(uint32_t dir, const std::string& name) {
  if (!m_dirs[dir].valid())
    return false;
  size_t slash = name.find('/');
  if (slash == std::string::npos)
    return true;
  auto [it, inserted] = m_subtrees[dir].try_emplace(llvm::StringRef(name).take_front(slash), true);
  if (inserted) {
    struct stat st;
    ++m_counts.probes;
    std::string first = name.substr(0, slash);
    if (::fstatat(m_dirs[dir].get(), first.c_str(), &st, 0) == 0)
      it->second = S_ISDIR(st.st_mode);
    else
      it->second = errno != ENOENT && errno != ENOTDIR;
  }
  return it->second;
}

std::optional<Digest128> HeaderReader::hinted(const cache::FileStat& stat) {
  if (!m_options.hints || m_options.use != HintUse::lookup)
    return std::nullopt;
  std::optional<Digest128> digest = m_options.hints->lookup(stat);
  m_counts.from_hints += digest.has_value();
  return digest;
}

// O_NONBLOCK: a FIFO swapped in since the stat cannot hang the check.
int HeaderReader::open_in(uint32_t dir, const std::string& name) const {
  return ::openat(m_dirs[dir].get(), name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
}

std::optional<Digest128> HeaderReader::hash_path(const std::string& path) {
  cache::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  return learn(m_hasher.hash(fd.get()));
}

std::optional<Digest128> HeaderReader::learn(const HashedFile& hashed) {
  if (!hashed.digest)
    return std::nullopt;
  ++m_counts.hashed;
  cache::FileStat stat = cache::FileStat::of(hashed.status);
  if (m_options.hints && hashed.keeps_change_time && stat.ctime_ns < m_settled_before_ns)
    m_options.hints->record({stat, *hashed.digest});
  return hashed.digest;
}

} // namespace specjit::runtime
