// Ownership rules of checkpoint ranges and the checksum.
#include "checkpoint_plan.hpp"

#include <cstring>

#include "trident/core/rng.hpp"

namespace trident {

const char* ckpt_group(CkptKind k) {
  switch (k) {
    case CkptKind::Model: return "model";
    case CkptKind::Master: return "optim/master";
    case CkptKind::ExpAvg: return "optim/exp_avg";
    case CkptKind::ExpAvgSq: return "optim/exp_avg_sq";
  }
  return "?";
}

CheckpointPlan make_checkpoint_plan(const GptStage& model, const Optimizer* opt, const ParallelGroups& g) {
  return make_checkpoint_plan(model.config(), model.layout(), opt, g);
}

CheckpointPlan make_checkpoint_plan(const ModelConfig& m, const ParamLayout& layout, const Optimizer* opt,
                                    const ParallelGroups& g, bool sharded_params) {
  CheckpointPlan plan;
  // Canonical order: the single-stage, single-shard layout lists every logical tensor once.
  ParamLayout all(m, StageInfo::of(m, 0, 1), 1, 0, 1, layout.bucket_elems());
  for (const ParamInfo& p : all.params()) plan.tensors.push_back({p.name, p.global_shape});

  // One copy of each element is written: the one counted in the gradient norm (not a TP replica,
  // not the last stage's copy of the tied embedding).
  auto owner_rules = [](const ParamInfo& p) { return p.count_in_norm; };
  for (const ParamInfo& p : layout.params()) {
    HostRange whole{&p, 0, static_cast<int64_t>(p.numel), p.offset};
    plan.model_need[p.name] = whole;
    if (g.coord.dp == 0 && owner_rules(p) && !sharded_params) plan.model_own[p.name] = whole;
  }
  if (!opt) return plan;
  for (const Optimizer::ParamRange& s : opt->param_ranges()) {
    for (const ParamInfo& p : layout.params()) {
      if (s.flat < p.offset || s.flat >= p.offset + p.numel) continue;
      const int64_t lo = static_cast<int64_t>(s.flat - p.offset);
      HostRange range{&p, lo, lo + static_cast<int64_t>(s.n), s.state};
      plan.optim_need[p.name] = range;
      if ((opt->zero() || g.coord.dp == 0) && owner_rules(p)) plan.optim_own[p.name] = range;
      if (sharded_params && owner_rules(p)) plan.model_own[p.name] = range;
    }
  }
  return plan;
}

uint64_t range_checksum(const HostRange& p, const float* host_base) {
  ShardBoxes sb = shard_boxes(*p.param, p.lo, p.hi);
  const std::vector<int64_t> local = p.param->local_shape();
  uint64_t sum = 0;
  for (size_t b = 0; b < sb.local.size(); ++b)
    for_each_run(local, p.param->global_shape, sb.local[b], sb.global[b], [&](int64_t gi, int64_t li, int64_t n) {
      const float* src = host_base + p.host + (li - p.lo);
      for (int64_t k = 0; k < n; ++k) {
        uint32_t bits;
        std::memcpy(&bits, src + k, 4);
        sum += splitmix64((static_cast<uint64_t>(gi + k) << 32) ^ bits);
      }
    });
  return sum;
}

void pack_range(const HostRange& p, const ShardBoxes& sb, const float* host_base, std::vector<float>& packed) {
  packed.resize(static_cast<size_t>(sb.elements));
  const std::vector<int64_t> local = p.param->local_shape();
  size_t at = 0;
  for (size_t b = 0; b < sb.local.size(); ++b)
    for_each_run(local, p.param->global_shape, sb.local[b], sb.global[b], [&](int64_t, int64_t li, int64_t n) {
      std::memcpy(packed.data() + at, host_base + p.host + (li - p.lo), n * sizeof(float));
      at += n;
    });
}

void unpack_range(const HostRange& p, const ShardBoxes& sb, const std::vector<float>& packed, float* host_base) {
  const std::vector<int64_t> local = p.param->local_shape();
  size_t at = 0;
  for (size_t b = 0; b < sb.local.size(); ++b)
    for_each_run(local, p.param->global_shape, sb.local[b], sb.global[b], [&](int64_t, int64_t li, int64_t n) {
      std::memcpy(host_base + p.host + (li - p.lo), packed.data() + at, n * sizeof(float));
      at += n;
    });
}

}  // namespace trident
