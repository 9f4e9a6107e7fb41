// Pipeline plans simulated on all stages together under rendezvous semantics (a send completes
// only when the peer has posted the matching receive, as with NCCL): completeness, matching,
// deadlock freedom, and the in-flight activation bound of 1F1B.
#include <gtest/gtest.h>

#include <map>

#include "trident/train/schedule.hpp"

namespace trident {
namespace {

struct SimResult {
  bool deadlock = false;
  std::string detail;
};

// A communication action's partner on the neighbouring stage.
bool matches(const Action& a, int a_stage, const Action& b, int b_stage) {
  if (a.micro != b.micro) return false;
  switch (a.kind) {
    case Action::SendAct: return b.kind == Action::RecvAct && b_stage == a_stage + 1;
    case Action::RecvAct: return b.kind == Action::SendAct && b_stage == a_stage - 1;
    case Action::SendGrad: return b.kind == Action::RecvGrad && b_stage == a_stage - 1;
    case Action::RecvGrad: return b.kind == Action::SendGrad && b_stage == a_stage + 1;
    default: return false;
  }
}

int peer_of(const Action& a, int stage) {
  return (a.kind == Action::SendAct || a.kind == Action::RecvGrad) ? stage + 1 : stage - 1;
}

SimResult simulate(const std::vector<std::vector<Action>>& plans) {
  const int pp = static_cast<int>(plans.size());
  std::vector<size_t> pc(pp, 0);
  std::vector<std::vector<bool>> done(pp);
  // The current group of a stage: [pc, end) of consecutive grouped communication actions.
  auto group_end = [&](int s) {
    size_t e = pc[s];
    while (e < plans[s].size() && plans[s][e].is_comm() && plans[s][e].grouped) ++e;
    return e + 1;
  };
  for (int s = 0; s < pp; ++s) done[s].assign(plans[s].size(), false);
  while (true) {
    bool progress = false, all_done = true;
    for (int s = 0; s < pp; ++s) {
      if (pc[s] >= plans[s].size()) continue;
      all_done = false;
      const Action& a = plans[s][pc[s]];
      if (!a.is_comm()) {
        ++pc[s];
        progress = true;
        continue;
      }
      size_t end = group_end(s);
      for (size_t i = pc[s]; i < end; ++i) {
        if (done[s][i]) continue;
        const Action& op = plans[s][i];
        int p = peer_of(op, s);
        if (p < 0 || p >= pp) return {true, "stage " + std::to_string(s) + " talks to a missing stage"};
        if (pc[p] >= plans[p].size() || !plans[p][pc[p]].is_comm()) continue;
        size_t pend = group_end(p);
        for (size_t j = pc[p]; j < pend; ++j)
          if (!done[p][j] && matches(op, s, plans[p][j], p)) {
            done[s][i] = done[p][j] = true;
            progress = true;
            break;
          }
      }
      bool complete = true;
      for (size_t i = pc[s]; i < end; ++i) complete = complete && done[s][i];
      if (complete) {
        pc[s] = end;
        progress = true;
      }
    }
    if (all_done) return {};
    if (!progress) {
      std::string d;
      for (int s = 0; s < pp; ++s)
        d += " stage" + std::to_string(s) + "@" +
             (pc[s] < plans[s].size() ? to_string(plans[s][pc[s]]) : std::string("end"));
      return {true, d};
    }
  }
}

void check_schedule(ScheduleKind kind, int pp, int n_micro) {
  std::vector<std::vector<Action>> plans;
  for (int s = 0; s < pp; ++s) plans.push_back(make_plan(kind, pp, s, n_micro));
  for (int s = 0; s < pp; ++s) {
    // Every micro-batch: forward once, backward once, forward first; its exchanges present.
    std::map<std::pair<int, int>, int> count;
    std::vector<int> fwd_at(n_micro, -1), bwd_at(n_micro, -1);
    for (size_t i = 0; i < plans[s].size(); ++i) {
      const Action& a = plans[s][i];
      ASSERT_GE(a.micro, 0);
      ASSERT_LT(a.micro, n_micro);
      ++count[{a.kind, a.micro}];
      if (a.kind == Action::Fwd) fwd_at[a.micro] = static_cast<int>(i);
      if (a.kind == Action::Bwd) bwd_at[a.micro] = static_cast<int>(i);
      if (a.grouped) ASSERT_TRUE(a.is_comm() && i + 1 < plans[s].size() && plans[s][i + 1].is_comm());
    }
    for (int m = 0; m < n_micro; ++m) {
      EXPECT_EQ((count[{Action::Fwd, m}]), 1);
      EXPECT_EQ((count[{Action::Bwd, m}]), 1);
      EXPECT_LT(fwd_at[m], bwd_at[m]);
      EXPECT_EQ((count[{Action::RecvAct, m}]), s > 0 ? 1 : 0);
      EXPECT_EQ((count[{Action::SendAct, m}]), s < pp - 1 ? 1 : 0);
      EXPECT_EQ((count[{Action::RecvGrad, m}]), s < pp - 1 ? 1 : 0);
      EXPECT_EQ((count[{Action::SendGrad, m}]), s > 0 ? 1 : 0);
    }
    // Backwards in micro-batch order: the last backward is the last micro-batch (gradients final).
    for (int m = 1; m < n_micro; ++m) EXPECT_LT(bwd_at[m - 1], bwd_at[m]);
    int peak = peak_in_flight(plans[s]);
    if (kind == ScheduleKind::OneFOneB) {
      EXPECT_LE(peak, pp - s) << "1F1B stage " << s << " holds too many activations";
      EXPECT_LE(peak, pp);
    } else {
      EXPECT_EQ(peak, n_micro);
    }
  }
  SimResult r = simulate(plans);
  EXPECT_FALSE(r.deadlock) << "pp=" << pp << " n_micro=" << n_micro << " deadlock:" << r.detail;
}

TEST(Schedule, GPipeAndOneFOneBAreCompleteAndDeadlockFree) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int n_micro = pp; n_micro <= 3 * pp; ++n_micro) {
      SCOPED_TRACE("pp=" + std::to_string(pp) + " n_micro=" + std::to_string(n_micro));
      check_schedule(ScheduleKind::GPipe, pp, n_micro);
      check_schedule(ScheduleKind::OneFOneB, pp, n_micro);
    }
}

TEST(Schedule, OneFOneBPeakIsPipelineDepthWhileGPipeHoldsEveryMicroBatch) {
  EXPECT_EQ(peak_in_flight(make_plan(ScheduleKind::OneFOneB, 4, 0, 12)), 4);
  EXPECT_EQ(peak_in_flight(make_plan(ScheduleKind::OneFOneB, 4, 3, 12)), 1);
  EXPECT_EQ(peak_in_flight(make_plan(ScheduleKind::GPipe, 4, 0, 12)), 12);
}

TEST(Schedule, UngroupedOneFOneBWouldDeadlock) {
  // The simulator must be able to fail: strip the pairing from a 1F1B plan.
  std::vector<std::vector<Action>> plans;
  for (int s = 0; s < 2; ++s) {
    plans.push_back(make_plan(ScheduleKind::OneFOneB, 2, s, 4));
    for (Action& a : plans.back()) a.grouped = false;
  }
  EXPECT_TRUE(simulate(plans).deadlock);
}

TEST(Schedule, ForwardOnlyPlansForEvaluation) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int n_micro = 1; n_micro <= 2 * pp; ++n_micro) {
      std::vector<std::vector<Action>> plans;
      for (int s = 0; s < pp; ++s) {
        plans.push_back(make_forward_plan(pp, s, n_micro));
        int fwd = 0;
        for (const Action& a : plans.back()) {
          EXPECT_NE(a.kind, Action::Bwd);
          EXPECT_TRUE(a.kind != Action::SendGrad && a.kind != Action::RecvGrad);
          fwd += a.kind == Action::Fwd;
        }
        EXPECT_EQ(fwd, n_micro);
        EXPECT_EQ(peak_in_flight(plans.back()), 1);   // activations are dropped after each forward
      }
      SimResult r = simulate(plans);
      EXPECT_FALSE(r.deadlock) << "pp=" << pp << " n_micro=" << n_micro << r.detail;
    }
}

TEST(Schedule, RejectsUnknownName) {
  EXPECT_EQ(parse_schedule("gpipe"), ScheduleKind::GPipe);
  EXPECT_EQ(parse_schedule("1f1b"), ScheduleKind::OneFOneB);
  EXPECT_ANY_THROW(parse_schedule("interleaved"));
}

}  // namespace
}  // namespace trident
