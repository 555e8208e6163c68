// The `specjit` command line: a table of subcommands, a small argument parser shared by all,
// and the helpers every subcommand uses to report (docs/cli.md).
//
// Exit codes scripts can trust: 0 fine, 1 the command found problems or some work failed,
// 2 bad usage (always with a one-line hint). Errors are messages, never crashes.
#pragma once

#include "cache/disk_store.h"
#include "runtime/store_config.h"
#include "support/config.h"

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/JSON.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace specjit::cli {

inline constexpr int k_exit_ok = 0;
inline constexpr int k_exit_problems = 1;
inline constexpr int k_exit_usage = 2;

struct Flag {
  llvm::StringRef name; // "--kernel", "-j"
  bool takes_value = false;
  bool repeatable = false;
};

struct Args {
  std::map<std::string, std::vector<std::string>> values; // flag -> its values ("" for switches)
  std::vector<std::string> positional;

  bool has(llvm::StringRef flag) const { return values.count(flag.str()) != 0; }
  std::optional<std::string> value(llvm::StringRef flag) const;
  std::vector<std::string> all(llvm::StringRef flag) const;
};

struct Command;

struct Context {
  const Command& command;
  Args args;
  Config config; // environment, then --cache-dir
  bool json = false;
};

struct Command {
  llvm::StringRef name;
  llvm::StringRef summary; // one line, for `specjit --help`
  llvm::StringRef usage;   // "precompile [--manifest FILE]... [-j N]"
  llvm::StringRef options; // one option per line, indented
  llvm::StringRef example; // a complete command line
  std::vector<Flag> flags; // besides the global --cache-dir, --json, --help
  size_t min_positional = 0;
  size_t max_positional = 0;
  int (*run)(Context& context) = nullptr;
};

std::vector<Command> precompile_commands();
std::vector<Command> log_commands();
std::vector<Command> cache_commands();
std::vector<Command> transfer_commands();
std::vector<Command> inspect_commands();
std::vector<Command> remote_commands();

// Prints "specjit NAME: MESSAGE; see 'specjit NAME --help'" and returns k_exit_usage.
int usage_error(const Context& context, const std::string& message);
// Prints "specjit NAME: error: MESSAGE" and returns `code`.
int report_error(const Context& context, llvm::Error error, int code = k_exit_problems);
int report_error(const Context& context, const std::string& message, int code = k_exit_problems);
void warn(const Context& context, const std::string& message);

void print_json(const llvm::json::Value& value);

// The store of the configured root and read-only layers (runtime/store_config.h).
using runtime::store_options;

// "1.2 MiB"
std::string format_bytes(uint64_t bytes);
// A variant object as "{cols=128, num_tokens=62}".
std::string variant_text(const llvm::json::Object& variant);
llvm::json::Value to_json_value(const llvm::json::Object& object);

} // namespace specjit::cli
