// ShardedParams: ZeRO-3's parameters (parallel.zero = 3, dp > 1). Each DP rank keeps only its shard
// of every bucket's compute-dtype parameters (ZeroShards::param_shard(), which AdamW updates) and
// gathers a bucket whole only while the stage computes with it. Owned by the Trainer.
//
// The buckets of blocks share two reused buffers (in turn, in bucket order, so that consecutive
// blocks' buckets never share one): need(unit) all-gathers the unit's bucket into its buffer unless
// it is there and current, and prefetch(unit) starts that gather early, beside the attention of the
// block before it (forward) or after it (backward), unless the buffer is the one the stage is
// computing with. A bucket's gather is ordered after the work queued so far (on GPUs it runs on the
// communicator's stream), so it cannot overwrite parameters that queued work still reads. The
// buckets used outside the block loop (the head's, the embedding's and the tied embedding's) keep a
// buffer each and are gathered once after each update, when first needed, as ZeRO-1 does.
#pragma once

#include <vector>

#include "trident/backend/backend.hpp"
#include "trident/model/gpt.hpp"
#include "trident/model/layout.hpp"
#include "trident/parallel/groups.hpp"
#include "trident/train/zero_shards.hpp"

namespace trident {

class ShardedParams : public ParamStore, public ParamFetch {
 public:
  // shards: staged (ZeRO-2 or 3 with dp > 1), on the same layout.
  ShardedParams(const ParamLayout& layout, const ParallelGroups& g, Backend& be, ZeroShards& shards);
  ~ShardedParams() override;   // waits for the gathers in flight
  ShardedParams(const ShardedParams&) = delete;
  ShardedParams& operator=(const ShardedParams&) = delete;

  // Elements of the gather buffers of a stage of this layout (compute dtype): one per bucket
  // gathered once per step, two of the largest other bucket (the planner's count).
  static size_t gathered_elements(const ParamLayout& layout);
  // Which gather buffer each bucket uses (the planner replays the gathers of a step with it).
  static ZeroShards::BufferPlan buffer_plan(const ParamLayout& layout);
  // Per bucket: 1 where it keeps its own gather buffer (head, embedding, tied embedding).
  static std::vector<char> kept_gathered(const ParamLayout& layout);

  // ParamStore.
  TensorView param_view(size_t offset, size_t n) const override;
  void assign(size_t offset, TensorView from) override;
  void copy_all(TensorView into) const override;

  // ParamFetch. Collectives over the DP group: every DP rank makes the same calls in the same order
  // (they follow the same schedule).
  void need(int unit) override;
  void prefetch(int unit) override;

  // After AdamW has updated the shards: every gathered bucket is stale; the gather of the bucket
  // the next forward reads first starts.
  void updated();
  // Waits for every gather in flight.
  void finish();

 private:
  // A gather buffer, the bucket it holds, whether that is the bucket's current value, and its
  // all-gather if not yet waited for.
  struct Gathered {
    Buffer buf;
    int bucket = -1;
    bool current = false;
    Request pending;
  };
  Gathered& holder(int b) { return held_[slot_of_[b]]; }
  TensorView bucket_view(int b) const;   // bucket b's place in its gather buffer
  // Bucket b's whole parameters into `whole`: this rank's shard copied to its place, the other
  // ranks' all-gathered (queued; the Request orders the stream after it).
  Request gather(int b, TensorView whole) const;
  void start(int b);                     // its gather, unless it is current
  void wait(Gathered& h);

  const ParamLayout& layout_;
  const ParallelGroups& g_;
  Backend& be_;
  ZeroShards& shards_;
  DType dtype_;
  // held_[0, n_rotating_) are reused by the buckets of blocks in turn; each kept bucket has one of
  // the rest.
  std::vector<Gathered> held_;
  int n_rotating_ = 0;
  std::vector<int> slot_of_;   // bucket -> its gather buffer
  int in_use_ = -1;            // the gather buffer of the bucket needed last
};

}  // namespace trident
