// Pipeline schedules as plans: the ordered actions one stage performs in one optimizer step.
// A plan is pure data, so schedules are tested by simulating every stage's plan together.
#pragma once

#include <string>
#include <vector>

namespace trident {

enum class ScheduleKind { GPipe, OneFOneB };

ScheduleKind parse_schedule(const std::string& name);   // "gpipe" | "1f1b"

struct Action {
  enum Kind { Fwd, Bwd, SendAct, RecvAct, SendGrad, RecvGrad } kind;
  int micro;
  // Communication actions with `grouped` set are posted together with the next action
  // (paired send/recv, as NCCL needs to avoid a deadlock between neighbouring stages).
  bool grouped = false;

  bool is_comm() const { return kind != Fwd && kind != Bwd; }
  bool operator==(const Action& o) const { return kind == o.kind && micro == o.micro && grouped == o.grouped; }
};

std::vector<Action> make_plan(ScheduleKind kind, int pp_size, int pp_rank, int n_micro);
// Forwards only (evaluation): receive, forward, send, micro-batch after micro-batch.
std::vector<Action> make_forward_plan(int pp_size, int pp_rank, int n_micro);

// Micro-batches whose activations are held at once by this stage under the plan: the number of
// activation slots it needs.
int peak_in_flight(const std::vector<Action>& plan);

std::string to_string(const Action& a);

}  // namespace trident
