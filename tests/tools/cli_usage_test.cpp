// specjit's help and usage errors: every subcommand documents itself with an example, and bad
// usage exits 2 with a one-line hint.
#include "cli_test_support.h"

using namespace specjit::test;

namespace {
const char* const k_commands[] = {"precompile", "log",   "why",   "stats",  "ls",     "inspect",
                                  "verify",     "prune", "clear", "export", "import", "config"};
}

TEST_CASE("--help of every subcommand exits 0 and shows an example") {
  Cli cli;
  for (const char* command : k_commands) {
    INFO(std::string(command));
    ProcessResult result = cli.run({command, "--help"});
    CHECK(result.exit_code == 0);
    CHECK(result.out.find(std::string("usage: specjit ") + command) != std::string::npos);
    CHECK(result.out.find("example:\n  specjit") != std::string::npos);
  }
  ProcessResult overview = cli.run({"--help"});
  CHECK(overview.exit_code == 0);
  for (const char* command : k_commands)
    CHECK(overview.out.find(command) != std::string::npos);
  CHECK(cli.run({"help", "verify"}).exit_code == 0);
}

TEST_CASE("an unknown subcommand or a bad flag exits 2 with a one-line hint") {
  Cli cli;
  ProcessResult unknown = cli.run({"frobnicate"});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err == "specjit: unknown command 'frobnicate'; see 'specjit --help'\n");
  ProcessResult flag = cli.run({"ls", "--colour"});
  CHECK(flag.exit_code == 2);
  CHECK(flag.err == "specjit ls: unknown option '--colour'; see 'specjit ls --help'\n");
  CHECK(cli.run({}).exit_code == 2);
  CHECK(cli.run({"ls", "extra"}).exit_code == 2);
  CHECK(cli.run({"inspect"}).exit_code == 2);
  CHECK(cli.run({"stats", "--cache-dir"}).exit_code == 2);
  CHECK(cli.run({"verify", "--repair=yes"}).exit_code == 2);
}

TEST_CASE("read commands on an empty cache succeed with empty answers") {
  Cli cli;
  CHECK(field(cli.json({"stats"}), "entries") == 0);
  CHECK(cli.json({"ls"}).getArray("entries")->empty());
  CHECK(field(cli.json({"verify"}), "entries") == 0);
  CHECK(field(cli.json({"clear"}), "removed") == 0);
}
