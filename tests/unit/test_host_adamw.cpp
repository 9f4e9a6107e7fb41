// The host AdamW of parallel.offload_optimizer against the CPU backend's adamw_multi: the same
// bits for ranges of odd sizes (with and without weight decay, with clipping), at any thread
// count, and its bf16 output the rounding of the fp32 master weights.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "trident/backend/adamw_math.hpp"
#include "trident/backend/cpu_backend.hpp"
#include "trident/train/host_adamw.hpp"

namespace trident {
namespace {

struct State {
  std::vector<float> master, m, v, grad;
};

State random_state(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  State s;
  for (size_t i = 0; i < n; ++i) {
    s.master.push_back(normal(rng));
    s.m.push_back(0.01f * normal(rng));
    s.v.push_back(1e-4f * std::fabs(normal(rng)));
    s.grad.push_back(0.1f * normal(rng));
  }
  return s;
}

std::vector<char> bytes_of(const std::vector<float>& v) {
  std::vector<char> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(HostAdamW, MatchesTheCpuBackendBitForBitAtAnyThreadCount) {
  // Ranges of odd sizes, one longer than several of the host's chunks, with gaps between them
  // (never touched), decay alternating.
  const std::vector<size_t> sizes = {1, 7, 33, 1023, 70001, 5, 131075};
  std::vector<AdamWRange> ranges;
  std::vector<MultiTensorEntry> pieces;
  size_t at = 3;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const bool decay = i % 2 == 0;
    ranges.push_back(AdamWRange{at, sizes[i], decay});
    pieces.push_back(MultiTensorEntry{static_cast<int64_t>(at), static_cast<int64_t>(at),
                                      static_cast<int64_t>(sizes[i]), decay ? 1 : 0});
    at += sizes[i] + 2;
  }
  const size_t n = at;
  const State start = random_state(n, 5);

  AdamWArgs a;
  a.lr = 3e-3f;
  a.beta1 = 0.9f;
  a.beta2 = 0.95f;
  a.eps = 1e-8f;
  a.weight_decay = 0.1f;
  a.bias_correction1 = 1.0f - 0.9f * 0.9f * 0.9f;
  a.bias_correction2 = 1.0f - 0.95f * 0.95f * 0.95f;
  const float norm_sq = 37.5f, clip = 1.0f;   // clipped: the factor is below 1

  // The CPU backend's op, as the optimizer calls it (params written, norm read from memory).
  std::unique_ptr<Backend> be = make_cpu_backend();
  State want = start;
  std::vector<float> want_params(n, 0.0f);
  std::vector<float> norm{norm_sq};
  be->adamw_multi(TensorView(want_params.data(), DType::F32, n), TensorView(want.master.data(), DType::F32, n),
                  TensorView(want.m.data(), DType::F32, n), TensorView(want.v.data(), DType::F32, n),
                  TensorView(want.grad.data(), DType::F32, n),
                  TensorView(pieces.data(), DType::I32, pieces.size() * kPieceWords), a,
                  TensorView(norm.data(), DType::F32, 1), clip);
  ASSERT_NE(bytes_of(want.master), bytes_of(start.master)) << "the reference did not update";

  AdamWArgs host = a;
  host.grad_scale = clip_factor(norm_sq, clip);
  ASSERT_LT(host.grad_scale, 1.0f);
  for (const int threads : {1, 2, 3, 8}) {
    State got = start;
    std::vector<float> params(n, 0.0f);
    host_adamw(ranges, got.master.data(), got.m.data(), got.v.data(), got.grad.data(), params.data(), DType::F32,
               host, threads);
    EXPECT_EQ(bytes_of(got.master), bytes_of(want.master)) << threads << " threads: master";
    EXPECT_EQ(bytes_of(got.m), bytes_of(want.m)) << threads << " threads: exp_avg";
    EXPECT_EQ(bytes_of(got.v), bytes_of(want.v)) << threads << " threads: exp_avg_sq";
    EXPECT_EQ(bytes_of(params), bytes_of(want_params)) << threads << " threads: parameters";

    // bf16 parameters (a GPU's): each the rounding of its master weight; the gaps stay zero.
    State again = start;
    std::vector<uint16_t> bf16(n, 0);
    host_adamw(ranges, again.master.data(), again.m.data(), again.v.data(), again.grad.data(), bf16.data(),
               DType::BF16, host, threads);
    EXPECT_EQ(bytes_of(again.master), bytes_of(want.master)) << threads << " threads, bf16 out: master";
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) wrong += bf16[i] != float_to_bf16(want_params[i]);
    EXPECT_EQ(wrong, 0u) << threads << " threads: bf16 parameters";
  }
}

}  // namespace
}  // namespace trident
