// Pure rank arithmetic for the 3D layout.
#include "trident/parallel/topology.hpp"

#include "trident/core/error.hpp"

namespace trident {

Topology::Topology(int dp, int tp, int pp) : dp_(dp), tp_(tp), pp_(pp) {
  TRIDENT_CHECK(dp >= 1 && tp >= 1 && pp >= 1, str("layout dp=", dp, " tp=", tp, " pp=", pp));
}

Coord Topology::coord_of(int rank) const {
  TRIDENT_CHECK(rank >= 0 && rank < world(), str("rank ", rank, " outside world ", world()));
  Coord c;
  c.tp = rank % tp_;
  c.dp = (rank / tp_) % dp_;
  c.pp = rank / (tp_ * dp_);
  return c;
}

std::vector<int> Topology::group(Axis axis, int rank) const {
  Coord c = coord_of(rank);
  int n = axis == Axis::TP ? tp_ : axis == Axis::DP ? dp_ : pp_;
  std::vector<int> ranks;
  for (int i = 0; i < n; ++i) {
    Coord o = c;
    (axis == Axis::TP ? o.tp : axis == Axis::DP ? o.dp : o.pp) = i;
    ranks.push_back(rank_of(o));
  }
  return ranks;
}

std::vector<int> Topology::embedding_group(int rank) const {
  Coord c = coord_of(rank);
  Coord first = c, last = c;
  first.pp = 0;
  last.pp = pp_ - 1;
  if (pp_ == 1) return {rank_of(first)};
  return {rank_of(first), rank_of(last)};
}

}  // namespace trident
