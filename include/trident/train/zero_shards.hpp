// ZeroShards: how the DP ranks share each gradient bucket, the one contract between GradSync (which
// reduces the gradients) and the Optimizer (which updates from them). Owned by the Trainer.
//
// Without ZeRO every rank reduces and updates whole buckets. With ZeRO-1 DP rank r reduces and
// updates its shard of each bucket (dp_slice).
//
// With ZeRO-2 (dp > 1) the stage has no fp32 gradient buffer of its own: this rank keeps only its
// reduced shard of each bucket (grad_shard(), in the optimizer state's layout) and the backward
// writes into staging buffers (GradStaging). A bucket of blocks only is staged in one of three
// reused buffers, zeroed before each micro-batch's backward writes it and reduce-scattered as
// soon as its units are done: the step's first reduction of a bucket straight into this rank's
// shard, each later one in place, its slice added to the shard when the buffer is next needed or
// at the step's end. (Not the shard itself as the slice's start: the TP sums of replicated
// gradients under sequence parallelism run on the buffer and would add it tp times.) The buckets
// written outside their blocks' backward (the head's, the embedding's, the tied embedding's, and
// on the last stage the last block's, whose output bias gradient the final LayerNorm's backward
// writes during the forward) keep a buffer each and are reduced once, on the last micro-batch, as
// under ZeRO-1. The optimizer writes its updated parameters into param_shard(), from which the
// all-gathers fill the stage's parameters.
#pragma once

#include <utility>
#include <vector>

#include "trident/backend/backend.hpp"
#include "trident/model/gpt.hpp"
#include "trident/model/layout.hpp"
#include "trident/parallel/groups.hpp"

namespace trident {

class ZeroShards : public GradStaging {
 public:
  // stage: parallel.zero.
  ZeroShards(const ParamLayout& layout, const ParallelGroups& g, Backend& be, int stage);
  ~ZeroShards() override;
  ZeroShards(const ZeroShards&) = delete;
  ZeroShards& operator=(const ZeroShards&) = delete;

  // Elements [begin, end) of the flat buffer that DP rank dp_rank of dp owns in bucket bk: its
  // ZeRO shard, also the slice whose squares it contributes to the gradient norm.
  static std::pair<size_t, size_t> dp_slice(const Bucket& bk, int dp, int dp_rank);
  // Elements of the staging buffers of ZeRO-2 on a stage of this layout: one per bucket reduced
  // once, three of the largest bucket reduced on every micro-batch (the planner's count).
  static size_t staging_elements(const ParamLayout& layout);
  // Per bucket of a ZeRO-2 stage: 1 where it is reduced once (on the last micro-batch), 0 where on
  // every micro-batch.
  static std::vector<char> reduced_once(const ParamLayout& layout);
  // Buffers for the buckets of a stage (ZeRO-2's gradient staging, ZeRO-3's parameter gathers):
  // `reused` of the largest other bucket's size (at most `most`), which the buckets not marked in
  // `own` take in turn in bucket order, then one for each bucket marked in `own`.
  struct BufferPlan {
    int reused = 0;
    std::vector<int> buffer_of;     // bucket -> its buffer
    std::vector<size_t> elements;   // of each buffer
    size_t total() const;
  };
  static BufferPlan plan_buffers(const ParamLayout& layout, const std::vector<char>& own, int most);

  bool zero() const { return stage_ >= 1; }   // optimizer state sharded over DP
  // ZeRO-2 with dp > 1: gradients staged and kept as shards (grad_shard, param_shard).
  bool staged() const { return staged_; }

  // Staged only: this rank's reduced gradient shards (fp32) and updated parameter shards (compute
  // dtype), every bucket's in bucket order, and bucket b's offset in them.
  TensorView grad_shard() const { return grad_shard_.view(DType::F32).slice(0, shard_total_); }
  TensorView param_shard() const { return param_shard_.view(dtype_).slice(0, shard_total_); }
  size_t shard_offset(int b) const { return shard_offset_[b]; }

  // GradStaging (staged only).
  TensorView grad_view(size_t offset, size_t n) const override;
  bool per_micro(int unit) const override { return per_micro_bucket(layout_.bucket_of_unit(unit)); }
  void begin_unit(int unit) override;
  void end_unit(int unit) override;
  bool per_micro_bucket(int b) const { return staged_ && slot_of_[b] < n_rotating_; }
  // Starts the reduce-scatter of bucket b's staging buffer (GradSync, for the buckets reduced once).
  void reduce(int b);
  // Waits for every reduce-scatter started and adds this rank's slices to grad_shard().
  void settle_all();
  // The step's start: zeroes the buffers of the buckets reduced once; each shard is then written
  // by its bucket's first reduction (or zeroed by settle_all where none came).
  void zero_grads();

 private:
  // A staging buffer and the bucket it holds: being written (live) or being reduced (pending).
  struct Staging {
    Buffer buf;
    int bucket = -1;
    bool live = false;
    Request pending;
    bool into_shard = false;   // the pending reduce-scatter writes the bucket's shard itself
  };
  // Completes its reduce-scatter, if any, adding the slice to grad_shard_ unless it went there.
  void settle(Staging& s);
  TensorView staged_bucket(int b) const;
  TensorView bucket_shard(int b) const;   // bucket b's slice of grad_shard()

  const ParamLayout& layout_;
  const ParallelGroups& g_;
  Backend& be_;
  int stage_;
  bool staged_ = false;
  DType dtype_;
  Buffer grad_shard_, param_shard_;
  size_t shard_total_ = 0;
  std::vector<size_t> shard_offset_;   // of each bucket's shard in grad_shard_ and param_shard_
  // staging_[0, n_rotating_) are reused by the buckets reduced on every micro-batch (in turn);
  // each bucket reduced once has one of the rest.
  std::vector<Staging> staging_;
  int n_rotating_ = 0;
  std::vector<int> slot_of_;   // bucket -> its staging buffer
  std::vector<char> reduced_;  // bucket -> reduced this step: its shard holds the sum so far
};

}  // namespace trident
