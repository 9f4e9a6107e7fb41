// ZeroShards: the DP ranks' shards of a gradient bucket tile it in rank order.
#include <gtest/gtest.h>

#include "trident/train/zero_shards.hpp"

namespace trident {

TEST(ZeroShards, ShardsTileTheBucketInRankOrder) {
  for (int dp : {1, 2, 3, 4, 8}) {
    Bucket bk;
    bk.offset = 1000;
    bk.size = 24 * 7;
    size_t next = bk.offset;
    for (int r = 0; r < dp; ++r) {
      auto [begin, end] = ZeroShards::dp_slice(bk, dp, r);
      EXPECT_EQ(begin, next) << "dp " << dp << " rank " << r;
      EXPECT_EQ(end - begin, bk.size / dp);
      next = end;
    }
    EXPECT_EQ(next, bk.offset + bk.size) << "dp " << dp;
  }
}

}  // namespace trident
