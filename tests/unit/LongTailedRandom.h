// Seeded test data with long tails, as activations have: most values small, a few large.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace hetc::test {

// Mostly uniform in [-1, 1), with one value in `tailEvery` scaled by `tailScale`.
class LongTailedRandom {
public:
  explicit LongTailedRandom(uint32_t seed) : engine_(seed) {}
  float next(float tailScale = 30.0f, int tailEvery = 40) {
    float value = std::uniform_real_distribution<float>(-1.0f, 1.0f)(engine_);
    if (std::uniform_int_distribution<int>(0, tailEvery - 1)(engine_) == 0)
      value *= tailScale;
    return value;
  }
  std::vector<float> vector(size_t n, float tailScale = 30.0f) {
    std::vector<float> out(n);
    for (float &v : out)
      v = next(tailScale);
    return out;
  }
  uint32_t index(uint32_t below) {
    return std::uniform_int_distribution<uint32_t>(0, below - 1)(engine_);
  }

private:
  std::mt19937 engine_;
};

} // namespace hetc::test
