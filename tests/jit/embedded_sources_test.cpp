#include "jit/embedded_sources.h"

#include "support/error.h"
#include "test_support.h"

#include <doctest/doctest.h>

#include <llvm/ADT/STLExtras.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>

#include <algorithm>
#include <set>
#include <string>

using namespace specjit;
using namespace specjit::jit;

namespace {

const std::string k_kernels_root = std::string(SPECJIT_SOURCE_DIR) + "/kernels_src";

// The kernel sources on disk, as names relative to kernels_src/ (what jit/CMakeLists.txt embeds).
std::set<std::string> kernel_files_on_disk() {
  std::set<std::string> names;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(k_kernels_root, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef path = it->path();
    llvm::StringRef ext = llvm::sys::path::extension(path);
    if (ext != ".cu" && ext != ".cuh" && ext != ".h")
      continue;
    names.insert(path.drop_front(k_kernels_root.size() + 1).str());
  }
  REQUIRE(!ec);
  return names;
}

} // namespace

TEST_CASE("every kernel source under kernels_src is embedded byte for byte") {
  std::set<std::string> on_disk = kernel_files_on_disk();
  REQUIRE(on_disk.count("test/scale_tokens.cu") == 1);
  std::set<std::string> embedded;
  for (const EmbeddedFile& file : embedded_files()) {
    embedded.insert(file.name.str());
    CAPTURE(file.name.str());
    CHECK(file.text == test::read_file(k_kernels_root + "/" + file.name.str()));
    // The generator appends a NUL after each text, so texts are also C strings.
    CHECK(file.text.data()[file.text.size()] == '\0');
  }
  CHECK(embedded == on_disk);
}

TEST_CASE("the embedded table is sorted by name, so lookups can binary-search it") {
  llvm::ArrayRef<EmbeddedFile> files = embedded_files();
  CHECK(
      std::is_sorted(files.begin(), files.end(),
                     [](const EmbeddedFile& a, const EmbeddedFile& b) { return a.name < b.name; }));
  for (size_t i = 1; i < files.size(); ++i)
    CHECK(files[i - 1].name != files[i].name);
}

TEST_CASE("find_embedded finds every embedded file by its name and nothing else") {
  for (const EmbeddedFile& file : embedded_files()) {
    std::optional<llvm::StringRef> text = find_embedded(file.name);
    REQUIRE(text.has_value());
    CHECK(text->data() == file.text.data());
  }
  CHECK_FALSE(find_embedded("test/no_such_kernel.cu").has_value());
  CHECK_FALSE(find_embedded("").has_value());
  CHECK_FALSE(find_embedded("scale_tokens.cu").has_value());
}

TEST_CASE("the closure of scale_tokens.cu starts with the source and contains common/spec.cuh") {
  llvm::Expected<std::vector<EmbeddedFile>> closure = source_closure("test/scale_tokens.cu");
  REQUIRE_MESSAGE(closure, llvm::toString(closure.takeError()));
  REQUIRE(closure->size() == 2);
  CHECK((*closure)[0].name == "test/scale_tokens.cu");
  CHECK((*closure)[1].name == "common/spec.cuh");
  CHECK((*closure)[1].text == *find_embedded("common/spec.cuh"));
}

TEST_CASE("every embedded file has a closure") {
  for (const EmbeddedFile& file : embedded_files()) {
    llvm::Expected<std::vector<EmbeddedFile>> closure = source_closure(file.name);
    CHECK_MESSAGE(bool(closure), file.name.str());
    if (!closure) {
      llvm::consumeError(closure.takeError());
      continue;
    }
    CHECK(closure->front().name == file.name);
  }
}

TEST_CASE("source_digest is stable across calls and differs between sources") {
  llvm::Expected<Digest128> first = source_digest("test/scale_tokens.cu");
  llvm::Expected<Digest128> second = source_digest("test/scale_tokens.cu");
  REQUIRE(first);
  REQUIRE(second);
  CHECK(*first == *second);
  llvm::Expected<Digest128> header = source_digest("common/spec.cuh");
  REQUIRE(header);
  CHECK_FALSE(*header == *first);
}

TEST_CASE("an unknown source is a not_found error naming it") {
  ErrorSummary closure = summarize(source_closure("test/nope.cu").takeError());
  CHECK(closure.code == Errc::not_found);
  CHECK(closure.message.find("test/nope.cu") != std::string::npos);
  ErrorSummary digest = summarize(source_digest("test/nope.cu").takeError());
  CHECK(digest.code == Errc::not_found);
}
