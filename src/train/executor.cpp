// Executes a pipeline plan: grouped exchanges are posted together and completed before the next
// compute action, matching the rendezvous model the plan tests simulate.
#include "trident/train/executor.hpp"

#include <algorithm>

#include "trident/core/trace.hpp"

namespace trident {

PipelineExecutor::PipelineExecutor(GptStage& model, Comm& pp, std::vector<Action> plan)
    : model_(model), pp_(pp), plan_(std::move(plan)) {
  for (const Action& a : plan_) {
    n_micro_ = std::max(n_micro_, a.micro + 1);
    // GptStage holds one model chunk and runs its backward whole (require_runnable_schedule).
    TRIDENT_CHECK(a.chunk == 0 && a.kind != Action::BwdInput && a.kind != Action::BwdWeight,
                  str("the executor cannot run ", to_string(a), " (interleaved and zero_bubble are plans only)"));
  }
  TRIDENT_CHECK(slots_needed(plan_) <= model.n_slots(),
                str("plan needs ", slots_needed(plan_), " activation slots, model has ", model.n_slots()));
}

P2POp PipelineExecutor::p2p(const Action& a) const {
  const int slot = a.micro % model_.n_slots();
  const int me = pp_.rank();
  TensorView buf;
  P2POp::Kind kind = P2POp::Send;
  int peer = me;
  switch (a.kind) {
    case Action::SendAct: buf = model_.slot_output(slot); peer = me + 1; break;
    case Action::RecvAct: buf = model_.slot_input(slot); peer = me - 1; kind = P2POp::Recv; break;
    case Action::SendGrad: buf = model_.slot_grad(slot); peer = me - 1; break;
    case Action::RecvGrad: buf = model_.slot_grad(slot); peer = me + 1; kind = P2POp::Recv; break;
    default: TRIDENT_FATAL(str("not a communication action: ", to_string(a)));
  }
  return P2POp{kind, buf.data, buf.numel, buf.dtype, peer};
}

void PipelineExecutor::run(const Loader& load, bool with_grad, float dloss, const UnitDone& unit_done) {
  static const UnitDone kNone;
  std::vector<P2POp> group;
  for (const Action& a : plan_) {
    const int slot = a.micro % model_.n_slots();
    const bool last_micro = a.micro == n_micro_ - 1;
    if (a.is_comm()) {
      group.push_back(p2p(a));
      if (!a.grouped) {
        pp_.exchange(group, model_.backend().stream());
        group.clear();
      }
    } else if (a.kind == Action::Fwd) {
      TraceRange range("forward");
      load(a.micro, slot);
      model_.forward(slot, with_grad, dloss, last_micro ? unit_done : kNone);
    } else {   // Bwd: the constructor refused the split backward passes
      TraceRange range("backward");
      model_.backward(slot, last_micro ? unit_done : kNone);
    }
  }
  TRIDENT_CHECK(group.empty(), "plan ends inside a communication group");
}

}  // namespace trident
