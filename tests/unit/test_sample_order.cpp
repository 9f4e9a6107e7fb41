// SampleOrder: which global samples each DP rank and micro-batch reads, and where a step starts.
#include <gtest/gtest.h>

#include <vector>

#include "trident/train/batch_source.hpp"

namespace trident {

// Every layout of a global batch reads each of the step's G samples exactly once, each rank a
// contiguous share in micro-batch order.
TEST(SampleOrder, EveryLayoutReadsTheStepsSamplesOnce) {
  const int64_t G = 48;
  for (int dp : {1, 2, 3, 4, 6, 8, 12, 16, 24, 48})
    for (int B = 1; B * dp <= G; ++B) {
      if (G % (int64_t(B) * dp)) continue;
      const SampleOrder order{G, B, dp};
      const int64_t first = order.step_first(0, 0, 5);
      ASSERT_EQ(first, 5 * G);
      std::vector<int> reads(G, 0);
      int64_t next = first;
      for (int r = 0; r < dp; ++r)
        for (int m = 0; m < G / (B * dp); ++m) {
          const int64_t s = order.micro_first(first, r, m);
          ASSERT_EQ(s, next) << "dp " << dp << " B " << B << " rank " << r << " micro " << m;
          for (int b = 0; b < B; ++b) ++reads[s + b - first];
          next += B;
        }
      for (int n : reads) ASSERT_EQ(n, 1);
    }
}

TEST(SampleOrder, MicroBatchesOfARank) {
  const SampleOrder order{32, 2, 4};   // 8 samples per rank, 4 micro-batches of 2
  EXPECT_EQ(order.micro_first(320, 0, 0), 320);
  EXPECT_EQ(order.micro_first(320, 0, 3), 326);
  EXPECT_EQ(order.micro_first(320, 1, 0), 328);
  EXPECT_EQ(order.micro_first(320, 3, 2), 320 + 24 + 4);
}

// A resumed run continues from the checkpoint's consumed samples, whatever the batch size was.
TEST(SampleOrder, StepsCountFromTheResumedPosition) {
  const SampleOrder order{16, 4, 2};
  EXPECT_EQ(order.step_first(0, 0, 0), 0);
  EXPECT_EQ(order.step_first(0, 0, 3), 48);
  EXPECT_EQ(order.step_first(10, 100, 10), 100);
  EXPECT_EQ(order.step_first(10, 100, 12), 132);
  // Beyond 2^31 samples (long runs): no 32-bit overflow.
  EXPECT_EQ(order.step_first(0, 0, 200000000), int64_t(16) * 200000000);
}

}  // namespace trident
