// TMA tensor maps: what the driver would reject is refused first, with a message naming it, and
// without a GPU (these checks run before the driver is opened).
#include "runtime/tensor_map.h"

#include "support/error.h"

#include <doctest/doctest.h>

using namespace specjit;
using namespace specjit::runtime;

namespace {

std::string message_of(CUdeviceptr base, std::array<uint64_t, 3> dims,
                       std::array<uint32_t, 3> box) {
  auto map = tensor_map_u8_3d(base, dims, box);
  REQUIRE(!map);
  ErrorSummary error = summarize(map.takeError());
  CHECK(error.code == Errc::invalid_argument);
  return error.message;
}

constexpr CUdeviceptr k_base = 0x7f0000000000ull;

} // namespace

TEST_CASE("tensor maps refuse bases, dimensions and boxes the TMA cannot take") {
  CHECK(message_of(k_base + 8, {2048, 1536, 128}, {128, 64, 1}).find("not 16-byte aligned") !=
        std::string::npos);
  CHECK(message_of(k_base, {2040, 1536, 128}, {128, 64, 1}).find("multiple of 16") !=
        std::string::npos);
  CHECK(message_of(k_base, {2048, 1536, 128}, {128, 512, 1}).find("box[1] = 512") !=
        std::string::npos);
  CHECK(message_of(k_base, {2048, 32, 128}, {128, 64, 1}).find("min(256, 32)") !=
        std::string::npos);
  CHECK(message_of(k_base, {2048, 1536, 128}, {256, 64, 1}).find("at most 128 inner bytes") !=
        std::string::npos);
}
