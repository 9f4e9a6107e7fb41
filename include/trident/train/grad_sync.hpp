// GradSync: data-parallel gradient reduction by buckets. A bucket's all-reduce (or, under
// ZeRO-1, reduce-scatter: see ZeroShards) starts as soon as its last unit's gradients are final,
// overlapping the rest of the backward; finish() adds the tied embedding over the first+last
// stage group, reduces its bucket and waits for everything. Under ZeRO-2 the gradients are in
// ZeroShards' staging buffers, which reduce the buckets of blocks on every micro-batch
// themselves; this reduces the others once.
#pragma once

#include <functional>
#include <vector>

#include "trident/backend/backend.hpp"
#include "trident/model/layout.hpp"
#include "trident/parallel/groups.hpp"
#include "trident/train/zero_shards.hpp"

namespace trident {

class GradSync {
 public:
  // grads: the stage's flat fp32 gradients (empty when shards.staged()).
  GradSync(const ParamLayout& layout, TensorView grads, const ParallelGroups& g, Backend& be,
           ZeroShards& shards);

  void unit_done(int unit);
  void finish();

  // Called as each bucket's reduction starts, with the request after which its gradients are
  // final (null: after the work queued so far), for the optimizer offload's copies to the host.
  // Not for ZeRO-2's staged buckets, whose shards are final only after finish().
  using BucketFinal = std::function<void(int bucket, CommWork* reduction)>;
  void set_bucket_final(BucketFinal f) { bucket_final_ = std::move(f); }

 private:
  void launch(int b);
  const ParamLayout& layout_;
  TensorView grads_;
  const ParallelGroups& g_;
  Backend& be_;
  ZeroShards& shards_;
  std::vector<Request> pending_;
  BucketFinal bucket_final_;
};

}  // namespace trident
