// AdamW with fp32 master weights and moments over this rank's update range of each bucket:
// the whole bucket (zero = 0) or its DP shard (zero = 1, ZeRO-1), followed by an all-gather of
// the updated parameters. Also the global gradient norm, counting every logical parameter once.
#pragma once

#include <vector>

#include "trident/backend/backend.hpp"
#include "trident/config/run_config.hpp"
#include "trident/model/layout.hpp"
#include "trident/parallel/groups.hpp"
#include "trident/train/grad_sync.hpp"

namespace trident {

class Optimizer {
 public:
  Optimizer(const ParamLayout& layout, TensorView params, TensorView grads, const GradSync& sync,
            const ParallelGroups& g, Backend& be, const TrainConfig& t, bool zero);

  // Sets the fp32 master weights from the current parameters.
  void init_master();
  // Global L2 norm of the (reduced) gradients over all ranks.
  double grad_norm();
  // One AdamW update with learning rate lr; gradients are scaled by grad_scale first. t is the
  // 1-based update count used for bias correction.
  void step(double lr, double grad_scale, long t);

  // A piece of one parameter inside this rank's update range.
  struct Segment {
    size_t flat;    // offset in the flat parameter/gradient buffers
    size_t state;   // offset in master/m/v
    size_t n;
    bool decay;
  };
  const std::vector<Segment>& segments() const { return update_; }
  bool zero() const { return zero_; }
  TensorView master() const { return master_; }
  TensorView exp_avg() const { return m_; }
  TensorView exp_avg_sq() const { return v_; }

 private:
  const ParamLayout& layout_;
  TensorView params_, grads_;
  const ParallelGroups& g_;
  Backend& be_;
  TrainConfig t_;
  bool zero_;
  std::vector<Segment> update_;   // what this rank updates
  std::vector<Segment> norm_;     // what this rank adds to the norm (DP slice, counted parameters)
  Buffer state_buf_, norm_buf_;
  TensorView master_, m_, v_, norm_acc_;
};

}  // namespace trident
