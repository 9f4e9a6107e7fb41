// MpiComm against straightforward references on random data, with sizes that are not
// multiples of the rank count.
#include <gtest/gtest.h>

#include <algorithm>

#include "test_support.hpp"
#include "trident/parallel/groups.hpp"
#include "trident/parallel/mpi_comm.hpp"

namespace trident {
namespace {

struct World {
  int rank = 0, size = 1;
  World() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
};

std::vector<float> data_of(int rank, size_t n, uint64_t salt) { return test::random_vector(n, salt * 1000 + rank); }

TEST(MpiComm, AllReduceSumAndMax) {
  World w;
  MpiComm comm(MPI_COMM_WORLD, "world", 60);
  for (size_t n : {1, 7, 1001, 4097}) {
    std::vector<float> sum(n), mx(n);
    std::vector<float> ref_sum(n, 0.0f), ref_max(n, -1e30f);
    for (int r = 0; r < w.size; ++r) {
      std::vector<float> d = data_of(r, n, 1);
      for (size_t i = 0; i < n; ++i) {
        ref_sum[i] += d[i];
        ref_max[i] = std::max(ref_max[i], d[i]);
      }
    }
    sum = mx = data_of(w.rank, n, 1);
    comm.all_reduce(sum.data(), n, DType::F32, ReduceOp::Sum, Stream{});
    comm.all_reduce(mx.data(), n, DType::F32, ReduceOp::Max, Stream{});
    EXPECT_LT(test::max_abs_diff(sum, ref_sum), 1e-5) << n;
    EXPECT_EQ(mx, ref_max) << n;
  }
}

TEST(MpiComm, ReduceScatterLeavesEachRankItsBlockInPlace) {
  World w;
  MpiComm comm(MPI_COMM_WORLD, "world", 60);
  for (size_t block : {1, 5, 333}) {
    const size_t n = block * w.size;
    std::vector<float> buf = data_of(w.rank, n, 2), ref(n, 0.0f);
    for (int r = 0; r < w.size; ++r) {
      std::vector<float> d = data_of(r, n, 2);
      for (size_t i = 0; i < n; ++i) ref[i] += d[i];
    }
    comm.reduce_scatter(buf.data(), block, DType::F32, Stream{});
    std::vector<float> mine(buf.begin() + w.rank * block, buf.begin() + (w.rank + 1) * block);
    std::vector<float> want(ref.begin() + w.rank * block, ref.begin() + (w.rank + 1) * block);
    EXPECT_LT(test::max_abs_diff(mine, want), 1e-5) << block;
  }
}

// Out of place: each rank's block lands in its own buffer, the same bits as in place, and the
// input is left as it was.
TEST(MpiComm, ReduceScatterToAnotherBuffer) {
  World w;
  MpiComm comm(MPI_COMM_WORLD, "world", 60);
  for (size_t block : {1, 5, 333}) {
    const size_t n = block * w.size;
    const std::vector<float> in = data_of(w.rank, n, 5);
    std::vector<float> kept = in, out(block, -7.0f), in_place = in;
    comm.reduce_scatter_to_async(kept.data(), out.data(), block, DType::F32, Stream{})->wait(Stream{});
    comm.reduce_scatter(in_place.data(), block, DType::F32, Stream{});
    EXPECT_EQ(kept, in) << block;
    EXPECT_EQ(out, std::vector<float>(in_place.begin() + w.rank * block, in_place.begin() + (w.rank + 1) * block))
        << block;
  }
}

TEST(MpiComm, AllGatherInPlace) {
  World w;
  MpiComm comm(MPI_COMM_WORLD, "world", 60);
  for (size_t block : {1, 9, 250}) {
    std::vector<float> buf(block * w.size, -7.0f), ref;
    for (int r = 0; r < w.size; ++r) {
      std::vector<float> d = data_of(r, block, 3);
      ref.insert(ref.end(), d.begin(), d.end());
      if (r == w.rank) std::copy(d.begin(), d.end(), buf.begin() + r * block);
    }
    comm.all_gather(buf.data(), block, DType::F32, Stream{});
    EXPECT_EQ(buf, ref);
  }
}

TEST(MpiComm, BroadcastAndPairedExchange) {
  World w;
  MpiComm comm(MPI_COMM_WORLD, "world", 60);
  std::vector<float> b = data_of(w.rank, 17, 4);
  comm.broadcast(b.data(), b.size(), DType::F32, w.size - 1, Stream{});
  EXPECT_EQ(b, data_of(w.size - 1, 17, 4));

  // A ring: everyone sends to the right and receives from the left in one group (would
  // deadlock with blocking rendezvous sends).
  const size_t n = 1023;
  std::vector<float> out = data_of(w.rank, n, 5), in(n, 0.0f);
  int right = (w.rank + 1) % w.size, left = (w.rank + w.size - 1) % w.size;
  comm.exchange({{P2POp::Send, out.data(), n, DType::F32, right}, {P2POp::Recv, in.data(), n, DType::F32, left}},
                Stream{});
  EXPECT_EQ(in, data_of(left, n, 5));
}

TEST(MpiComm, AxisGroupsFollowTheTopology) {
  World w;
  if (w.size != 4) GTEST_SKIP() << "needs 4 ranks";
  Topology topo(2, 2, 1);
  ParallelGroups g = make_mpi_groups(split_axes(MPI_COMM_WORLD, topo), topo, 60);
  EXPECT_EQ(g.tp->size(), 2);
  EXPECT_EQ(g.dp->size(), 2);
  EXPECT_EQ(g.pp->size(), 1);
  EXPECT_EQ(g.tp->rank(), g.coord.tp);
  EXPECT_EQ(g.dp->rank(), g.coord.dp);
  // Sum of world ranks over the TP group = the two consecutive ranks.
  float v = static_cast<float>(w.rank);
  g.tp->all_reduce(&v, 1, DType::F32, ReduceOp::Sum, Stream{});
  int base = w.rank - g.coord.tp;
  EXPECT_EQ(v, static_cast<float>(2 * base + 1));
}

}  // namespace
}  // namespace trident
