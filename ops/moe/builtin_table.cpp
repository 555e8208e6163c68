#include "ops/moe/builtin_table.h"

#include "jit/embedded_sources.h"

namespace specjit::ops {

// Generated from ops/moe/tables/moe-configs.json (ops/CMakeLists.txt).
llvm::ArrayRef<jit::EmbeddedFile> embedded_moe_tables();

llvm::StringRef builtin_moe_config_table_json() {
  for (const jit::EmbeddedFile& file : embedded_moe_tables())
    if (file.name == "moe-configs.json")
      return file.text;
  return {};
}

const MoeConfigTable& builtin_moe_config_table() {
  static const MoeConfigTable table = [] {
    auto parsed = parse_moe_config_table(builtin_moe_config_table_json());
    if (!parsed) {
      llvm::consumeError(parsed.takeError());
      return MoeConfigTable{};
    }
    return std::move(*parsed);
  }();
  return table;
}

} // namespace specjit::ops
