// GradSync: data-parallel gradient reduction by buckets. A bucket's all-reduce (or, under
// ZeRO-1, reduce-scatter) starts as soon as its last unit's gradients are final, overlapping
// the rest of the backward; finish() adds the tied embedding over the first+last stage group,
// reduces its bucket and waits for everything.
//
// With copy_engine (parallel.dp_copy_engine: dp = 2, ZeRO-1) a bucket is not reduced in place:
// its other half goes to the other rank's inbox (Comm::scatter_partial_async, on GPUs by the
// copy engines into the other GPU's memory) and the optimizer adds inbox() to its shard as it
// reads it. The inbox holds every bucket's shard in bucket order, the optimizer state's layout.
#pragma once

#include <utility>
#include <vector>

#include "trident/backend/backend.hpp"
#include "trident/model/layout.hpp"
#include "trident/parallel/groups.hpp"

namespace trident {

class GradSync {
 public:
  GradSync(const ParamLayout& layout, TensorView grads, const ParallelGroups& g, Backend& be, bool zero,
           bool copy_engine = false);
  ~GradSync();

  void unit_done(int unit);
  void finish();

  // Elements [begin, end) of the flat buffer that DP rank dp_rank of dp owns in bucket bk: its
  // ZeRO shard, also the slice whose squares it contributes to the gradient norm.
  static std::pair<size_t, size_t> dp_slice(const Bucket& bk, int dp, int dp_rank);

  // The other rank's partials of this rank's shards (copy_engine), else empty.
  TensorView inbox() const { return inbox_.view(DType::F32); }

 private:
  void launch(int b);
  const ParamLayout& layout_;
  TensorView grads_;
  const ParallelGroups& g_;
  Backend& be_;
  bool zero_;
  std::vector<Request> pending_;
  Buffer inbox_;
  std::vector<size_t> inbox_offset_;   // of each bucket's shard
};

}  // namespace trident
