// Pipeline plans. GPipe; 1F1B in three phases (warm-up forwards, steady one-forward-one-backward,
// cool-down backwards) with its exchanges paired in groups; Megatron's interleaved 1F1B over model
// chunks; and ZB-H1, 1F1B with the backward split and the weight-gradient passes deferred.
#include "trident/train/schedule.hpp"

#include <algorithm>

#include "trident/core/error.hpp"

namespace trident {

ScheduleKind parse_schedule(const std::string& name) {
  if (name == "gpipe") return ScheduleKind::GPipe;
  if (name == "1f1b") return ScheduleKind::OneFOneB;
  if (name == "interleaved") return ScheduleKind::Interleaved;
  if (name == "zero_bubble") return ScheduleKind::ZeroBubble;
  throw InputError(str("parallel.schedule = ", name, ": must be gpipe, 1f1b, interleaved or zero_bubble"));
}

namespace {

class PlanBuilder {
 public:
  PlanBuilder(int pp_size, int pp_rank, int virtual_stages = 1)
      : pp_size_(pp_size), pp_rank_(pp_rank), n_virtual_(pp_size * virtual_stages) {}

  void fwd(int m) { plan_.push_back({Action::Fwd, m}); }
  void bwd(int m) { plan_.push_back({Action::Bwd, m}); }
  void recv_act(int m, int c = 0) { if (has_prev(c)) plan_.push_back({Action::RecvAct, m, false, c}); }
  void send_act(int m, int c = 0) { if (has_next(c)) plan_.push_back({Action::SendAct, m, false, c}); }
  void recv_grad(int m, int c = 0) { if (has_next(c)) plan_.push_back({Action::RecvGrad, m, false, c}); }
  void send_grad(int m, int c = 0) { if (has_prev(c)) plan_.push_back({Action::SendGrad, m, false, c}); }
  // The exchanges a compute action waits for, and those that carry its result on.
  void receives_for(const Action& a) {
    if (a.kind == Action::Fwd) recv_act(a.micro, a.chunk);
    if (a.kind == Action::Bwd || a.kind == Action::BwdInput) recv_grad(a.micro, a.chunk);
  }
  void sends_of(const Action& a) {
    if (a.kind == Action::Fwd) send_act(a.micro, a.chunk);
    if (a.kind == Action::Bwd || a.kind == Action::BwdInput) send_grad(a.micro, a.chunk);
  }
  void compute(const Action& a) { plan_.push_back(a); }
  // Marks the communication actions added since `mark` as one group.
  size_t mark() const { return plan_.size(); }
  void group_since(size_t mark) {
    for (size_t i = mark; i + 1 < plan_.size(); ++i) plan_[i].grouped = true;
  }
  std::vector<Action> take() { return std::move(plan_); }

 private:
  // Virtual stage c*pp_size + pp_rank; its neighbours are on other ranks, except with one rank,
  // whose chunks hand over locally.
  bool has_prev(int c) const { return pp_size_ > 1 && c * pp_size_ + pp_rank_ > 0; }
  bool has_next(int c) const { return pp_size_ > 1 && c * pp_size_ + pp_rank_ < n_virtual_ - 1; }

  int pp_size_, pp_rank_, n_virtual_;
  std::vector<Action> plan_;
};

// Each micro-batch through every chunk in turn, one exchange at a time: the ranks' actions follow
// one order (micro-batch, virtual stage), so no two wait for each other.
void forwards(PlanBuilder& b, int n_micro, int virtual_stages = 1) {
  for (int m = 0; m < n_micro; ++m)
    for (int c = 0; c < virtual_stages; ++c) {
      b.recv_act(m, c);
      b.compute({Action::Fwd, m, false, c});
      b.send_act(m, c);
    }
}

std::vector<Action> gpipe(int pp_size, int pp_rank, int n_micro) {
  PlanBuilder b(pp_size, pp_rank);
  forwards(b, n_micro);
  for (int m = 0; m < n_micro; ++m) {
    b.recv_grad(m);
    b.bwd(m);
    b.send_grad(m);
  }
  return b.take();
}

std::vector<Action> one_f_one_b(int pp_size, int pp_rank, int n_micro) {
  PlanBuilder b(pp_size, pp_rank);
  const int warmup = std::min(pp_size - pp_rank - 1, n_micro);
  const int steady = n_micro - warmup;

  // Warm-up: forwards only, filling the pipeline below this stage.
  for (int m = 0; m < warmup; ++m) {
    b.recv_act(m);
    b.fwd(m);
    b.send_act(m);
  }
  // Steady state: one forward, one backward. Each send is paired with the receive the
  // neighbour is posting at the same moment.
  if (steady > 0) b.recv_act(warmup);
  for (int i = 0; i < steady; ++i) {
    const int mf = warmup + i, mb = i;
    b.fwd(mf);
    size_t g = b.mark();
    b.send_act(mf);
    b.recv_grad(mb);
    b.group_since(g);
    b.bwd(mb);
    g = b.mark();
    b.send_grad(mb);
    if (i + 1 < steady) b.recv_act(mf + 1);
    b.group_since(g);
  }
  // Cool-down: the backwards of the warm-up micro-batches.
  for (int m = steady; m < n_micro; ++m) {
    b.recv_grad(m);
    b.bwd(m);
    b.send_grad(m);
  }
  return b.take();
}

// A step: compute actions that exchange together, as Megatron's schedules pair them.
using Step = std::vector<Action>;

// The plan of these steps: after a step's computes, one group posts their sends and the receives
// of the next step's computes (so that neighbours exchanging in both directions, and the ranks of
// an interleaved ring, meet in one group); the step's weight-gradient passes follow the group and
// run while it is in flight (they need nothing from a neighbour).
std::vector<Action> with_exchanges(PlanBuilder& b, const std::vector<Step>& steps) {
  auto is_weight = [](const Action& a) { return a.kind == Action::BwdWeight; };
  size_t g = b.mark();
  for (const Action& a : steps.front()) b.receives_for(a);
  b.group_since(g);
  for (size_t i = 0; i < steps.size(); ++i) {
    for (const Action& a : steps[i])
      if (!is_weight(a)) b.compute(a);
    g = b.mark();
    for (const Action& a : steps[i]) b.sends_of(a);
    if (i + 1 < steps.size())
      for (const Action& a : steps[i + 1]) b.receives_for(a);
    b.group_since(g);
    for (const Action& a : steps[i])
      if (is_weight(a)) b.compute(a);
  }
  return b.take();
}

// Megatron's interleaved 1F1B: the micro-batches go through the chunks in rounds of pp_size, so
// that chunk c+1 of rank 0 starts a micro-batch just as chunk c of the last rank sends it on.
// Forward k is micro-batch (k / (p*v))*p + k % p of chunk (k % (p*v)) / p; backward k the same
// with the chunks in reverse. The bubble shrinks to (p-1)/(v*m) of the step.
std::vector<Action> interleaved(int pp_size, int pp_rank, int n_micro, int virtual_stages) {
  const int p = pp_size, v = virtual_stages, total = n_micro * v;
  auto at = [&](Action::Kind kind, int k) {
    const int in_round = k % (p * v);
    const int chunk = in_round / p;
    return Action{kind, k / (p * v) * p + in_round % p, false, kind == Action::Fwd ? chunk : v - 1 - chunk};
  };
  // Warm-up: the forwards that keep every later virtual stage busy until this rank's first
  // backward arrives: two per rank below this one (its forward and backward) plus a round of
  // pp_size per further chunk.
  const int warmup = std::min((p - pp_rank - 1) * 2 + (v - 1) * p, total);
  std::vector<Step> steps;
  for (int k = 0; k < warmup; ++k) steps.push_back({at(Action::Fwd, k)});
  // Steady state: one forward and one backward per step.
  for (int k = 0; k < total - warmup; ++k) steps.push_back({at(Action::Fwd, warmup + k), at(Action::Bwd, k)});
  // Cool-down: the backwards of the warm-up forwards.
  for (int k = total - warmup; k < total; ++k) steps.push_back({at(Action::Bwd, k)});
  PlanBuilder b(pp_size, pp_rank, virtual_stages);
  return with_exchanges(b, steps);
}

// ZB-H1: the 1F1B order of forwards and input-gradient backwards, each backward followed by its
// weight-gradient pass, except that stage r defers its first r of them. Deferred, they fill the
// cool-down bubble (the bubble falls from (p-1)(F+B+W) to (p-1)(F+B-W)); each stage then holds at
// most (p - r) + r = p micro-batches, 1F1B's peak on stage 0.
std::vector<Action> zero_bubble(int pp_size, int pp_rank, int n_micro) {
  const int warmup = std::min(pp_size - pp_rank - 1, n_micro), deferred = pp_rank;
  std::vector<Step> steps;
  int next_w = 0;
  auto backward = [&](int m) {
    steps.push_back({{Action::BwdInput, m}});
    if (m >= deferred) steps.back().push_back({Action::BwdWeight, next_w++});
  };
  // Warm-up: forwards only, as 1F1B.
  for (int m = 0; m < warmup; ++m) steps.push_back({{Action::Fwd, m}});
  // Steady state: one forward, one input-gradient backward, one weight-gradient pass.
  for (int i = 0; i < n_micro - warmup; ++i) {
    steps.push_back({{Action::Fwd, warmup + i}});
    backward(i);
  }
  // Cool-down: the remaining input gradients, then the deferred weight gradients.
  for (int m = n_micro - warmup; m < n_micro; ++m) backward(m);
  while (next_w < n_micro) steps.back().push_back({Action::BwdWeight, next_w++});
  PlanBuilder b(pp_size, pp_rank);
  return with_exchanges(b, steps);
}

}  // namespace

std::vector<Action> make_plan(ScheduleKind kind, int pp_size, int pp_rank, int n_micro, int virtual_stages) {
  TRIDENT_CHECK(pp_size >= 1 && pp_rank >= 0 && pp_rank < pp_size && n_micro >= 1 && virtual_stages >= 1,
                str("plan for pp_size=", pp_size, " pp_rank=", pp_rank, " n_micro=", n_micro,
                    " virtual_stages=", virtual_stages));
  TRIDENT_CHECK(virtual_stages == 1 || kind == ScheduleKind::Interleaved,
                str("virtual_stages=", virtual_stages, " needs the interleaved schedule"));
  switch (kind) {
    case ScheduleKind::GPipe: return gpipe(pp_size, pp_rank, n_micro);
    case ScheduleKind::OneFOneB: return one_f_one_b(pp_size, pp_rank, n_micro);
    case ScheduleKind::Interleaved:
      TRIDENT_CHECK(n_micro % pp_size == 0,
                    str("interleaved plan: n_micro=", n_micro, " is not a multiple of pp_size=", pp_size));
      return interleaved(pp_size, pp_rank, n_micro, virtual_stages);
    case ScheduleKind::ZeroBubble: return zero_bubble(pp_size, pp_rank, n_micro);
  }
  TRIDENT_FATAL("unknown schedule kind");
}

std::vector<Action> make_forward_plan(int pp_size, int pp_rank, int n_micro, int virtual_stages) {
  PlanBuilder b(pp_size, pp_rank, virtual_stages);
  forwards(b, n_micro, virtual_stages);
  return b.take();
}

int peak_in_flight(const std::vector<Action>& plan) {
  // A forward holds its activations until the backward that produces the parameter gradients;
  // without one (evaluation) it holds them only while it runs.
  auto frees = [](const Action& a) { return a.kind == Action::Bwd || a.kind == Action::BwdWeight; };
  const bool backwards = std::any_of(plan.begin(), plan.end(), frees);
  int live = 0, peak = 0;
  for (const Action& a : plan) {
    if (a.kind == Action::Fwd) peak = std::max(peak, ++live);
    if (frees(a) || (a.kind == Action::Fwd && !backwards)) --live;
  }
  return peak;
}

std::string to_string(const Action& a) {
  static const char* names[] = {"F", "B", "Bi", "W", "send_act", "recv_act", "send_grad", "recv_grad"};
  return str(names[a.kind], a.micro, a.chunk > 0 ? str("/c", a.chunk) : std::string(), a.grouped ? "+" : "");
}

}  // namespace trident
