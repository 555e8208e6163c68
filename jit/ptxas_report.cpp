#include "jit/ptxas_report.h"

#include <llvm/ADT/SmallVector.h>

#include <cstring>
#include <optional>

namespace specjit::jit {
namespace {

// The name between the first pair of single quotes after `marker`, e.g. the function of
// "... in function '_Z3fooPf', 820 bytes spill stores". Empty when the line has none.
llvm::StringRef quoted_after(llvm::StringRef line, llvm::StringRef marker) {
  size_t at = line.find(marker);
  if (at == llvm::StringRef::npos)
    return {};
  llvm::StringRef rest = line.drop_front(at + marker.size());
  size_t end = rest.find('\'');
  return end == llvm::StringRef::npos ? llvm::StringRef() : rest.take_front(end);
}

// One comma-separated item of a report line, "Used 32 registers" or "384 bytes smem", split
// into its number and unit ("registers", "bytes smem"); nullopt when it has no leading number.
struct Quantity {
  long long value;
  llvm::StringRef unit;
};

std::optional<Quantity> parse_quantity(llvm::StringRef item) {
  item = item.trim();
  if (!item.consume_front("Used "))
    item.consume_front("used ");
  item = item.ltrim();
  llvm::StringRef digits = item.take_while([](char c) { return c >= '0' && c <= '9'; });
  long long value = 0;
  if (digits.empty() || digits.getAsInteger(10, value))
    return std::nullopt;
  return Quantity{value, item.drop_front(digits.size()).trim()};
}

// Applies every quantity of a "Used N registers, ..." or "N bytes stack frame, ..." line.
void apply_quantities(llvm::StringRef text, ResourceUsage& usage) {
  llvm::SmallVector<llvm::StringRef, 8> items;
  text.split(items, ',');
  for (llvm::StringRef item : items) {
    std::optional<Quantity> q = parse_quantity(item);
    if (!q)
      continue;
    int value = static_cast<int>(q->value);
    if (q->unit == "registers")
      usage.registers = value;
    else if (q->unit == "bytes smem")
      usage.shared_bytes = value;
    else if (q->unit == "bytes stack frame")
      usage.stack_bytes = value;
    else if (q->unit == "bytes spill stores")
      usage.spill_store_bytes = value;
    else if (q->unit == "bytes spill loads")
      usage.spill_load_bytes = value;
  }
}

// "ptxas warning : ..." and coded "ptxas info : (C7515) ..." lines are diagnostics; plain info
// lines (gmem totals, compile time, "Overriding maximum register limit") are not.
bool is_diagnostic(llvm::StringRef line) {
  if (line.startswith("ptxas warning"))
    return true;
  if (!line.startswith("ptxas info"))
    return false;
  llvm::StringRef message = line.split(':').second.ltrim();
  return message.size() > 3 && message[0] == '(' && message[1] == 'C' && message[2] >= '0' &&
         message[2] <= '9';
}

} // namespace

ResourceUsage parse_ptxas_report(llvm::StringRef log, llvm::StringRef lowered_name) {
  ResourceUsage usage;
  // Which function the current block of lines describes: "Compiling entry function 'X'" opens
  // an entry's block (its "Used N registers" line follows), "Function properties for X" the
  // block of X's stack / spill line (X may also be a non-inlined device function).
  llvm::StringRef entry, properties_of;
  llvm::SmallVector<llvm::StringRef, 32> lines;
  log.split(lines, '\n');
  for (llvm::StringRef raw : lines) {
    llvm::StringRef line = raw.trim();
    if (line.empty())
      continue;
    if (is_diagnostic(line)) {
      // A diagnostic that names a function belongs to that function only.
      llvm::StringRef function = quoted_after(line, "function '");
      if (function.empty() || function == lowered_name)
        usage.warnings.push_back(line.str());
      continue;
    }
    if (llvm::StringRef name = quoted_after(line, "Compiling entry function '"); !name.empty()) {
      entry = name;
      continue;
    }
    if (size_t at = line.find("Function properties for "); at != llvm::StringRef::npos) {
      properties_of = line.drop_front(at + strlen("Function properties for ")).trim();
      continue;
    }
    // NVRTC 13 prefixes the stack / spill line with "ptxas         ."; older ptxas indents it.
    if (line.contains("bytes stack frame")) {
      if (properties_of == lowered_name)
        apply_quantities(line.drop_until([](char c) { return c >= '0' && c <= '9'; }), usage);
      continue;
    }
    if (size_t at = line.find("Used "); at != llvm::StringRef::npos && line.contains("registers")) {
      if (entry == lowered_name)
        apply_quantities(line.drop_front(at), usage);
      continue;
    }
  }
  return usage;
}

} // namespace specjit::jit
