// AdamW with fp32 master weights and moments over this rank's update range of each bucket:
// the whole bucket (zero = 0) or its DP shard (zero = 1, ZeRO-1; zero = 2, ZeRO-2, reading the
// reduced gradient shards and writing the parameter shards of ZeroShards), whose updated
// parameters then reach the other DP ranks by an all-gather per bucket. Under ZeRO-3 (a stage
// without parameters of its own) the update ends at the shards, which ShardedParams gathers as
// the model computes. Also the global gradient norm, counting every logical parameter once.
//
// With offload (parallel.offload_optimizer, ZeRO-Offload) the master weights and moments live in
// host memory: each bucket's final gradients go to the host on the transfer queue as soon as the
// backward has them (gradients_final, beside the rest of the backward), the host AdamW updates
// them bucket by bucket and each bucket's parameters go back up while the host updates the next.
#pragma once

#include <vector>

#include "trident/config/run_config.hpp"
#include "trident/model/gpt.hpp"
#include "trident/model/layout.hpp"
#include "trident/parallel/groups.hpp"
#include "trident/train/host_adamw.hpp"
#include "trident/train/zero_shards.hpp"

namespace trident {

class Optimizer : public ParamFetch {
 public:
  // Updates the shards of `shards`. offload: the state in host memory and the update on the host.
  Optimizer(const ParamLayout& layout, TensorView params, TensorView grads,
            const ParallelGroups& g, Backend& be, const TrainConfig& t, const ZeroShards& shards,
            bool offload = false);
  // Completes the all-gathers already started (every DP rank started them), so that none is
  // still writing the parameters when their memory goes.
  ~Optimizer() override;

  // Sets the fp32 master weights from the stage's flat parameters `from` (backend memory, fp32 or
  // the compute dtype; empty: the current parameters, under ZeRO-3 the parameter shards).
  void init_master(TensorView from = {});
  // acc (1 f32, backend memory) += this rank's share of the squared global gradient norm; the
  // sum over all ranks (one world all-reduce) is the square of the global L2 norm.
  void add_norm_sq(TensorView acc);
  // One AdamW update with learning rate lr. With clip > 0, gradients are scaled by
  // min(1, clip / (norm + 1e-6)) where norm = sqrt(norm_sq[0]) is read on the device. t is the
  // 1-based update count used for bias correction.
  void step(double lr, TensorView norm_sq, double clip, long t);

  // Offload only (elsewhere they do nothing). The gradients of `bucket` are final once
  // `reduction` is (null: after the work queued so far): starts their copy to the host.
  void gradients_final(int bucket, CommWork* reduction);
  // After the backward's gradient reduction: copies the buckets not copied yet and orders the
  // compute after the copies, so the update may read them once the host has waited for the stream.
  void join_gradient_copies();

  // ZeRO-1 with dp > 1: step() starts the all-gather of the bucket that the next forward reads
  // first and leaves the others pending; the forward (ParamFetch, see GptStage) starts each one
  // (prefetch) and waits for it (need) as it goes, so the transfers run beside the forward
  // instead of slowing the update. gather_all() completes every pending one. These calls are
  // collectives over the DP group: every DP rank makes them in the same order (they follow
  // the same schedule). Elsewhere they do nothing.
  void need(int unit) override;
  void prefetch(int unit) override;
  void gather_all();

  // The elements of one parameter that this rank updates (or adds to the norm), and where their
  // optimizer state lives.
  struct ParamRange {
    size_t flat;    // offset in the flat parameter/gradient buffers
    size_t state;   // offset in master/m/v
    size_t n;
    bool decay;
    int bucket;     // the DP bucket it belongs to
  };
  const std::vector<ParamRange>& param_ranges() const { return update_; }
  // The ranges of DP rank dp_rank: what it updates and what it adds to the norm; returns the
  // optimizer state elements.
  static size_t make_param_ranges(const ParamLayout& layout, int dp, int dp_rank, bool zero,
                                  std::vector<ParamRange>& update, std::vector<ParamRange>& norm);
  // Backend bytes of the piece tables of DP rank dp_rank (the planner's count).
  static size_t table_bytes(const ParamLayout& layout, int dp, int dp_rank, bool zero);
  bool zero() const { return zero_; }
  bool offloaded() const { return offload_; }
  // Whether master(), exp_avg() and exp_avg_sq() are host memory (offload or a host backend), read
  // and written in place rather than through the backend.
  bool state_on_host() const { return offload_ || !be_.is_device(); }
  TensorView master() const { return master_; }
  TensorView exp_avg() const { return m_; }
  TensorView exp_avg_sq() const { return v_; }
  // Where AdamW writes the parameters: the stage's, or under ZeRO-2 and 3 this rank's shards in the
  // state's layout (ParamRange::state).
  TensorView updated_params() const { return updated_; }

 private:
  const ParamLayout& layout_;
  TensorView params_, grads_;   // the stage's parameters; the gradients (the shards under ZeRO-2)
  TensorView updated_;          // where AdamW writes the parameters: params_, or the shards under ZeRO-2
  const ZeroShards& shards_;
  const ParallelGroups& g_;
  Backend& be_;
  TrainConfig t_;
  bool zero_;
  std::vector<ParamRange> update_;   // what this rank updates
  std::vector<ParamRange> norm_;     // what this rank adds to the norm (DP slice, counted parameters)
  Buffer state_buf_, update_table_, norm_table_;   // tables: the ranges as TensorPieces
  std::vector<std::pair<size_t, size_t>> bucket_pieces_;   // [first, count) of each bucket's update pieces
  TensorView master_, m_, v_;
  bool lazy_gather_ = false;            // ZeRO-1 with dp > 1
  std::vector<int> unit_bucket_;        // the bucket of each unit
  std::vector<char> stale_;             // bucket updated here, its all-gather not started
  std::vector<Request> gathering_;      // started, not yet waited for
  // Offload: the state (master_, m_, v_ view it), the gradients copied beside it and the updated
  // parameters in the compute dtype, all in host memory in the state's layout. A bucket's update
  // range is one span: at `device` in grads_ and updated_, at `state` in these (`flat` in
  // params_); the padding between its parameters rides along (zeros, never updated).
  bool offload_ = false;
  Buffer host_state_, host_grads_, host_params_;   // host memory (alloc_host)
  struct Span {
    size_t flat, device, state, n;
  };
  std::vector<Span> spans_;
  std::vector<std::vector<AdamWRange>> host_ranges_;   // each bucket's update ranges, state offsets
  std::vector<char> copied_;                          // this step's gradients of the bucket went to the host
  // AdamW over `pieces` of the update table.
  void adamw_multi(TensorView pieces, const AdamWArgs& a, TensorView norm_sq, float clip);
  // Offload: AdamW of bucket b on the host, then its parameters' upload.
  void host_update(int b, const AdamWArgs& a);
  void start_gather(int bucket);
  void wait_gather(int bucket);
};

}  // namespace trident
