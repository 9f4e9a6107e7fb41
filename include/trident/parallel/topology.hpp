// Topology: rank <-> (dp, tp, pp) coordinates. Order "tp fastest, then dp, then pp":
//   rank = tp_rank + tp * (dp_rank + dp * pp_rank)
// so a TP group is consecutive ranks (inside one node) and pipeline stages cross nodes.
#pragma once

#include <vector>

namespace trident {

struct Coord {
  int dp = 0, tp = 0, pp = 0;
  bool operator==(const Coord& o) const { return dp == o.dp && tp == o.tp && pp == o.pp; }
};

enum class Axis { TP, PP, DP };

class Topology {
 public:
  Topology(int dp, int tp, int pp);

  int dp() const { return dp_; }
  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int world() const { return dp_ * tp_ * pp_; }

  int rank_of(Coord c) const { return c.tp + tp_ * (c.dp + dp_ * c.pp); }
  Coord coord_of(int rank) const;

  // Ranks of the group along `axis` that contains `rank`, in axis-rank order.
  std::vector<int> group(Axis axis, int rank) const;
  // The tied-embedding group of `rank`: first and last stage with the same (dp, tp); one rank if pp = 1.
  std::vector<int> embedding_group(int rank) const;

 private:
  int dp_, tp_, pp_;
};

}  // namespace trident
