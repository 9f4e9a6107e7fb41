// ZeRO-3's parameter shards and the buffers their buckets are gathered into (see sharded_params.hpp).
#include "trident/train/sharded_params.hpp"

#include <algorithm>

namespace trident {

namespace {

constexpr int kRotatingBuffers = 2;   // the bucket computed with, and the next one coming

}  // namespace

std::vector<char> ShardedParams::kept_gathered(const ParamLayout& layout) {
  std::vector<char> kept(layout.buckets().size(), 0);
  for (int u : {layout.head_unit(), layout.embedding_unit(), layout.tied_unit()})
    if (u >= 0) kept[layout.bucket_of_unit(u)] = 1;
  return kept;
}

ZeroShards::BufferPlan ShardedParams::buffer_plan(const ParamLayout& layout) {
  return ZeroShards::plan_buffers(layout, kept_gathered(layout), kRotatingBuffers);
}

size_t ShardedParams::gathered_elements(const ParamLayout& layout) { return buffer_plan(layout).total(); }

ShardedParams::ShardedParams(const ParamLayout& layout, const ParallelGroups& g, Backend& be, ZeroShards& shards)
    : layout_(layout), g_(g), be_(be), shards_(shards), dtype_(be.compute_dtype()) {
  TRIDENT_CHECK(shards.staged(), "ShardedParams: the gradients must be staged (ZeRO-2 or 3 with dp > 1)");
  const ZeroShards::BufferPlan plan = buffer_plan(layout);
  n_rotating_ = plan.reused;
  slot_of_ = plan.buffer_of;
  held_.resize(plan.elements.size());
  for (size_t i = 0; i < held_.size(); ++i) held_[i].buf = Buffer(be, plan.elements[i] * dtype_size(dtype_));
  // A kept bucket's buffer holds zeros, as the shards start: current.
  for (size_t b = 0; b < slot_of_.size(); ++b)
    if (slot_of_[b] >= n_rotating_) {
      held_[slot_of_[b]].bucket = static_cast<int>(b);
      held_[slot_of_[b]].current = true;
    }
}

ShardedParams::~ShardedParams() { finish(); }

TensorView ShardedParams::bucket_view(int b) const {
  return held_[slot_of_[b]].buf.view(dtype_).slice(0, layout_.buckets()[b].size);
}

TensorView ShardedParams::param_view(size_t offset, size_t n) const {
  const std::vector<Bucket>& buckets = layout_.buckets();
  for (size_t b = 0; b < buckets.size(); ++b)
    if (offset >= buckets[b].offset && offset < buckets[b].offset + buckets[b].size)
      return bucket_view(static_cast<int>(b)).slice(offset - buckets[b].offset, n);
  TRIDENT_FATAL(str("param_view: element ", offset, " is in no bucket"));
}

void ShardedParams::assign(size_t offset, TensorView from) {
  finish();
  const TensorView shard = shards_.param_shard();
  const size_t end = offset + from.numel;
  const int dp = g_.topo.dp();
  for (int b = 0; b < static_cast<int>(layout_.buckets().size()); ++b) {
    const Bucket& bk = layout_.buckets()[b];
    auto [s0, s1] = ZeroShards::dp_slice(bk, dp, g_.coord.dp);
    size_t lo = std::max(offset, s0), hi = std::min(end, s1);
    if (lo < hi) be_.copy(shard.slice(shards_.shard_offset(b) + (lo - s0), hi - lo), from.slice(lo - offset, hi - lo));
    // A kept bucket's current buffer is written as well; a stale one (or a reused buffer) is
    // gathered from the shards when next needed.
    Gathered& h = holder(b);
    lo = std::max(offset, bk.offset);
    hi = std::min(end, bk.offset + bk.size);
    if (lo >= hi) continue;
    if (slot_of_[b] >= n_rotating_ && h.current)
      be_.copy(bucket_view(b).slice(lo - bk.offset, hi - lo), from.slice(lo - offset, hi - lo));
    else if (h.bucket == b)
      h.current = false;
  }
}

Request ShardedParams::gather(int b, TensorView whole) const {
  const size_t share = layout_.buckets()[b].size / g_.topo.dp();
  be_.copy(whole.slice(share * g_.coord.dp, share), shards_.param_shard().slice(shards_.shard_offset(b), share));
  return g_.dp->all_gather_async(whole.data, share, dtype_, be_.stream());
}

void ShardedParams::copy_all(TensorView into) const {
  TRIDENT_CHECK(into.dtype == dtype_ && into.numel == layout_.total(), "copy_all: not this stage's parameters");
  for (int b = 0; b < static_cast<int>(layout_.buckets().size()); ++b) {
    const Bucket& bk = layout_.buckets()[b];
    gather(b, into.slice(bk.offset, bk.size))->wait(be_.stream());
  }
}

void ShardedParams::wait(Gathered& h) {
  if (!h.pending) return;
  h.pending->wait(be_.stream());
  h.pending.reset();
}

void ShardedParams::start(int b) {
  Gathered& h = holder(b);
  if (h.bucket == b && h.current) return;
  wait(h);   // a gather of another bucket into this buffer that nothing needed
  h.bucket = b;
  h.current = true;
  h.pending = gather(b, bucket_view(b));
}

void ShardedParams::need(int unit) {
  if (unit < 0) return;
  const int b = layout_.bucket_of_unit(unit);
  start(b);
  wait(holder(b));
  if (slot_of_[b] < n_rotating_) in_use_ = slot_of_[b];
}

void ShardedParams::prefetch(int unit) {
  if (unit < 0) return;
  const int b = layout_.bucket_of_unit(unit);
  if (slot_of_[b] == in_use_) return;   // the stage still computes with that buffer
  start(b);
}

void ShardedParams::updated() {
  for (Gathered& h : held_) {
    wait(h);
    h.current = false;
  }
  in_use_ = -1;
  prefetch(layout_.first_forward_unit());
}

void ShardedParams::finish() {
  for (Gathered& h : held_) wait(h);
}

}  // namespace trident
