// specjit: precompile, inspect and maintain the kernel cache (docs/cli.md).
#include "cli.h"

#include <llvm/ADT/STLExtras.h>

#include <fmt/format.h>

#include <cstdio>

namespace specjit::cli {
namespace {

const Flag k_global_flags[] = {
    {"--cache-dir", true, false},
    {"--json", false, false},
    {"--help", false, false},
};

std::vector<Command> all_commands() {
  std::vector<Command> commands;
  for (auto&& group : {precompile_commands(), log_commands(), cache_commands(), inspect_commands(),
                       transfer_commands(), remote_commands()})
    commands.insert(commands.end(), group.begin(), group.end());
  return commands;
}

void print_overview(std::FILE* out, const std::vector<Command>& commands) {
  fmt::print(out, "usage: specjit COMMAND [options]\n\n"
                  "Precompiles, inspects and maintains the specjit kernel cache.\n\ncommands:\n");
  for (const Command& command : commands)
    fmt::print(out, "  {:<11} {}\n", command.name.str(), command.summary.str());
  fmt::print(out, "\nglobal options (every command):\n"
                  "  --cache-dir DIR  the cache root (default: SPECJIT_CACHE_DIR, then "
                  "$XDG_CACHE_HOME/specjit, ~/.cache/specjit)\n"
                  "  --json           machine-readable output\n"
                  "  --help           help for a command, with an example\n\n"
                  "exit codes: 0 fine, 1 problems found or work failed, 2 bad usage\n"
                  "example: specjit precompile --arch sm_90a -j 8\n");
}

void print_help(const Command& command) {
  fmt::print("usage: specjit {}\n\n{}\n\noptions:\n{}", command.usage.str(), command.summary.str(),
             command.options.str());
  fmt::print("  --cache-dir DIR     the cache root\n"
             "  --json              machine-readable output\n"
             "  --help              this help\n\n"
             "example:\n  {}\n",
             command.example.str());
}

const Flag* find_flag(const Command& command, llvm::StringRef name) {
  for (const Flag& flag : command.flags)
    if (flag.name == name)
      return &flag;
  for (const Flag& flag : k_global_flags)
    if (flag.name == name)
      return &flag;
  return nullptr;
}

// Accepts "--flag value", "--flag=value" and "-j8". Returns an error message, or "" when fine.
std::string parse_args(const Command& command, llvm::ArrayRef<std::string> argv, Args& args) {
  bool only_positional = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    llvm::StringRef arg = argv[i];
    if (only_positional || arg.size() < 2 || arg[0] != '-') {
      args.positional.push_back(arg.str());
      continue;
    }
    if (arg == "--") {
      only_positional = true;
      continue;
    }
    if (arg == "-h")
      arg = "--help";
    auto [name, inline_value] = arg.split('=');
    std::optional<std::string> value;
    if (name.size() != arg.size())
      value = inline_value.str();
    else if (!arg.startswith("--") && arg.size() > 2) { // "-j8"
      name = arg.take_front(2);
      value = arg.drop_front(2).str();
    }
    const Flag* flag = find_flag(command, name);
    if (flag == nullptr)
      return fmt::format("unknown option '{}'", name.str());
    if (flag->takes_value && !value) {
      if (i + 1 >= argv.size())
        return fmt::format("option '{}' needs a value", name.str());
      value = argv[++i];
    }
    if (!flag->takes_value && value)
      return fmt::format("option '{}' takes no value", name.str());
    auto& slot = args.values[name.str()];
    if (!slot.empty() && !flag->repeatable && flag->takes_value)
      return fmt::format("option '{}' given twice", name.str());
    slot.push_back(value.value_or(""));
  }
  return "";
}

int run_command(const Command& command, llvm::ArrayRef<std::string> argv) {
  Context context{command, {}, {}, false};
  std::string problem = parse_args(command, argv, context.args);
  if (!problem.empty())
    return usage_error(context, problem);
  if (context.args.has("--help")) {
    print_help(command);
    return k_exit_ok;
  }
  size_t count = context.args.positional.size();
  if (count < command.min_positional)
    return usage_error(context, "missing argument");
  if (count > command.max_positional)
    return usage_error(context,
                       fmt::format("unexpected argument '{}'", context.args.positional.back()));
  auto config = Config::from_environment();
  if (!config)
    return report_error(context, config.takeError(), k_exit_usage);
  context.config = std::move(*config);
  if (auto dir = context.args.value("--cache-dir")) {
    if (dir->empty())
      return usage_error(context, "--cache-dir needs a directory");
    context.config.cache_dir.set(*dir, SettingSource::cli_flag);
  }
  context.json = context.args.has("--json");
  return command.run(context);
}

} // namespace
} // namespace specjit::cli

int main(int argc, char** argv) {
  using namespace specjit::cli;
  std::vector<Command> commands = all_commands();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_overview(stderr, commands);
    return k_exit_usage;
  }
  llvm::StringRef name = args.front();
  if (name == "--help" || name == "-h" || name == "help") {
    if (args.size() > 1)
      for (const Command& command : commands)
        if (command.name == args[1])
          return run_command(command, {"--help"});
    print_overview(stdout, commands);
    return k_exit_ok;
  }
  for (const Command& command : commands)
    if (command.name == name)
      return run_command(command, llvm::ArrayRef<std::string>(args).drop_front());
  fmt::print(stderr, "specjit: unknown command '{}'; see 'specjit --help'\n", name.str());
  return k_exit_usage;
}
