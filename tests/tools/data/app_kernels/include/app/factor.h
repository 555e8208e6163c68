#pragma once

namespace app {
__device__ inline float factor() { return 2.0f; }
} // namespace app
