// GPipe and 1F1B plans. 1F1B has three phases: warm-up forwards, the steady one-forward-
// one-backward phase, and cool-down backwards; its exchanges are paired in groups.
#include "trident/train/schedule.hpp"

#include <algorithm>

#include "trident/core/error.hpp"

namespace trident {

ScheduleKind parse_schedule(const std::string& name) {
  if (name == "gpipe") return ScheduleKind::GPipe;
  if (name == "1f1b") return ScheduleKind::OneFOneB;
  throw InputError(str("parallel.schedule = ", name, ": must be gpipe or 1f1b"));
}

namespace {

class PlanBuilder {
 public:
  PlanBuilder(int pp_size, int pp_rank) : first_(pp_rank == 0), last_(pp_rank == pp_size - 1) {}

  void fwd(int m) { plan_.push_back({Action::Fwd, m}); }
  void bwd(int m) { plan_.push_back({Action::Bwd, m}); }
  void recv_act(int m) { if (!first_) plan_.push_back({Action::RecvAct, m}); }
  void send_act(int m) { if (!last_) plan_.push_back({Action::SendAct, m}); }
  void recv_grad(int m) { if (!last_) plan_.push_back({Action::RecvGrad, m}); }
  void send_grad(int m) { if (!first_) plan_.push_back({Action::SendGrad, m}); }
  // Marks the communication actions added since `mark` as one group.
  size_t mark() const { return plan_.size(); }
  void group_since(size_t mark) {
    for (size_t i = mark; i + 1 < plan_.size(); ++i) plan_[i].grouped = true;
  }
  std::vector<Action> take() { return std::move(plan_); }

 private:
  bool first_, last_;
  std::vector<Action> plan_;
};

void forwards(PlanBuilder& b, int n_micro) {
  for (int m = 0; m < n_micro; ++m) {
    b.recv_act(m);
    b.fwd(m);
    b.send_act(m);
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

}  // namespace

std::vector<Action> make_plan(ScheduleKind kind, int pp_size, int pp_rank, int n_micro) {
  TRIDENT_CHECK(pp_size >= 1 && pp_rank >= 0 && pp_rank < pp_size && n_micro >= 1,
                str("plan for pp_size=", pp_size, " pp_rank=", pp_rank, " n_micro=", n_micro));
  return kind == ScheduleKind::GPipe ? gpipe(pp_size, pp_rank, n_micro) : one_f_one_b(pp_size, pp_rank, n_micro);
}

std::vector<Action> make_forward_plan(int pp_size, int pp_rank, int n_micro) {
  PlanBuilder b(pp_size, pp_rank);
  forwards(b, n_micro);
  return b.take();
}

int peak_in_flight(const std::vector<Action>& plan) {
  // A forward holds its activations until its backward; without one (evaluation) it holds them
  // only while it runs.
  const bool backwards = std::any_of(plan.begin(), plan.end(), [](const Action& a) { return a.kind == Action::Bwd; });
  int live = 0, peak = 0;
  for (const Action& a : plan) {
    if (a.kind == Action::Fwd) peak = std::max(peak, ++live);
    if (a.kind == Action::Bwd || (a.kind == Action::Fwd && !backwards)) --live;
  }
  return peak;
}

std::string to_string(const Action& a) {
  static const char* names[] = {"F", "B", "send_act", "recv_act", "send_grad", "recv_grad"};
  return str(names[a.kind], a.micro, a.grouped ? "+" : "");
}

}  // namespace trident
