// Executes a pipeline plan: grouped exchanges are posted together and completed before the next
// compute action other than a weight-gradient pass, matching the rendezvous model the plan tests
// simulate.
#include "trident/train/executor.hpp"

#include <algorithm>
#include <functional>
#include <map>

#include "trident/core/trace.hpp"

namespace trident {

namespace {

// Gives each (micro-batch, chunk) the lowest free index at its first action that `holds` one,
// and frees it at an action that `frees` it; -1 for the actions that hold none. *n: the indices
// used, the most held at once.
std::vector<int> lowest_free(const std::vector<Action>& plan, const std::function<bool(const Action&)>& holds,
                             const std::function<bool(const Action&)>& frees, int* n) {
  std::map<std::pair<int, int>, int> index_of;
  std::vector<char> busy;
  std::vector<int> out;
  for (const Action& a : plan) {
    if (!holds(a)) {
      out.push_back(-1);
      continue;
    }
    auto [it, first] = index_of.emplace(std::make_pair(a.micro, a.chunk), 0);
    if (first) {
      it->second = static_cast<int>(std::find(busy.begin(), busy.end(), 0) - busy.begin());
      if (it->second == static_cast<int>(busy.size())) busy.push_back(0);
      busy[it->second] = 1;
    }
    out.push_back(it->second);
    if (frees(a)) busy[it->second] = 0;
  }
  *n = static_cast<int>(busy.size());
  return out;
}

}  // namespace

std::vector<int> PipelineExecutor::assign_slots(const std::vector<Action>& plan, int* n_slots, bool inbox) {
  // A (micro-batch, chunk) takes the lowest free slot at its first action (the receive of its
  // input, or its forward; with the inbox always its forward) and frees it with the backward that
  // completes its parameter gradients (Bwd or BwdWeight), or its forward in a plan without
  // backwards. The exchange that follows (the input gradient's or the output's send) still reads
  // the slot: its gradient or output buffer, which the next holder's receive of its input leaves
  // alone.
  auto completes = [](const Action& a) { return a.kind == Action::Bwd || a.kind == Action::BwdWeight; };
  const bool backwards = std::any_of(plan.begin(), plan.end(), completes);
  int n = 0;
  std::vector<int> slots = lowest_free(
      plan, [&](const Action& a) { return !(inbox && a.kind == Action::RecvAct); },
      [&](const Action& a) { return completes(a) || (a.kind == Action::Fwd && !backwards); }, &n);
  if (n_slots) *n_slots = std::max(1, n);
  return slots;
}

bool PipelineExecutor::receives_into_inbox(const std::vector<Action>& plan) {
  int direct = 0, inbox = 0;
  assign_slots(plan, &direct, false);
  assign_slots(plan, &inbox, true);
  return inbox < direct;
}

int PipelineExecutor::slots_needed(const std::vector<Action>& plan) {
  int n = 0;
  assign_slots(plan, &n, receives_into_inbox(plan));
  return n;
}

std::vector<int> PipelineExecutor::assign_stashes(const std::vector<Action>& plan, int* n_stashes) {
  int n = 0;
  std::vector<int> stashes = lowest_free(
      plan, [](const Action& a) { return a.kind == Action::BwdInput || a.kind == Action::BwdWeight; },
      [](const Action& a) { return a.kind == Action::BwdWeight; }, &n);
  if (n_stashes) *n_stashes = n;
  return stashes;
}

int PipelineExecutor::stashes_needed(const std::vector<Action>& plan) {
  int n = 0;
  assign_stashes(plan, &n);
  return n;
}

PipelineExecutor::PipelineExecutor(GptStage& model, Comm& pp, std::vector<Action> plan)
    : model_(model), pp_(pp), plan_(std::move(plan)) {
  for (const Action& a : plan_) {
    n_micro_ = std::max(n_micro_, a.micro + 1);
    TRIDENT_CHECK(a.chunk < model.stage().n_chunks,
                  str("plan action ", to_string(a), " for a stage of ", model.stage().n_chunks, " model chunks"));
  }
  inbox_ = receives_into_inbox(plan_);
  int n_slots = 0;
  slot_ = assign_slots(plan_, &n_slots, inbox_);
  TRIDENT_CHECK(n_slots <= model.n_slots(),
                str("plan needs ", n_slots, " activation slots, model has ", model.n_slots()));
  // With the inbox, each received input must be taken by its forward before the next receive.
  takes_input_.assign(plan_.size(), 0);
  if (inbox_) {
    (void)model.recv_inbox();   // checks that the stage has one
    int pending = -1;           // the plan index of the receive not yet taken
    for (size_t i = 0; i < plan_.size(); ++i) {
      const Action& a = plan_[i];
      if (a.kind == Action::RecvAct) {
        TRIDENT_CHECK(pending < 0, str("plan receives ", to_string(a), " before the previous input is taken"));
        pending = static_cast<int>(i);
      } else if (a.kind == Action::Fwd && pending >= 0 && plan_[pending].micro == a.micro &&
                 plan_[pending].chunk == a.chunk) {
        takes_input_[i] = 1;
        pending = -1;
      }
    }
  }
  int n_stashes = 0;
  stash_ = assign_stashes(plan_, &n_stashes);
  TRIDENT_CHECK(n_stashes <= model.n_stashes(),
                str("plan needs ", n_stashes, " weight-gradient stashes, model has ", model.n_stashes()));
}

// The peer holds the neighbouring virtual stage: chunk c of rank r sends its activations to chunk c
// of rank r + 1, and the last rank's to chunk c + 1 of rank 0 (gradients the other way round).
P2POp PipelineExecutor::p2p(const Action& a, int slot) const {
  const int me = pp_.rank(), n = pp_.size();
  TensorView buf;
  P2POp::Kind kind = P2POp::Send;
  int peer = me;
  switch (a.kind) {
    case Action::SendAct: buf = model_.slot_output(slot); peer = (me + 1) % n; break;
    case Action::RecvAct:
      buf = inbox_ ? model_.recv_inbox() : model_.slot_input(slot);
      peer = (me + n - 1) % n;
      kind = P2POp::Recv;
      break;
    case Action::SendGrad: buf = model_.slot_grad(slot); peer = (me + n - 1) % n; break;
    case Action::RecvGrad: buf = model_.slot_grad(slot); peer = (me + 1) % n; kind = P2POp::Recv; break;
    default: TRIDENT_FATAL(str("not a communication action: ", to_string(a)));
  }
  return P2POp{kind, buf.data, buf.numel, buf.dtype, peer};
}

void PipelineExecutor::run(const Loader& load, bool with_grad, float dloss, const UnitDone& unit_done) {
  static const UnitDone kNone;
  const Stream stream = model_.backend().stream();
  std::vector<P2POp> group;
  // The last group posted, in flight until the next compute that is not a weight-gradient pass:
  // the weight passes after a group run beside its transfers (they read only their own
  // micro-batch's slot and stash, which no transfer of the group touches, and write parameter
  // gradients), as the plan tests' rendezvous model runs them. Any other compute, and the next
  // group, wait for it first.
  Request in_flight;
  auto settle = [&] {
    if (in_flight) in_flight->wait(stream);
    in_flight.reset();
  };
  for (size_t i = 0; i < plan_.size(); ++i) {
    const Action& a = plan_[i];
    const int slot = slot_[i];
    // A chunk's parameter gradients are final with its last micro-batch.
    const bool last_micro = a.micro == n_micro_ - 1;
    if (!a.is_comm() && a.kind != Action::BwdWeight) settle();
    if (a.is_comm()) {
      group.push_back(p2p(a, slot));
      if (!a.grouped) {
        settle();
        in_flight = pp_.exchange_async(group, stream);
        group.clear();
      }
    } else if (a.kind == Action::Fwd) {
      TraceRange range("forward");
      load(a.micro, slot);
      if (takes_input_[i]) model_.take_input(slot);
      model_.forward(slot, with_grad, dloss, last_micro ? unit_done : kNone, a.chunk);
    } else if (a.kind == Action::Bwd) {
      TraceRange range("backward");
      model_.backward(slot, last_micro ? unit_done : kNone, a.chunk);
    } else if (a.kind == Action::BwdInput) {
      TraceRange range("backward_input");
      model_.backward_input(slot, stash_[i], last_micro ? unit_done : kNone, a.chunk);
    } else {
      // The plan's weight passes run in micro-batch order, as 1F1B's backwards: the gradients
      // accumulate in the same order.
      TraceRange range("backward_weight");
      model_.backward_weight(slot, stash_[i], last_micro ? unit_done : kNone, a.chunk);
    }
  }
  settle();
  TRIDENT_CHECK(group.empty(), "plan ends inside a communication group");
}

}  // namespace trident
