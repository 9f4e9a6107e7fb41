// PipelineExecutor: runs one stage's plan for one optimizer step — forwards, backwards and the
// activation/gradient exchanges with the neighbouring stages.
#pragma once

#include <functional>
#include <vector>

#include "trident/model/gpt.hpp"
#include "trident/train/schedule.hpp"

namespace trident {

class PipelineExecutor {
 public:
  PipelineExecutor(GptStage& model, Comm& pp, std::vector<Action> plan);

  // load(micro, slot) puts the micro-batch's tokens into the slot. unit_done is passed to the
  // forward/backward (and split backward passes) of the last micro-batch, when parameter
  // gradients become final.
  using Loader = std::function<void(int micro, int slot)>;
  void run(const Loader& load, bool with_grad, float dloss, const UnitDone& unit_done);

  const std::vector<Action>& plan() const { return plan_; }
  // The activation slot of each action of the plan (each micro-batch's forward of a chunk holds
  // one until the backward that completes its parameter gradients, Bwd or BwdWeight), and in
  // n_slots how many there are, at least 1. A micro-batch takes its slot at its input's receive,
  // or with `inbox` at its forward (the receive goes to GptStage::recv_inbox, -1 for it here).
  static std::vector<int> assign_slots(const std::vector<Action>& plan, int* n_slots, bool inbox = false);
  // Whether receiving into the inbox saves a slot: a plan whose next input arrives before the
  // pass that frees a slot (zero_bubble's deferred weight passes on stages > 0).
  static bool receives_into_inbox(const std::vector<Action>& plan);
  // The slots the plan runs with (with the inbox where it saves one): peak_in_flight(plan).
  static int slots_needed(const std::vector<Action>& plan);
  // The weight-gradient stash of each BwdInput and BwdWeight (-1 for the other actions): a
  // micro-batch's input-gradient pass takes one and its weight pass frees it. n_stashes (0
  // without split backwards) is what GptStage's ActivationOptions::weight_stashes must be.
  static std::vector<int> assign_stashes(const std::vector<Action>& plan, int* n_stashes);
  static int stashes_needed(const std::vector<Action>& plan);

 private:
  P2POp p2p(const Action& a, int slot) const;
  GptStage& model_;
  Comm& pp_;
  std::vector<Action> plan_;
  std::vector<int> slot_;    // per action of plan_
  bool inbox_ = false;       // receives_into_inbox(plan_)
  std::vector<char> takes_input_;   // per action of plan_: a forward whose input is in the inbox
  std::vector<int> stash_;   // per action of plan_: assign_stashes
  int n_micro_ = 0;
};

}  // namespace trident
