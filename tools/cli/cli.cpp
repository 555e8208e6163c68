#include "cli.h"

#include "deploy/log_reader.h"

#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/raw_ostream.h>

#include <fmt/format.h>

#include <cstdio>

namespace specjit::cli {

std::optional<std::string> Args::value(llvm::StringRef flag) const {
  auto it = values.find(flag.str());
  if (it == values.end() || it->second.empty())
    return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::all(llvm::StringRef flag) const {
  auto it = values.find(flag.str());
  return it == values.end() ? std::vector<std::string>{} : it->second;
}

int usage_error(const Context& context, const std::string& message) {
  std::string name = context.command.name.str();
  fmt::print(stderr, "specjit {}: {}; see 'specjit {} --help'\n", name, message, name);
  return k_exit_usage;
}

int report_error(const Context& context, const std::string& message, int code) {
  fmt::print(stderr, "specjit {}: error: {}\n", context.command.name.str(), message);
  return code;
}

int report_error(const Context& context, llvm::Error error, int code) {
  return report_error(context, llvm::toString(std::move(error)), code);
}

void warn(const Context& context, const std::string& message) {
  fmt::print(stderr, "specjit {}: warning: {}\n", context.command.name.str(), message);
}

void print_json(const llvm::json::Value& value) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  stream << llvm::formatv("{0:2}", value);
  stream.flush();
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
}

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1024)
    return fmt::format("{} B", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  for (value /= 1024; value >= 1024 && unit + 1 < std::size(units); value /= 1024)
    ++unit;
  return fmt::format("{:.1f} {}", value, units[unit]);
}

std::string variant_text(const llvm::json::Object& variant) {
  return "{" + deploy::describe_variant(variant) + "}";
}

llvm::json::Value to_json_value(const llvm::json::Object& object) {
  return llvm::json::Object(object);
}

} // namespace specjit::cli
