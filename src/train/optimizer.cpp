// AdamW over update segments, ZeRO-1 all-gather, and the once-per-logical-parameter norm.
#include "trident/train/optimizer.hpp"

#include <algorithm>
#include <cmath>

namespace trident {

namespace {

// Pieces of the parameters of bucket b that fall in [begin, end), with state offsets from `state`.
void collect(const ParamLayout& layout, int b, size_t begin, size_t end, bool only_counted, size_t& state,
             std::vector<Optimizer::Segment>& out) {
  const Bucket& bk = layout.buckets()[b];
  for (const ParamInfo& p : layout.params()) {
    if (p.unit < bk.unit_begin || p.unit >= bk.unit_end) continue;
    if (only_counted && !p.count_in_norm) continue;
    size_t lo = std::max(begin, p.offset), hi = std::min(end, p.offset + p.numel);
    if (lo < hi) out.push_back({lo, state + (lo - begin), hi - lo, p.decay});
  }
  state += end - begin;
}

}  // namespace

Optimizer::Optimizer(const ParamLayout& layout, TensorView params, TensorView grads, const GradSync& sync,
                     const ParallelGroups& g, Backend& be, const TrainConfig& t, bool zero)
    : layout_(layout), params_(params), grads_(grads), g_(g), be_(be), t_(t), zero_(zero) {
  size_t state = 0, unused = 0;
  for (int b = 0; b < static_cast<int>(layout.buckets().size()); ++b) {
    auto [s0, s1] = sync.dp_slice(b);
    const Bucket& bk = layout.buckets()[b];
    if (zero) collect(layout, b, s0, s1, false, state, update_);
    else collect(layout, b, bk.offset, bk.offset + bk.size, false, state, update_);
    collect(layout, b, s0, s1, true, unused, norm_);
  }
  state_buf_ = Buffer(be, 3 * state * sizeof(float));
  TensorView all = state_buf_.view(DType::F32);
  master_ = all.slice(0, state);
  m_ = all.slice(state, state);
  v_ = all.slice(2 * state, state);
  norm_buf_ = Buffer(be, sizeof(float));
  norm_acc_ = norm_buf_.view(DType::F32).slice(0, 1);
}

void Optimizer::init_master() {
  for (const Segment& s : update_) be_.copy(master_.slice(s.state, s.n), params_.slice(s.flat, s.n));
}

double Optimizer::grad_norm() {
  be_.zero(norm_acc_);
  for (const Segment& s : norm_) be_.sum_squares(norm_acc_, grads_.slice(s.flat, s.n));
  g_.world->all_reduce(norm_acc_.data, 1, DType::F32, ReduceOp::Sum, be_.stream());
  float sq = 0;
  be_.copy_to_host(&sq, norm_acc_);
  return std::sqrt(static_cast<double>(sq));
}

void Optimizer::step(double lr, double grad_scale, long t) {
  AdamWArgs a;
  a.lr = static_cast<float>(lr);
  a.beta1 = static_cast<float>(t_.beta1);
  a.beta2 = static_cast<float>(t_.beta2);
  a.eps = static_cast<float>(t_.eps);
  a.grad_scale = static_cast<float>(grad_scale);
  a.bias_correction1 = static_cast<float>(1.0 - std::pow(t_.beta1, static_cast<double>(t)));
  a.bias_correction2 = static_cast<float>(1.0 - std::pow(t_.beta2, static_cast<double>(t)));
  for (const Segment& s : update_) {
    a.weight_decay = s.decay ? static_cast<float>(t_.weight_decay) : 0.0f;
    be_.adamw(params_.slice(s.flat, s.n), master_.slice(s.state, s.n), m_.slice(s.state, s.n),
              v_.slice(s.state, s.n), grads_.slice(s.flat, s.n), a);
  }
  if (!zero_ || g_.topo.dp() == 1) return;
  std::vector<Request> gathers;
  for (const Bucket& bk : layout_.buckets()) {
    TensorView v = params_.slice(bk.offset, bk.size);
    gathers.push_back(g_.dp->all_gather_async(v.data, bk.size / g_.topo.dp(), v.dtype, be_.stream()));
  }
  for (Request& r : gathers) r->wait(be_.stream());
}

}  // namespace trident
