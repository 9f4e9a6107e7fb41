// GradSync: data-parallel gradient reduction by buckets. A bucket's all-reduce (or, under
// ZeRO-1, reduce-scatter) starts as soon as its last unit's gradients are final, overlapping
// the rest of the backward; finish() adds the tied embedding over the first+last stage group,
// reduces its bucket and waits for everything.
#pragma once

#include <utility>
#include <vector>

#include "trident/backend/backend.hpp"
#include "trident/model/layout.hpp"
#include "trident/parallel/groups.hpp"

namespace trident {

class GradSync {
 public:
  GradSync(const ParamLayout& layout, TensorView grads, const ParallelGroups& g, Backend& be, bool zero);

  void unit_done(int unit);
  void finish();

  // Elements [begin, end) of the flat buffer that DP rank dp_rank of dp owns in bucket bk: its
  // ZeRO shard, also the slice whose squares it contributes to the gradient norm.
  static std::pair<size_t, size_t> dp_slice(const Bucket& bk, int dp, int dp_rank);

 private:
  void launch(int b);
  const ParamLayout& layout_;
  TensorView grads_;
  const ParallelGroups& g_;
  Backend& be_;
  bool zero_;
  std::vector<Request> pending_;
};

}  // namespace trident
