// The DP shards of the gradient buckets and ZeRO-2's staging buffers (see zero_shards.hpp).
#include "trident/train/zero_shards.hpp"

#include <algorithm>

namespace trident {

namespace {

constexpr int kRotatingBuffers = 3;   // at block i: i+1's bucket being ended, i's, and i-1's begun

}  // namespace

ZeroShards::BufferPlan ZeroShards::plan_buffers(const ParamLayout& layout, const std::vector<char>& own, int most) {
  BufferPlan plan;
  size_t largest = 0;
  for (size_t b = 0; b < own.size(); ++b)
    if (!own[b]) {
      ++plan.reused;
      largest = std::max(largest, layout.buckets()[b].size);
    }
  plan.reused = std::min(plan.reused, most);
  plan.elements.assign(plan.reused, largest);
  int turn = 0;
  for (size_t b = 0; b < own.size(); ++b) {
    if (!own[b]) {
      plan.buffer_of.push_back(turn++ % plan.reused);
      continue;
    }
    plan.buffer_of.push_back(static_cast<int>(plan.elements.size()));
    plan.elements.push_back(layout.buckets()[b].size);
  }
  return plan;
}

size_t ZeroShards::BufferPlan::total() const {
  size_t n = 0;
  for (size_t e : elements) n += e;
  return n;
}

// Buckets that get gradients outside their blocks' backward (see zero_shards.hpp).
std::vector<char> ZeroShards::reduced_once(const ParamLayout& layout) {
  std::vector<char> once(layout.buckets().size(), 0);
  for (int u : {layout.head_unit(), layout.embedding_unit(), layout.tied_unit()})
    if (u >= 0) once[layout.bucket_of_unit(u)] = 1;
  // On the last stage the first unit after the head is the last block (units in completion order).
  if (layout.head_unit() >= 0 && layout.head_unit() + 1 < layout.n_units() &&
      layout.head_unit() + 1 != layout.tied_unit() && layout.head_unit() + 1 != layout.embedding_unit())
    once[layout.bucket_of_unit(layout.head_unit() + 1)] = 1;
  return once;
}

size_t ZeroShards::staging_elements(const ParamLayout& layout) {
  return plan_buffers(layout, reduced_once(layout), kRotatingBuffers).total();
}

ZeroShards::ZeroShards(const ParamLayout& layout, const ParallelGroups& g, Backend& be, int stage)
    : layout_(layout), g_(g), be_(be), stage_(stage), dtype_(be.compute_dtype()) {
  const int dp = g.topo.dp();
  staged_ = stage >= 2 && dp > 1;
  if (staged_) {
    for (const Bucket& bk : layout.buckets()) {
      shard_offset_.push_back(shard_total_);
      shard_total_ += bk.size / dp;
    }
    grad_shard_ = Buffer(be, shard_total_ * sizeof(float));
    param_shard_ = Buffer(be, shard_total_ * dtype_size(dtype_));
    // AdamW writes the parameters' ranges only; the alignment gaps and bucket tails it skips are
    // all-gathered with them and must stay zero, as ZeRO-1 keeps them.
    be.zero(param_shard_.view(dtype_).slice(0, shard_total_));
    reduced_.assign(layout.buckets().size(), 0);
    const BufferPlan plan = plan_buffers(layout, reduced_once(layout), kRotatingBuffers);
    n_rotating_ = plan.reused;
    slot_of_ = plan.buffer_of;
    staging_.resize(plan.elements.size());
    for (size_t i = 0; i < staging_.size(); ++i) staging_[i].buf = Buffer(be, plan.elements[i] * sizeof(float));
    for (size_t b = 0; b < slot_of_.size(); ++b)
      if (slot_of_[b] >= n_rotating_) staging_[slot_of_[b]].bucket = static_cast<int>(b);
  }
}

ZeroShards::~ZeroShards() {
  for (Staging& s : staging_)
    if (s.pending) s.pending->wait(be_.stream());
}

std::pair<size_t, size_t> ZeroShards::dp_slice(const Bucket& bk, int dp, int dp_rank) {
  const size_t share = bk.size / dp;
  const size_t begin = bk.offset + share * dp_rank;
  return {begin, begin + share};
}

TensorView ZeroShards::bucket_shard(int b) const {
  return grad_shard().slice(shard_offset_[b], layout_.buckets()[b].size / g_.topo.dp());
}

TensorView ZeroShards::staged_bucket(int b) const {
  return staging_[slot_of_[b]].buf.view(DType::F32).slice(0, layout_.buckets()[b].size);
}

TensorView ZeroShards::grad_view(size_t offset, size_t n) const {
  TRIDENT_CHECK(staged_, "grad_view: gradients are staged only under ZeRO-2 with dp > 1");
  const std::vector<Bucket>& buckets = layout_.buckets();
  for (size_t b = 0; b < buckets.size(); ++b)
    if (offset >= buckets[b].offset && offset < buckets[b].offset + buckets[b].size)
      return staged_bucket(static_cast<int>(b)).slice(offset - buckets[b].offset, n);
  TRIDENT_FATAL(str("grad_view: element ", offset, " is in no bucket"));
}

void ZeroShards::settle(Staging& s) {
  if (!s.pending) return;
  s.pending->wait(be_.stream());
  s.pending.reset();
  if (s.into_shard) return;
  const TensorView shard = bucket_shard(s.bucket);
  be_.accumulate(shard, staged_bucket(s.bucket).slice(shard.numel * g_.coord.dp, shard.numel));
}

void ZeroShards::begin_unit(int unit) {
  const int b = layout_.bucket_of_unit(unit);
  if (!per_micro_bucket(b)) return;
  Staging& s = staging_[slot_of_[b]];
  if (s.live && s.bucket == b) return;   // begun by an earlier unit of this micro-batch
  TRIDENT_CHECK(!s.live, str("ZeRO-2 staging: bucket ", b, " begun while bucket ", s.bucket, " is still written"));
  settle(s);
  s.bucket = b;
  s.live = true;
  be_.zero(staged_bucket(b));
}

void ZeroShards::end_unit(int unit) {
  const int b = layout_.bucket_of_unit(unit);
  if (!per_micro_bucket(b) || unit != layout_.buckets()[b].unit_end - 1) return;
  Staging& s = staging_[slot_of_[b]];
  TRIDENT_CHECK(s.live && s.bucket == b, str("ZeRO-2 staging: bucket ", b, " ended without being begun"));
  s.live = false;
  reduce(b);
}

void ZeroShards::reduce(int b) {
  Staging& s = staging_[slot_of_[b]];
  TensorView v = staged_bucket(b), shard = bucket_shard(b);
  // The step's first reduction of the bucket writes the shard; later ones are added to it.
  s.into_shard = !reduced_[b];
  reduced_[b] = 1;
  s.pending = s.into_shard ? g_.dp->reduce_scatter_to_async(v.data, shard.data, shard.numel, DType::F32, be_.stream())
                           : g_.dp->reduce_scatter_async(v.data, shard.numel, DType::F32, be_.stream());
}

void ZeroShards::settle_all() {
  for (Staging& s : staging_) {
    TRIDENT_CHECK(!s.live, str("ZeRO-2 staging: bucket ", s.bucket, " still written at the step's end"));
    settle(s);
  }
  // A bucket no reduction reached this step holds no gradient.
  for (size_t b = 0; b < reduced_.size(); ++b)
    if (!reduced_[b]) be_.zero(bucket_shard(static_cast<int>(b)));
}

void ZeroShards::zero_grads() {
  // The shards are written by each bucket's first reduction of the step (reduce).
  std::fill(reduced_.begin(), reduced_.end(), 0);
  for (size_t i = n_rotating_; i < staging_.size(); ++i) be_.zero(staging_[i].buf.view(DType::F32));
}

}  // namespace trident
