// specjit verify, prune, clear, stats, ls, inspect, export, import and config on real roots.
#include "cli_test_support.h"

#include <algorithm>
#include <fstream>

using namespace specjit::test;

namespace {

void flip_byte(const std::string& path, size_t offset) {
  std::string bytes = read_file(path);
  REQUIRE(offset < bytes.size());
  bytes[offset] = static_cast<char>(bytes[offset] ^ 0x40);
  write_file(path, bytes);
}

void truncate_to(const std::string& path, size_t size) {
  std::string bytes = read_file(path);
  write_file(path, bytes.substr(0, std::min(size, bytes.size())));
}

} // namespace

TEST_CASE("verify names a flipped byte and a truncated entry; --repair lets precompile redo them") {
  Cli cli;
  std::string manifest = cli.write("m.json", exact_manifest("[1, 2, 3, 4]"));
  REQUIRE(cli.run({"precompile", "--manifest", manifest}).exit_code == 0);
  llvm::json::Object clean = cli.json({"verify"});
  CHECK(field(clean, "entries") == 4);
  CHECK(clean.getArray("bad")->empty());
  std::vector<std::string> paths = cli.entry_paths();
  REQUIRE(paths.size() == 4);
  flip_byte(paths[0], read_file(paths[0]).size() / 2);
  truncate_to(paths[1], 40);

  ProcessResult text = cli.run({"verify"});
  CHECK(text.exit_code == 1);
  CHECK(text.out.find(paths[0]) != std::string::npos);
  CHECK(text.out.find(paths[1]) != std::string::npos);
  llvm::json::Object bad = cli.json({"verify"}, 1);
  std::set<std::string> named;
  for (const llvm::json::Value& item : *bad.getArray("bad")) {
    named.insert(item.getAsObject()->getString("path")->str());
    CHECK(!item.getAsObject()->getString("reason")->empty());
  }
  CHECK(named == std::set<std::string>{paths[0], paths[1]});

  CHECK(cli.run({"verify", "--repair"}).exit_code == 1);
  CHECK(cli.run({"verify"}).exit_code == 0);
  CHECK(field(cli.json({"stats"}), "corrupt_quarantined") == 2);
  llvm::json::Object redo = cli.json({"precompile", "--manifest", manifest});
  CHECK(field(redo, "compiled") == 2);
  CHECK(field(redo, "reused") == 2);
}

TEST_CASE("prune --max-size 0 empties the cache; clear removes everything") {
  Cli cli;
  std::string manifest = cli.write("m.json", exact_manifest("[1, 2]"));
  REQUIRE(cli.run({"precompile", "--manifest", manifest}).exit_code == 0);
  llvm::json::Object stats = cli.json({"stats"});
  CHECK(field(stats, "entries") == 2);
  CHECK(field(stats, "bytes") > 0);
  llvm::json::Object pruned = cli.json({"prune", "--max-size", "0"});
  CHECK(field(pruned, "removed") == 2);
  CHECK(cli.json({"ls"}).getArray("entries")->empty());
  CHECK(cli.run({"prune"}).exit_code == 2);
  CHECK(cli.run({"prune", "--max-size", "lots"}).exit_code == 2);

  REQUIRE(cli.run({"precompile", "--manifest", manifest}).exit_code == 0);
  CHECK(cli.run({"clear"}).exit_code == 0);
  CHECK(field(cli.json({"stats"}), "entries") == 0);
}

TEST_CASE("export then import into an empty root leaves nothing to compile") {
  Cli cli;
  std::string manifest = cli.write("m.json", exact_manifest("[1, 2, 3]"));
  REQUIRE(cli.run({"precompile", "--manifest", manifest}).exit_code == 0);
  std::string file = cli.path("kernels.sjx");
  CHECK(field(cli.json({"export", file}), "exported") == 3);
  std::string other = cli.path("other");
  llvm::json::Object imported = cli.json({"import", file, "--cache-dir", other});
  CHECK(field(imported, "imported") == 3);
  CHECK(cli.keys(other) == cli.keys(cli.cache()));
  llvm::json::Object again = cli.json({"precompile", "--manifest", manifest, "--cache-dir", other});
  CHECK(field(again, "compiled") == 0);
  CHECK(field(again, "reused") == 3);
}

TEST_CASE("import verifies every entry and rejects damaged export files") {
  Cli cli;
  REQUIRE(cli.run({"precompile", "--manifest", cli.write("m.json", exact_manifest("[1, 2]"))})
              .exit_code == 0);
  std::string file = cli.path("kernels.sjx");
  REQUIRE(cli.run({"export", file}).exit_code == 0);
  std::string bytes = read_file(file);

  std::string damaged = cli.path("damaged.sjx");
  write_file(damaged, bytes);
  flip_byte(damaged, bytes.size() - 10); // inside the last entry's metadata
  llvm::json::Object result = cli.json({"import", damaged, "--cache-dir", cli.path("a")}, 1);
  CHECK(field(result, "imported") == 1);
  CHECK(result.getArray("bad")->size() == 1);

  std::string truncated = cli.path("truncated.sjx");
  write_file(truncated, bytes.substr(0, bytes.size() - 100));
  ProcessResult cut = cli.run({"import", truncated, "--cache-dir", cli.path("b")});
  CHECK(cut.exit_code == 1);
  CHECK(cut.err.find("truncated") != std::string::npos);
  CHECK_FALSE(directory_has_entries(cli.path("b")));

  write_file(cli.path("junk.sjx"), "hello");
  CHECK(cli.run({"import", cli.path("junk.sjx")}).exit_code == 1);
  CHECK(cli.run({"import"}).exit_code == 2);
}

TEST_CASE("inspect shows an entry's metadata and extracts its cubin as an ELF file") {
  Cli cli;
  REQUIRE(cli.run({"precompile", "--manifest", cli.write("m.json", exact_manifest("[62]"))})
              .exit_code == 0);
  llvm::json::Object listing = cli.json({"ls"});
  REQUIRE(listing.getArray("entries")->size() == 1);
  const llvm::json::Object& entry = *(*listing.getArray("entries"))[0].getAsObject();
  for (const char* name : {"path", "kernel", "variant", "key", "bytes", "registers", "spill_bytes",
                           "shared_bytes", "warnings"})
    CHECK_MESSAGE(entry.get(name) != nullptr, name);
  std::string key = entry.getString("key")->str();
  std::string cubin = cli.path("k.cubin");
  ProcessResult result = cli.run({"inspect", key.substr(0, 8), "--extract-cubin", cubin});
  CHECK(result.exit_code == 0);
  CHECK(result.out.find("scale_tokens") != std::string::npos);
  CHECK(result.out.find("num_tokens=62") != std::string::npos);
  CHECK(result.out.find("registers") != std::string::npos);
  CHECK(read_file(cubin).substr(0, 4) == "\x7f"
                                         "ELF");
  llvm::json::Object by_path = cli.json({"inspect", entry.getString("path")->str()});
  CHECK(by_path.getString("key")->str() == key);
  CHECK(by_path.getObject("metadata") != nullptr);
  CHECK(cli.run({"inspect", "ffffffffffff"}).exit_code == 1);
  CHECK(cli.run({"inspect", "not-a-key"}).exit_code == 1);
}

TEST_CASE("config shows where each setting came from: environment or command line") {
  Cli cli;
  auto cache_dir_row = [](const llvm::json::Object& config) {
    for (const llvm::json::Value& row : *config.getArray("settings"))
      if (row.getAsObject()->getString("name") == llvm::StringRef("cache_dir"))
        return *row.getAsObject();
    FAIL("no cache_dir row");
    return llvm::json::Object{};
  };
  llvm::json::Object from_env = cache_dir_row(cli.json({"config"}));
  CHECK(from_env.getString("value")->str() == cli.cache());
  CHECK(from_env.getString("source")->str() == "environment");
  llvm::json::Object from_flag = cache_dir_row(cli.json({"config", "--cache-dir", "/elsewhere"}));
  CHECK(from_flag.getString("value")->str() == "/elsewhere");
  CHECK(from_flag.getString("source")->str() == "command line");
  ProcessResult text = cli.run({"config"});
  CHECK(text.out.find("SPECJIT_CACHE_DIR") != std::string::npos);
  CHECK(text.out.find("environment") != std::string::npos);
  CHECK(cli.run({"config"}, {"SPECJIT_STRICT=sometimes"}).exit_code == 2);
}
