// libFuzzer target for the export file reader (F1): cache::decode_export reads files an operator
// imports from elsewhere, so for any bytes it must return records or an error, never crash, read
// out of bounds or allocate more than the input. Records it returns must survive the writer:
// written again, the same records.
#include "cache/export_format.h"

#include <llvm/Support/raw_ostream.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

using namespace specjit;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char*>(data), size);
  auto records = cache::decode_export(bytes);
  if (!records) {
    llvm::consumeError(records.takeError());
    return 0;
  }
  cache::ExportWriter writer;
  for (const cache::ExportRecord& record : *records)
    writer.add(record.kernel, record.entry,
               llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(record.tag.data()),
                                       record.tag.size()));
  const std::string file = writer.file();
  auto again = cache::decode_export(file);
  if (!again) {
    llvm::errs() << "the writer's file is refused: " << llvm::toString(again.takeError()) << "\n";
    std::abort();
  }
  if (again->size() != records->size())
    std::abort();
  for (size_t i = 0; i < records->size(); ++i) {
    const cache::ExportRecord &a = (*records)[i], &b = (*again)[i];
    if (a.kernel != b.kernel || a.entry != b.entry || a.tag != b.tag)
      std::abort();
  }
  return 0;
}
