// Kernel definitions: enumeration template parameters, spelled by name in the name expression
// and shown by name in variants (real NVRTC compiles, no GPU).
#include "engine_fixture.h"

#include "runtime/engine.h"
#include "runtime/kernel_def.h"

#include "support/error.h"

using namespace specjit;
using namespace specjit::runtime;
using specjit::test::TempDir;

namespace {

constexpr const char* k_tile_text = R"(
namespace tiles { enum class Order : int { rows = 0, columns = 1 }; }
template <tiles::Order ORDER, int BLOCK> __global__ void fill(int* y) {
  y[threadIdx.x] = ORDER == tiles::Order::rows ? BLOCK : -BLOCK;
}
)";

ParamDef order_param() {
  ParamDef param{"order", Policy::exact(), ParamEncoding::raw};
  param.enum_type = "tiles::Order";
  param.enum_names = {"rows", "columns"};
  return param;
}

KernelDef fill_kernel() {
  KernelDef def;
  def.id = "user_fill";
  def.source = KernelSource::from_text("fill.cu", k_tile_text);
  def.function = "fill";
  def.params = {order_param(), {"block", Policy::exact(), ParamEncoding::raw}};
  return def;
}

} // namespace

TEST_CASE("an enumeration parameter is spelled by its enumerator and shown by its name") {
  TempDir dir;
  Engine engine(test::config_in(dir));
  auto id = engine.add_kernel(fill_kernel());
  REQUIRE_MESSAGE(static_cast<bool>(id), llvm::toString(id.takeError()));
  auto columns = engine.prepare(*id, {1, 64});
  REQUIRE_MESSAGE(static_cast<bool>(columns), llvm::toString(columns.takeError()));
  CHECK((*columns)->name_expression == "fill<tiles::Order::columns, 64>");
  CHECK((*columns)->variant.getString("order") == llvm::StringRef("columns"));
  CHECK((*columns)->variant.getInteger("block").getValueOr(0) == 64);
  auto rows = engine.prepare(*id, {0, 64});
  REQUIRE(static_cast<bool>(rows));
  CHECK((*rows)->key != (*columns)->key);

  // A value past the last name is refused before anything compiles.
  auto past = engine.prepare(*id, {2, 64});
  REQUIRE_FALSE(static_cast<bool>(past));
  ErrorSummary error = summarize(past.takeError());
  CHECK(error.code == Errc::invalid_argument);
  CHECK(error.message.find("parameter order: 2 is no value of tiles::Order (0 to 1)") !=
        std::string::npos);
  auto specialized = engine.prepare_specialized(
      *id, {SpecValue{SpecKind::exact, 5}, SpecValue{SpecKind::exact, 64}});
  REQUIRE_FALSE(static_cast<bool>(specialized));
  CHECK(summarize(specialized.takeError()).code == Errc::invalid_argument);
  CHECK(engine.stats().compiles == 2);
}

TEST_CASE("an enumeration parameter needs its type, its names, and the raw exact policy") {
  struct Bad {
    const char* why;
    void (*change)(ParamDef&);
    const char* message;
  };
  const Bad cases[] = {
      {"names without a type", [](ParamDef& p) { p.enum_type.clear(); },
       "needs both an enumeration type and its names"},
      {"a spec word", [](ParamDef& p) { p.encoding = ParamEncoding::spec_word; },
       "must be raw and exact"},
      {"a bucketed policy", [](ParamDef& p) { p.policy = Policy::bucketed_pow2(); },
       "must be raw and exact"},
      {"a type that is no name", [](ParamDef& p) { p.enum_type = "tiles::Order<1>"; },
       "is not a qualified type name"},
      {"a name given twice",
       [](ParamDef& p) {
         p.enum_names = {"rows", "rows"};
       },
       "is not a plain identifier or is named twice"},
  };
  for (const Bad& bad : cases) {
    INFO(bad.why);
    KernelDef def = fill_kernel();
    bad.change(def.params[0]);
    ErrorSummary error = summarize(def.validate());
    CHECK(error.code == Errc::invalid_argument);
    CHECK_MESSAGE(error.message.find(bad.message) != std::string::npos, error.message);
  }
  CHECK(order_param().enum_value("columns") == 1);
  CHECK_FALSE(order_param().enum_value("diagonal").has_value());
}
