// libFuzzer target for the MoE tile-table parser (F1): ops::parse_moe_config_table reads tables a
// user names (a manifest's config_table, specjit-bench --table, FusedMoeOptions), so for any text
// it must return a table or an error, never crash, hang, leak or overflow. A table it accepts
// must survive its own writer: written, read again and written again, the same text.
#include "ops/moe/config.h"

#include <llvm/Support/raw_ostream.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace {

std::string write(const specjit::ops::MoeConfigTable& table) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << specjit::ops::moe_config_table_to_json(table);
  return os.str();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char*>(data), size);
  auto table = specjit::ops::parse_moe_config_table(text);
  if (!table) {
    llvm::consumeError(table.takeError());
    return 0;
  }
  const std::string first = write(*table);
  auto again = specjit::ops::parse_moe_config_table(first);
  if (!again) {
    llvm::errs() << "the writer's text of an accepted table is refused: "
                 << llvm::toString(again.takeError()) << "\n"
                 << first << "\n";
    std::abort();
  }
  if (write(*again) != first) {
    llvm::errs() << "a table changed on a second write:\n" << first << "\n";
    std::abort();
  }
  return 0;
}
