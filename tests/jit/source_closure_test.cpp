#include "jit/source_closure.h"

#include "support/error.h"

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace specjit;
using namespace specjit::jit;

namespace {

// An in-memory kernels_src tree.
struct Tree {
  std::map<std::string, std::string> files;

  std::optional<EmbeddedFile> operator()(llvm::StringRef name) const {
    auto it = files.find(name.str());
    if (it == files.end())
      return std::nullopt;
    return EmbeddedFile{it->first, it->second};
  }
  llvm::Expected<std::vector<ClosureFile>> closure(llvm::StringRef name) const {
    return closure_of(name, *this);
  }
};

std::vector<std::string> names_of(const std::vector<ClosureFile>& closure) {
  std::vector<std::string> names;
  for (const ClosureFile& file : closure)
    names.push_back(file.file.name.str());
  return names;
}

} // namespace

TEST_CASE("scan_includes reads quoted includes and skips system includes and comments") {
  std::vector<std::string> names = scan_includes("#include \"a.cuh\"\n"
                                                 "  #  include   \"dir/b.cuh\" // trailing\n"
                                                 "#include <cstdint>\n"
                                                 "// #include \"commented.cuh\"\n"
                                                 "/* #include \"block.cuh\"\n"
                                                 "#include \"still_block.cuh\" */\n"
                                                 "int x; /* c */ #include \"not_at_line_start\"\n"
                                                 "#define INC \"x.cuh\"\n"
                                                 "#include INC\n"
                                                 "#include \"last.cuh\"");
  CHECK(names == std::vector<std::string>{"a.cuh", "dir/b.cuh", "last.cuh"});
}

TEST_CASE("the closure is transitive, de-duplicated and in first-reached order") {
  Tree tree{
      {{"k.cu", "#include \"common/a.cuh\"\n#include \"common/b.cuh\"\n"},
       {"common/a.cuh", "#pragma once\n#include \"common/c.cuh\"\n"},
       {"common/b.cuh", "#pragma once\n#include \"common/a.cuh\"\n#include \"common/c.cuh\"\n"},
       {"common/c.cuh", "#pragma once\n#include \"common/b.cuh\"\n"}}};
  llvm::Expected<std::vector<ClosureFile>> closure = tree.closure("k.cu");
  REQUIRE_MESSAGE(closure, llvm::toString(closure.takeError()));
  CHECK(names_of(*closure) ==
        std::vector<std::string>{"k.cu", "common/a.cuh", "common/c.cuh", "common/b.cuh"});
  for (const ClosureFile& file : *closure)
    CHECK(file.aliases.empty());
}

TEST_CASE("an include resolves from the root first, then from the includer's folder") {
  Tree tree{{{"ops/k.cu", "#include \"helper.cuh\"\n#include \"common/x.cuh\"\n"},
             {"ops/helper.cuh", "#include \"../common/y.cuh\"\n"},
             {"ops/common/x.cuh", "wrong one"},
             {"common/x.cuh", "right one"},
             {"common/y.cuh", ""}}};
  llvm::Expected<std::vector<ClosureFile>> closure = tree.closure("ops/k.cu");
  REQUIRE_MESSAGE(closure, llvm::toString(closure.takeError()));
  CHECK(names_of(*closure) ==
        std::vector<std::string>{"ops/k.cu", "ops/helper.cuh", "common/y.cuh", "common/x.cuh"});
  // NVRTC looks headers up by the spelled name, so the relative spellings become aliases.
  CHECK((*closure)[1].aliases == llvm::SmallVector<std::string, 1>{"helper.cuh"});
  CHECK((*closure)[2].aliases == llvm::SmallVector<std::string, 1>{"../common/y.cuh"});
  CHECK((*closure)[3].aliases.empty());
}

TEST_CASE("a missing include is not_found, naming the includer and the missing name") {
  Tree tree{{{"k.cu", "#include \"common/a.cuh\"\n"},
             {"common/a.cuh", "// #include \"fine.cuh\"\n#include \"common/gone.cuh\"\n"}}};
  ErrorSummary error = summarize(tree.closure("k.cu").takeError());
  CHECK(error.code == Errc::not_found);
  CHECK(error.message.find("common/a.cuh") != std::string::npos);
  CHECK(error.message.find("common/gone.cuh") != std::string::npos);
}

TEST_CASE("includes may not climb out of the kernels_src root") {
  Tree tree{{{"k.cu", "#include \"../k.cu\"\n"}}};
  CHECK(summarize(tree.closure("k.cu").takeError()).code == Errc::not_found);
  CHECK(summarize(tree.closure("missing.cu").takeError()).code == Errc::not_found);
}

TEST_CASE("one spelling that means two files in one program is rejected") {
  Tree tree{{{"a/k.cu", "#include \"h.cuh\"\n#include \"b/x.cuh\"\n"},
             {"a/h.cuh", ""},
             {"b/x.cuh", "#include \"h.cuh\"\n"},
             {"b/h.cuh", ""}}};
  ErrorSummary error = summarize(tree.closure("a/k.cu").takeError());
  CHECK(error.code == Errc::invalid_argument);
  CHECK(error.message.find("h.cuh") != std::string::npos);
}

TEST_CASE("closure_digest changes with any name or text, and only then") {
  std::string a = "alpha", b = "beta";
  Digest128 base = closure_digest({EmbeddedFile{"k.cu", a}, EmbeddedFile{"h.cuh", b}});
  CHECK(base == closure_digest({EmbeddedFile{"k.cu", "alpha"}, EmbeddedFile{"h.cuh", "beta"}}));
  CHECK_FALSE(base ==
              closure_digest({EmbeddedFile{"k.cu", "alpha"}, EmbeddedFile{"h.cuh", "bet"}}));
  CHECK_FALSE(base ==
              closure_digest({EmbeddedFile{"k.cu", "alpha"}, EmbeddedFile{"g.cuh", "beta"}}));
  // Moving bytes between name and text, or between files, is a different closure.
  CHECK_FALSE(base ==
              closure_digest({EmbeddedFile{"k.cu", "alphah.cuh"}, EmbeddedFile{"", "beta"}}));
  CHECK_FALSE(base == closure_digest({EmbeddedFile{"k.cu", "alpha"}}));
}
