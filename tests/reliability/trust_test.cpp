// Promises 6 and 7 (RELIABILITY.md) through the real `specjit` binary: nothing planted (a link
// as an entry, a kernel directory or the temp directory; another user's root or layer) is ever
// followed or read, and with a trust key an altered bundle or an untagged layer is refused.
// Without a key, import still never replaces a verified entry with different bytes.
#include "reliability_support.h"
#include "second_user.h"

#include "cache/store_test_support.h"
#include "tools/cli_test_support.h"

#include "cache/entry_format.h"
#include "support/error.h"

#include <llvm/Support/Endian.h>
#include <llvm/Support/Path.h>

using namespace specjit;
using namespace specjit::reliability;
using cache::test::snapshot;
using cache::test::Snapshot;
using specjit::test::Cli;
using specjit::test::exact_manifest;
using specjit::test::ProcessResult;
using specjit::test::read_file;
using specjit::test::write_file;

namespace {

llvm::json::Object parsed(const ProcessResult& result) {
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  auto value = llvm::json::parse(result.out);
  REQUIRE(static_cast<bool>(value));
  REQUIRE(value->getAsObject() != nullptr);
  return *value->getAsObject();
}

llvm::json::Object precompile(const Cli& cli, const std::string& manifest,
                              const std::vector<std::string>& env = {}) {
  return parsed(cli.run({"precompile", "--manifest", manifest, "--json"}, env));
}

std::string private_key(const Cli& cli) {
  std::string path = cli.write("trust.key", std::string(48, 'k'));
  REQUIRE(chmod(path.c_str(), 0600) == 0);
  return path;
}

// An export file with every record's entry as it is, except the one of record `index`, whose
// cubin has a byte changed and whose checksum is recomputed: what an attacker would ship.
std::string tampered_bundle(const std::string& bundle, size_t index) {
  std::string out = bundle.substr(0, 24);
  llvm::StringRef rest = llvm::StringRef(bundle).drop_front(24);
  for (size_t i = 0; !rest.empty(); ++i) {
    uint32_t kernel_size = llvm::support::endian::read32le(rest.data());
    llvm::StringRef kernel = rest.substr(4, kernel_size);
    rest = rest.drop_front(4 + kernel_size);
    uint64_t entry_size = llvm::support::endian::read64le(rest.data());
    std::string entry = rest.substr(8, entry_size).str();
    rest = rest.drop_front(8 + entry_size);
    uint32_t tag_size = llvm::support::endian::read32le(rest.data());
    llvm::StringRef tag = rest.substr(0, 4 + tag_size);
    rest = rest.drop_front(4 + tag_size);
    if (i == index) {
      auto decoded = cache::decode_entry(entry, std::nullopt);
      REQUIRE(static_cast<bool>(decoded));
      std::string cubin = decoded->cubin.str();
      cubin[cubin.size() / 2] ^= 0x20;
      entry = cache::encode_entry(decoded->key, cubin, decoded->metadata);
      REQUIRE(static_cast<bool>(cache::decode_entry(entry, decoded->key))); // checksum is valid
    }
    char size32[4], size64[8];
    llvm::support::endian::write32le(size32, kernel_size);
    out.append(size32, 4);
    out += kernel.str();
    llvm::support::endian::write64le(size64, entry.size());
    out.append(size64, 8);
    out += entry;
    out += tag.str();
  }
  return out;
}

} // namespace

TEST_CASE("T1: links planted as an entry, a kernel directory or the temp directory are not followed") {
  Cli cli;
  std::string manifest = cli.write("m.json", exact_manifest("[1, 2, 3]"));
  REQUIRE(field(precompile(cli, manifest), "compiled") == 3);
  std::string victim = cli.path("victim");
  REQUIRE(mkdir(victim.c_str(), 0755) == 0);
  write_file(victim + "/precious", "bytes nobody may change");
  Snapshot victim_before = snapshot(victim);
  std::vector<std::string> paths = cli.entry_paths();
  REQUIRE(paths.size() == 3);

  // An entry replaced by a link to a file elsewhere: a miss, recompiled, the link moved aside.
  REQUIRE(unlink(paths[0].c_str()) == 0);
  REQUIRE(symlink((victim + "/precious").c_str(), paths[0].c_str()) == 0);
  llvm::json::Object entry_run = precompile(cli, manifest);
  CHECK(field(entry_run, "compiled") == 1);
  CHECK(snapshot(victim) == victim_before);

  // The kernel directory replaced by a link to a directory elsewhere.
  std::string kernel_dir = llvm::sys::path::parent_path(paths[0]).str();
  REQUIRE(rename(kernel_dir.c_str(), cli.path("moved").c_str()) == 0);
  REQUIRE(symlink(victim.c_str(), kernel_dir.c_str()) == 0);
  llvm::json::Object dir_run = precompile(cli, manifest);
  CHECK(field(dir_run, "compiled") == 3);
  CHECK(snapshot(victim) == victim_before);
  llvm::json::Object rerun = precompile(cli, manifest);
  CHECK(field(rerun, "compiled") == 0); // repaired: a disk hit, not recompiled forever
  CHECK(field(rerun, "reused") == 3);

  // The temp directory replaced by a link: the publish fails, nothing lands in the target.
  std::string tmp = cli.cache() + "/v1/tmp";
  REQUIRE(std::system(("rm -rf '" + tmp + "'").c_str()) == 0);
  REQUIRE(symlink(victim.c_str(), tmp.c_str()) == 0);
  std::string more = cli.write("more.json", exact_manifest("[4]"));
  (void)cli.run({"precompile", "--manifest", more, "--json"});
  CHECK(snapshot(victim) == victim_before);
  figures("T1", {{"followed", num(static_cast<int64_t>(!(snapshot(victim) == victim_before)))},
                 {"rehit_after_repair", num(field(rerun, "reused"))}});
}

TEST_CASE("T2: a refused root holds exactly what it held before a precompile") {
  std::optional<OtherUser> other = other_user("T2 other owner");
  for (std::string how : {"world-writable", "other owner"}) {
    CAPTURE(how);
    if (how == "other owner" && !other)
      continue;
    Cli cli;
    std::string manifest = cli.write("m.json", exact_manifest("[1]"));
    REQUIRE(mkdir(cli.cache().c_str(), 0755) == 0);
    if (how == "world-writable")
      REQUIRE(chmod(cli.cache().c_str(), 0777) == 0);
    else
      REQUIRE(chown(cli.cache().c_str(), other->uid, other->gid) == 0);
    Snapshot before = snapshot(cli.cache());
    ProcessResult result = cli.run({"precompile", "--manifest", manifest, "--json"});
    CHECK(result.err.find("refusing to use it") != std::string::npos);
    CHECK(snapshot(cli.cache()) == before);
  }
}

TEST_CASE("T3: log links another user planted in a sticky root are never written through") {
  std::optional<OtherUser> other = other_user("T3");
  if (!other)
    return;
  Cli cli;
  REQUIRE(chmod(cli.path("").c_str(), 0711) == 0); // the other user may pass through
  std::string root = cli.cache(), victim = cli.path("victim.log");
  REQUIRE(mkdir(root.c_str(), 0755) == 0);
  REQUIRE(chmod(root.c_str(), 01777) == 0); // a shared sticky root, owned by us (root)
  write_file(victim, "root's own 0600 file\n");
  REQUIRE(chmod(victim.c_str(), 0600) == 0);
  int64_t victim_mtime = cache::test::mtime_ns(victim);
  // The other user makes logs/ and plants the log file as a link to the victim.
  REQUIRE(as_user(*other, [&] {
            std::string logs = root + "/logs";
            if (mkdir(logs.c_str(), 0777) != 0 || chmod(logs.c_str(), 0777) != 0)
              return 1;
            return symlink(victim.c_str(), (logs + "/events.jsonl").c_str()) == 0 ? 0 : 2;
          }) == 0);
  cache::DiskStore store(cache::test::options_for(root));
  llvm::Expected<int> fd = store.open_log_for_append("events.jsonl");
  REQUIRE(!fd);
  CHECK(specjit::summarize(fd.takeError()).message.find("owned by uid") != std::string::npos);
  CHECK(read_file(victim) == "root's own 0600 file\n");
  CHECK(cache::test::mtime_ns(victim) == victim_mtime);
}

TEST_CASE("T3b: precompile with the default log never writes through a planted log link") {
  std::optional<OtherUser> other = other_user("T3b");
  if (!other)
    return;
  Cli cli;
  std::string root = cli.cache(), victim = cli.path("victim.log");
  std::string manifest = cli.write("m.json", exact_manifest("[1]"));
  REQUIRE(mkdir(root.c_str(), 0755) == 0);
  REQUIRE(chown(root.c_str(), other->uid, other->gid) == 0);
  write_file(victim, "root's own 0600 file\n");
  REQUIRE(chmod(victim.c_str(), 0600) == 0);
  int64_t victim_mtime = cache::test::mtime_ns(victim);
  std::string elsewhere = cli.path("elsewhere");
  REQUIRE(chmod(cli.path("").c_str(), 0711) == 0); // the other user may pass through
  REQUIRE(mkdir(elsewhere.c_str(), 0755) == 0);
  REQUIRE(symlink(victim.c_str(), (elsewhere + "/events.jsonl").c_str()) == 0);
  REQUIRE(as_user(*other, [&] {
            return symlink(elsewhere.c_str(), (root + "/logs").c_str()) == 0 ? 0 : 1;
          }) == 0);
  Snapshot before = snapshot(root);
  (void)cli.run({"precompile", "--manifest", manifest, "--json"}, {"SPECJIT_LOG="});
  CHECK(read_file(victim) == "root's own 0600 file\n");
  CHECK(cache::test::mtime_ns(victim) == victim_mtime);
  CHECK(snapshot(root) == before);
}

TEST_CASE("T4: an altered bundle is refused with a key; without one it never replaces an entry") {
  Cli source;
  std::string key = private_key(source);
  std::string manifest = source.write("m.json", exact_manifest("[1, 2]"));
  REQUIRE(field(precompile(source, manifest), "compiled") == 2);
  std::string bundle = source.path("bundle.sjx");
  REQUIRE(source.run({"export", bundle}, {"SPECJIT_TRUST_KEY_FILE=" + key}).exit_code == 0);
  std::string altered = source.write("altered.sjx", tampered_bundle(read_file(bundle), 0));

  // With the key: the altered record is refused as untrusted, the other one imported.
  Cli keyed;
  ProcessResult refused =
      keyed.run({"import", altered, "--json"}, {"SPECJIT_TRUST_KEY_FILE=" + key});
  CHECK(refused.exit_code == 1);
  llvm::json::Object report = parsed(refused);
  CHECK(field(report, "imported") == 1);
  REQUIRE(report.getArray("bad")->size() == 1);
  CHECK(report.getArray("bad")->front().getAsObject()->getString("reason")->startswith(
      "untrusted: "));
  CHECK(keyed.entry_paths().size() == 1);
  // A bundle exported without a key carries no tags: nothing of it is trusted.
  std::string untagged = source.path("untagged.sjx");
  REQUIRE(source.run({"export", untagged}).exit_code == 0);
  Cli keyed_untagged;
  llvm::json::Object none = parsed(keyed_untagged.run({"import", untagged, "--json"},
                                                      {"SPECJIT_TRUST_KEY_FILE=" + key}));
  CHECK(field(none, "imported") == 0);
  CHECK(none.getArray("bad")->size() == 2);

  // Without a key: the altered entry conflicts with the verified one already there.
  Cli plain;
  REQUIRE(plain.run({"import", bundle}).exit_code == 0);
  std::vector<std::string> paths = plain.entry_paths();
  REQUIRE(paths.size() == 2);
  std::map<std::string, std::string> before;
  for (const std::string& path : paths)
    before[path] = read_file(path);
  ProcessResult conflict = plain.run({"import", altered, "--json"});
  CHECK(conflict.exit_code == 1);
  llvm::json::Object conflicts = parsed(conflict);
  CHECK(conflicts.getArray("conflicts")->size() == 1);
  CHECK(field(conflicts, "unchanged") == 1);
  for (const std::string& path : paths)
    CHECK(read_file(path) == before[path]);
  CHECK(plain.run({"verify"}).exit_code == 0);
  figures("T4", {{"altered_imported_with_key", num(int64_t{keyed.entry_paths().size() == 2})},
                 {"conflicts_reported", num(static_cast<int64_t>(
                                            conflicts.getArray("conflicts")->size()))}});
}

TEST_CASE("T5: a read-only layer owned by another user and world-writable is refused") {
  std::optional<OtherUser> other = other_user("T5");
  if (!other)
    return;
  Cli builder;
  std::string manifest = builder.write("m.json", exact_manifest("[1, 2]"));
  REQUIRE(field(precompile(builder, manifest), "compiled") == 2);
  std::string layer = builder.cache();
  REQUIRE(std::system(("chown -R " + std::to_string(other->uid) + " '" + layer + "'").c_str()) ==
          0);
  REQUIRE(chmod(layer.c_str(), 0777) == 0);

  Cli cli;
  std::vector<std::string> env = {"SPECJIT_CACHE_READONLY_DIRS=" + layer};
  llvm::json::Object config = parsed(cli.run({"config", "--json"}, env));
  REQUIRE(config.getArray("refused_layers")->size() == 1);
  std::string reason =
      config.getArray("refused_layers")->front().getAsObject()->getString("reason")->str();
  CHECK(reason.find("owned by uid " + std::to_string(other->uid)) != std::string::npos);
  ProcessResult verify = cli.run({"verify"}, env);
  CHECK(verify.exit_code == 1);
  CHECK(verify.out.find("refused: layer 1") != std::string::npos);
  llvm::json::Object run = precompile(cli, manifest, env);
  CHECK(field(run, "reused") == 0); // never read
  CHECK(field(run, "compiled") == 2);
  ProcessResult warned = cli.run({"ls"}, env);
  CHECK(warned.err.find("read-only layer refused") != std::string::npos);
}

TEST_CASE("T6: verify --repair, prune and clear on a read-only root say that nothing moved") {
  TempDir dir;
  Cli cli;
  std::string manifest = cli.write("m.json", exact_manifest("[1, 2]"));
  REQUIRE(field(precompile(cli, manifest), "compiled") == 2);
  std::vector<std::string> paths = cli.entry_paths();
  REQUIRE(paths.size() == 2);
  std::string bytes = read_file(paths[0]);
  bytes[bytes.size() / 2] ^= 1;
  write_file(paths[0], bytes);
  std::string root = cli.cache();
  Snapshot before = snapshot(root);
  std::string out = dir / "out";
  int rc = in_private_mount_namespace("T6 read-only bind mount", [&]() -> int {
    if (mount(root.c_str(), root.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        mount(nullptr, root.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0)
      return 77;
    ProcessResult repair = cli.run({"verify", "--repair", "--json"});
    ProcessResult prune = cli.run({"prune", "--max-size", "0", "--json"});
    ProcessResult clear = cli.run({"clear", "--json"});
    write_file(out, repair.out + "\n" + std::to_string(repair.exit_code) + " " +
                        std::to_string(prune.exit_code) + " " + std::to_string(clear.exit_code));
    return 0;
  });
  if (rc == 77)
    return;
  REQUIRE(rc == 0);
  std::string text = read_file(out);
  CHECK(text.find("\"repaired\": false") != std::string::npos);
  CHECK(text.find("\"moved_aside\": true") == std::string::npos);
  CHECK(text.substr(text.rfind('\n') + 1) == "1 1 1");
  CHECK(snapshot(root) == before);
}

TEST_CASE("T7: a directory in place of an entry is reported, repaired, then a disk hit") {
  Cli cli;
  std::string manifest = cli.write("m.json", exact_manifest("[1, 2]"));
  REQUIRE(field(precompile(cli, manifest), "compiled") == 2);
  std::vector<std::string> paths = cli.entry_paths();
  REQUIRE(paths.size() == 2);
  REQUIRE(unlink(paths[0].c_str()) == 0);
  REQUIRE(mkdir(paths[0].c_str(), 0755) == 0);

  llvm::json::Object bad = cli.json({"verify"}, 1);
  REQUIRE(bad.getArray("bad")->size() == 1);
  const llvm::json::Object& finding = *bad.getArray("bad")->front().getAsObject();
  CHECK(*finding.getString("reason") == "not_a_file");
  CHECK(*finding.getString("path") == paths[0]);
  llvm::json::Object repaired = cli.json({"verify", "--repair"}, 1);
  CHECK(*repaired.getBoolean("repaired") == true);
  CHECK(cli.run({"verify"}).exit_code == 0);
  CHECK(field(precompile(cli, manifest), "compiled") == 1);

  // Without verify: the engine itself moves the directory aside and publishes.
  REQUIRE(unlink(paths[1].c_str()) == 0);
  REQUIRE(mkdir(paths[1].c_str(), 0755) == 0);
  CHECK(field(precompile(cli, manifest), "compiled") == 1);
  llvm::json::Object rerun = precompile(cli, manifest);
  CHECK(field(rerun, "compiled") == 0);
  CHECK(field(rerun, "reused") == 2);
  figures("T7", {{"recompiled_after_repair", num(field(rerun, "compiled"))}});
}
