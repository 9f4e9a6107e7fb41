// Topology: rank <-> coordinate round trips and group membership for every layout up to 64 ranks.
#include <gtest/gtest.h>

#include <set>

#include "trident/parallel/topology.hpp"

namespace trident {

TEST(Topology, RoundTripsEveryLayoutUpTo64Ranks) {
  int layouts = 0;
  for (int world = 1; world <= 64; ++world)
    for (int tp = 1; tp <= world; ++tp)
      for (int pp = 1; tp * pp <= world; ++pp) {
        if (world % (tp * pp)) continue;
        const int dp = world / (tp * pp);
        Topology topo(dp, tp, pp);
        ++layouts;
        std::set<int> seen;
        for (int r = 0; r < world; ++r) {
          Coord c = topo.coord_of(r);
          ASSERT_EQ(topo.rank_of(c), r);
          ASSERT_TRUE(c.dp < dp && c.tp < tp && c.pp < pp);
          // The documented order: tp fastest, then dp, then pp.
          ASSERT_EQ(r, c.tp + tp * (c.dp + dp * c.pp));
          seen.insert(r);
          for (Axis axis : {Axis::TP, Axis::DP, Axis::PP}) {
            std::vector<int> g = topo.group(axis, r);
            ASSERT_EQ(static_cast<int>(g.size()), axis == Axis::TP ? tp : axis == Axis::DP ? dp : pp);
            int pos = axis == Axis::TP ? c.tp : axis == Axis::DP ? c.dp : c.pp;
            ASSERT_EQ(g[pos], r);
            for (int other : g) {
              Coord o = topo.coord_of(other);
              if (axis != Axis::TP) ASSERT_EQ(o.tp, c.tp);
              if (axis != Axis::DP) ASSERT_EQ(o.dp, c.dp);
              if (axis != Axis::PP) ASSERT_EQ(o.pp, c.pp);
            }
          }
        }
        ASSERT_EQ(static_cast<int>(seen.size()), world);
      }
  EXPECT_GT(layouts, 300);
}

TEST(Topology, TensorParallelGroupsAreConsecutiveRanks) {
  Topology topo(2, 4, 2);
  EXPECT_EQ(topo.group(Axis::TP, 5), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(topo.group(Axis::DP, 5), (std::vector<int>{1, 5}));
  EXPECT_EQ(topo.group(Axis::PP, 5), (std::vector<int>{5, 13}));
}

TEST(Topology, EmbeddingGroupJoinsFirstAndLastStage) {
  Topology topo(2, 2, 4);   // 16 ranks
  // rank 13: tp 1, dp 0, pp 3 (last stage) pairs with tp 1, dp 0, pp 0 = rank 1
  EXPECT_EQ(topo.embedding_group(13), (std::vector<int>{1, 13}));
  EXPECT_EQ(topo.embedding_group(1), (std::vector<int>{1, 13}));
  Topology flat(4, 2, 1);
  EXPECT_EQ(flat.embedding_group(3), (std::vector<int>{3}));
}

}  // namespace trident
