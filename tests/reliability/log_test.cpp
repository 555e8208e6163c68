// L1-L3 (docs/reliability.md, "The log"): the recompilation log keeps whole lines when the disk
// fills mid-write, rotates at its limit while several processes append, and counts toward the
// cache's size limit.
#include "reliability_support.h"

#include "deploy/log_reader.h"
#include "runtime/event_log.h"

#include <llvm/Support/FileSystem.h>

using namespace specjit;
using namespace specjit::reliability;

namespace {

llvm::json::Object numbered(int64_t seq, size_t padding) {
  return llvm::json::Object{{"event", "compile"},
                            {"kernel", "scale_tokens"},
                            {"ms", static_cast<double>(seq)},
                            {"detail", std::string(padding, 'x')}};
}

uint64_t size_of(const std::string& path) {
  uint64_t size = 0;
  return llvm::sys::fs::file_size(path, size) ? 0 : size;
}

struct Read {
  std::vector<int64_t> seqs;
  size_t bad_lines = 0;
  size_t files = 0;
};

Read read_back(const std::string& path) {
  Read out;
  auto scan = deploy::scan_log(path, [&](deploy::LogEvent&& event, llvm::StringRef) {
    out.seqs.push_back(static_cast<int64_t>(event.ms));
  });
  REQUIRE_MESSAGE(static_cast<bool>(scan), llvm::toString(scan.takeError()));
  out.bad_lines = scan->bad_lines;
  out.files = scan->files.size();
  return out;
}

} // namespace

TEST_CASE("L1: a disk that fills mid-line leaves no cut line; the next event after space returns "
          "is whole") {
  TempDir dir;
  std::string mount_point = dir / "small";
  REQUIRE(mkdir(mount_point.c_str(), 0755) == 0);
  std::string log_path = mount_point + "/logs/events.jsonl";
  int rc = in_private_mount_namespace("L1 full tmpfs", [&]() -> int {
    if (mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=32k") != 0)
      return 77;
    test::write_file(mount_point + "/filler", std::string(8192, 'f')); // freed later
    runtime::EventLog log(log_path, 1ull << 30);
    // ~700-byte lines against 4 KiB pages: the line that meets the full disk is cut.
    int64_t seq = 0;
    for (; seq < 200; ++seq)
      log.write(numbered(seq, 640));
    uint64_t full_size = size_of(log_path);
    unlink((mount_point + "/filler").c_str()); // space returns
    log.write(numbered(1000, 640));
    log.write(numbered(1001, 10));
    std::string text = test::read_file(log_path);
    test::write_file(dir / "copy.jsonl", text);
    test::write_file(dir / "sizes", num(static_cast<int64_t>(full_size)));
    return 0;
  });
  if (rc == 77)
    return;
  REQUIRE(rc == 0);
  std::string text = test::read_file(dir / "copy.jsonl");
  REQUIRE_FALSE(text.empty());
  CHECK(text.back() == '\n');
  Read read = read_back(dir / "copy.jsonl");
  CHECK(read.bad_lines == 0); // no cut line, nothing glued
  REQUIRE(read.seqs.size() >= 3);
  CHECK(read.seqs.size() < 200); // the disk did fill
  // A prefix of the events, then the two written after space returned, all whole.
  for (size_t i = 0; i + 2 < read.seqs.size(); ++i)
    CHECK(read.seqs[i] == static_cast<int64_t>(i));
  CHECK(read.seqs[read.seqs.size() - 2] == 1000);
  CHECK(read.seqs.back() == 1001);
  figures("L1", {{"fs_kb", "32"},
                 {"events_before_full", num(static_cast<int64_t>(read.seqs.size() - 2))},
                 {"bad_lines", num(static_cast<int64_t>(read.bad_lines))},
                 {"after_space_returned", "2"}});
}

TEST_CASE("L2: four processes appending past the limit rotate the log without losing a line") {
  TempDir dir;
  const std::string path = dir / "logs/events.jsonl";
  const uint64_t limit = 64 << 10;
  const int writers = 4, per_writer = 1500;
  std::vector<pid_t> children;
  for (int w = 0; w < writers; ++w) {
    pid_t pid = fork();
    if (pid == 0) {
      runtime::EventLog log(path, limit);
      for (int i = 0; i < per_writer; ++i)
        log.write(numbered(w * 100000 + i, 80));
      _exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
  }
  Read read = read_back(path);
  CHECK(read.bad_lines == 0);
  CHECK(read.files == 3);
  // Within each writer, the kept events are in order and contiguous up to its last one.
  std::map<int64_t, std::vector<int64_t>> by_writer;
  for (int64_t seq : read.seqs)
    by_writer[seq / 100000].push_back(seq % 100000);
  uint64_t total = 0;
  for (const std::string& file : runtime::rotated_log_paths(path))
    total += size_of(file);
  CHECK(total <= 3 * limit + 3 * writers * 200); // rotation bounds the log
  for (auto& [writer, seqs] : by_writer) {
    CAPTURE(writer);
    CHECK(std::is_sorted(seqs.begin(), seqs.end()));
    CHECK(seqs.back() == per_writer - 1); // every writer's newest event is kept
  }
  figures("L2", {{"writers", num(int64_t{writers})},
                 {"events_written", num(int64_t{writers * per_writer})},
                 {"events_kept", num(static_cast<int64_t>(read.seqs.size()))},
                 {"bad_lines", num(static_cast<int64_t>(read.bad_lines))},
                 {"log_kb", num(static_cast<int64_t>(total / 1024))},
                 {"limit_kb", num(static_cast<int64_t>(limit / 1024))}});
}

TEST_CASE("L3: the log under <root>/logs counts toward SPECJIT_CACHE_MAX_SIZE") {
  TempDir dir;
  std::string root = dir / "cache";
  Child fill = spawn({"prepare", "--policy", "exact", "--first", "1", "--last", "4"},
                     env_for(root, root + "/logs/events.jsonl"), dir / "fill");
  REQUIRE(reap(fill));
  REQUIRE(fill.exit_code == 0);
  RootCheckResult before = check_root(root, dir / "no-references");
  REQUIRE(before.entries == 4);
  // A rotated log half as large as the entries, and a limit that holds the entries and the
  // live log but not the rotated one: entries must make room for it.
  test::write_file(root + "/logs/events.1.jsonl", std::string(before.bytes / 2, 'l'));
  uint64_t live = size_of(root + "/logs/events.jsonl");
  uint64_t limit = before.bytes + live + 1024;
  cache::StoreOptions options;
  options.root = root;
  cache::DiskStore store(options);
  cache::PruneResult pruned = store.prune(limit);
  CHECK(pruned.bytes_before >= before.bytes + before.bytes / 2);
  CHECK(pruned.removed >= 1); // entries made room for the log
  CHECK(pruned.removed < 4);
  CHECK(pruned.bytes_after <= limit);
  CHECK(llvm::sys::fs::exists(root + "/logs/events.1.jsonl")); // the log itself is kept
  figures("L3", {{"entries_bytes", num(static_cast<int64_t>(before.bytes))},
                 {"log_bytes", num(static_cast<int64_t>(size_of(root + "/logs/events.1.jsonl") +
                                                        size_of(root + "/logs/events.jsonl")))},
                 {"removed", num(static_cast<int64_t>(pruned.removed))},
                 {"bytes_after", num(static_cast<int64_t>(pruned.bytes_after))}});
}
