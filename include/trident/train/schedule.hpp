// Pipeline schedules as plans: the ordered actions one stage performs in one optimizer step.
// A plan is pure data, so schedules are tested by simulating every stage's plan together.
#pragma once

#include <string>
#include <vector>

namespace trident {

// GPipe, 1F1B, Interleaved (Megatron's interleaved 1F1B over virtual stages) and ZeroBubble (ZB-H1
// of Qi et al. 2023, the backward split in GptStage::backward_input and backward_weight).
enum class ScheduleKind { GPipe, OneFOneB, Interleaved, ZeroBubble };

ScheduleKind parse_schedule(const std::string& name);   // "gpipe" | "1f1b" | "interleaved" | "zero_bubble"

// With v virtual stages, chunk c of pipeline rank r holds the layers of virtual stage c*pp_size + r,
// so the activations go round the ranks v times. Comm actions carry the chunk of the local compute
// whose input or output they move; the peer is the rank of the neighbouring virtual stage.
struct Action {
  // Bwd is the whole backward; ZeroBubble splits it into BwdInput (the input gradient, which the
  // previous stage waits for) and BwdWeight (the parameter gradients, which nothing waits for).
  enum Kind { Fwd, Bwd, BwdInput, BwdWeight, SendAct, RecvAct, SendGrad, RecvGrad } kind;
  int micro;
  // Communication actions with `grouped` set are posted together with the next action
  // (paired send/recv, as NCCL needs to avoid a deadlock between neighbouring stages). A group
  // completes before the next action other than BwdWeight: weight-gradient passes need nothing
  // from a neighbour, so they run while the exchanges before them are in flight.
  bool grouped = false;
  int chunk = 0;

  bool is_comm() const { return kind >= SendAct; }
  bool operator==(const Action& o) const {
    return kind == o.kind && micro == o.micro && grouped == o.grouped && chunk == o.chunk;
  }
};

// virtual_stages > 1 only for Interleaved, which needs n_micro % pp_size == 0.
std::vector<Action> make_plan(ScheduleKind kind, int pp_size, int pp_rank, int n_micro, int virtual_stages = 1);
// Forwards only (evaluation): receive, forward, send, micro-batch after micro-batch (and chunk
// after chunk of each with virtual_stages model chunks per rank).
std::vector<Action> make_forward_plan(int pp_size, int pp_rank, int n_micro, int virtual_stages = 1);

// Activations held at once by this stage under the plan, from a forward until the backward that
// produces the parameter gradients (Bwd or BwdWeight), counted per model chunk: the number of
// activation slots it needs. A chunk of an interleaved plan is 1/v of a stage's layers.
int peak_in_flight(const std::vector<Action>& plan);

std::string to_string(const Action& a);

}  // namespace trident
