// The benchmark's routings rebuilt on the host (tools/bench/moe_routing.h), without a GPU: the
// block arithmetic on hand-made counts, and the rebuilt routings against what the GPU's route
// kernel chose in the committed benchmark run (docs/bench/moe-h200.json).
#include "moe_models.h"
#include "moe_routing.h"

#include "test_support.h"

#include <llvm/Support/JSON.h>

#include <doctest/doctest.h>

#include <numeric>
#include <string>

using namespace specjit;
using namespace specjit::bench;

TEST_CASE("routing_blocks counts blocks, MMA columns and warpgroup rows per expert") {
  // block_m 128: 261 slots fill 128 + 128 + 5, 5 slots one block, 128 one full block.
  const RoutingBlocks r = routing_blocks({261, 0, 5, 128}, 128);
  CHECK(r.distinct == 3);
  CHECK(r.blocks == 5);
  CHECK(r.swap_columns == 128 + 128 + 32 + 32 + 128); // widths in steps of 32
  CHECK(r.normal_rows == 128 + 128 + 64 + 64 + 128);  // warpgroups of 64 rows
  // Blocks of 16: width steps of 8 (a quarter would be 4).
  const RoutingBlocks small = routing_blocks({3, 17}, 16);
  CHECK(small.blocks == 3);
  CHECK(small.swap_columns == 8 + 16 + 8);
}

TEST_CASE("expert_slots gives each token its top_k largest logits") {
  // Two tokens over four experts: token 0 prefers 2 then 0, token 1 prefers 3 then 2.
  const std::vector<float> logits = {0.5f, -1.0f, 2.0f, 0.1f, -3.0f, 0.0f, 1.0f, 4.0f};
  CHECK(expert_slots(logits, 4, 2, 2) == std::vector<int64_t>{1, 0, 2, 1});
  CHECK(expert_slots(logits, 4, 1, 1) == std::vector<int64_t>{0, 0, 1, 0});
  // Many tokens: every slot lands somewhere.
  const std::vector<int64_t> slots = expert_slots(router_logits(64, 16, 7), 16, 4, 64);
  CHECK(std::accumulate(slots.begin(), slots.end(), int64_t{0}) == 64 * 4);
}

TEST_CASE("the rebuilt routings are the ones the GPU timed (docs/bench/moe-h200.json)") {
  const std::string text =
      test::read_file(std::string(SPECJIT_SOURCE_DIR) + "/docs/bench/moe-h200.json");
  REQUIRE_MESSAGE(!text.empty(), "no docs/bench/moe-h200.json in the source tree");
  auto json = llvm::json::parse(text);
  REQUIRE_MESSAGE(static_cast<bool>(json), llvm::toString(json.takeError()));
  const llvm::json::Array* rows = json->getAsObject()->getArray("rows");
  REQUIRE(rows != nullptr);
  int checked = 0;
  for (const llvm::json::Value& value : *rows) {
    const llvm::json::Object& row = *value.getAsObject();
    if (row.getString("dtype").getValueOr("") != "fp8")
      continue;
    const int64_t tokens = *row.getInteger("tokens");
    if (tokens > 64) // past 64 tokens every expert is hit: nothing to tell routings apart
      continue;
    const Model* model = nullptr;
    for (const Model& m : k_models)
      if (row.getString("model").getValueOr("") == m.name)
        model = &m;
    REQUIRE(model != nullptr);
    INFO(model->name << " T=" << tokens);
    // The fixed routing, and the fresh ones of --routings N (seeds 1..N).
    CHECK(benchmark_routing(model->shape, tokens, k_routing_seed, 128).distinct ==
          *row.getInteger("distinct_experts"));
    const llvm::json::Object* samples = row.getObject("routing_samples");
    REQUIRE(samples != nullptr);
    const llvm::json::Array& distinct = *samples->getArray("distinct_experts");
    for (size_t i = 0; i < distinct.size() && i < 20; ++i)
      CHECK(benchmark_routing(model->shape, tokens, static_cast<uint32_t>(i + 1), 128).distinct ==
            *distinct[i].getAsInteger());
    ++checked;
  }
  CHECK(checked == 12); // T = 1, 4, 16, 64 of three models
}
