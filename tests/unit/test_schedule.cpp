// Pipeline plans simulated on all stages together under rendezvous semantics (a send completes
// only when the peer has posted the matching receive, as with NCCL): completeness, matching,
// data dependencies, deadlock freedom, in-flight activation bounds, and the bubble each schedule
// leaves in a unit-time model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "trident/core/error.hpp"
#include "trident/train/executor.hpp"
#include "trident/train/schedule.hpp"

namespace trident {
namespace {

// Unit-time model, per model chunk: a forward takes 1, a whole backward 2, and its input-gradient
// and weight-gradient halves 1 each. Exchanges take no time but wait for their peer; weight-gradient
// passes run while the exchanges before them wait.
int duration(Action::Kind kind) {
  switch (kind) {
    case Action::Fwd: return 1;
    case Action::Bwd: return 2;
    case Action::BwdInput: return 1;
    case Action::BwdWeight: return 1;
    default: return 0;
  }
}

struct SimResult {
  std::string error;   // empty: every plan ran to its end
  int makespan = 0;    // time at which the last stage finishes
  int work = 0;        // compute time of one stage (every stage has the same)

  // Idle time over compute time, as Megatron states the bubble fraction.
  double bubble() const { return static_cast<double>(makespan - work) / work; }
};

// All ranks' plans run together, virtual stage c*pp + r on chunk c of rank r.
class Simulator {
 public:
  Simulator(std::vector<std::vector<Action>> plans, int virtual_stages)
      : plans_(std::move(plans)), pp_(static_cast<int>(plans_.size())), n_virtual_(pp_ * virtual_stages) {}

  SimResult run() {
    pc_.assign(pp_, 0);
    clock_.assign(pp_, 0);
    ready_.assign(pp_, 0);
    pair_time_.assign(pp_, {});
    for (int r = 0; r < pp_; ++r) pair_time_[r].assign(plans_[r].size(), -1);
    SimResult res;
    for (const Action& a : plans_[0]) res.work += duration(a.kind);
    while (true) {
      bool progress = false, all_done = true;
      for (int r = 0; r < pp_; ++r) {
        if (pc_[r] >= plans_[r].size()) continue;
        all_done = false;
        const Action& a = plans_[r][pc_[r]];
        std::string missing = a.is_comm() ? std::string() : missing_input(r, a);
        if (!missing.empty()) return {"rank " + std::to_string(r) + " runs " + to_string(a) + " before " + missing};
        if (!a.is_comm()) {
          done_.insert(event(a.kind, vstage(r, a), a.micro));
          if (a.kind != Action::BwdWeight) clock_[r] = posted(r);
          clock_[r] += duration(a.kind);
          ++pc_[r];
          progress = true;
          continue;
        }
        std::string err;
        if (advance_group(r, progress, err)) continue;
        if (!err.empty()) return {err};
      }
      if (all_done) break;
      if (!progress) {
        std::string d = "deadlock:";
        for (int r = 0; r < pp_; ++r)
          d += " rank" + std::to_string(r) + "@" +
               (pc_[r] < plans_[r].size() ? to_string(plans_[r][pc_[r]]) : std::string("end"));
        return {d};
      }
    }
    for (int r = 0; r < pp_; ++r) {
      int work = 0;
      for (const Action& a : plans_[r]) work += duration(a.kind);
      if (work != res.work) return {"ranks have unequal work"};
      res.makespan = std::max(res.makespan, posted(r));
    }
    return res;
  }

 private:
  // A compute's kind as the dependency it provides: Bwd and BwdInput both give the input gradient.
  using Event = std::tuple<int, int, int>;   // (kind, virtual stage, micro)
  static Event event(Action::Kind kind, int s, int micro) {
    return {kind == Action::BwdInput ? Action::Bwd : kind, s, micro};
  }
  // When rank r posts its next exchange or compute: once its compute and its exchanges are done.
  int posted(int r) const { return std::max(clock_[r], ready_[r]); }
  int vstage(int rank, const Action& a) const { return a.chunk * pp_ + rank; }
  int rank_of(int s) const { return s % pp_; }
  // The virtual stage at the other end of an exchange.
  int peer_stage(int rank, const Action& a) const {
    const bool downstream = a.kind == Action::SendAct || a.kind == Action::RecvGrad;
    return vstage(rank, a) + (downstream ? 1 : -1);
  }

  // What a compute still lacks: the activation from the previous virtual stage (received, or
  // produced by this rank's previous chunk when there is one rank), the gradient from the next,
  // its own forward, or for a weight pass its input-gradient pass.
  std::string missing_input(int rank, const Action& a) const {
    const int s = vstage(rank, a);
    auto has = [&](Action::Kind k, int st) { return done_.count(event(k, st, a.micro)) > 0; };
    auto got = [&](Action::Kind k) { return received_.count(event(k, s, a.micro)) > 0; };
    const bool local = pp_ == 1;
    if (a.chunk < 0 || s >= n_virtual_) return "a chunk it does not hold";
    switch (a.kind) {
      case Action::Fwd:
        if (s > 0 && !(local ? has(Action::Fwd, s - 1) : got(Action::RecvAct))) return "its activation";
        return "";
      case Action::Bwd:
      case Action::BwdInput:
        if (!has(Action::Fwd, s)) return "its forward";
        if (s < n_virtual_ - 1 && !(local ? has(Action::Bwd, s + 1) : got(Action::RecvGrad))) return "its gradient";
        return "";
      case Action::BwdWeight: return has(Action::Bwd, s) ? "" : "its input-gradient pass";
      default: return "";
    }
  }

  // The current group of a rank: [pc, end) of consecutive grouped communication actions.
  size_t group_end(int r) const {
    size_t e = pc_[r];
    while (e < plans_[r].size() && plans_[r][e].is_comm() && plans_[r][e].grouped) ++e;
    return e + 1;
  }

  bool matches(const Action& a, int a_rank, const Action& b, int b_rank) const {
    static const std::map<int, int> partner = {{Action::SendAct, Action::RecvAct}, {Action::RecvAct, Action::SendAct},
                                               {Action::SendGrad, Action::RecvGrad}, {Action::RecvGrad, Action::SendGrad}};
    return a.micro == b.micro && partner.at(a.kind) == b.kind && peer_stage(a_rank, a) == vstage(b_rank, b) &&
           peer_stage(b_rank, b) == vstage(a_rank, a);
  }

  // Matches the ops of rank r's current group with the peers' current groups (a rendezvous pairs
  // when the later side posts). The group is done at its latest pairing; the weight-gradient
  // passes after it start when it was posted.
  bool advance_group(int r, bool& progress, std::string& err) {
    const size_t end = group_end(r);
    for (size_t i = pc_[r]; i < end; ++i) {
      if (pair_time_[r][i] >= 0) continue;
      const Action& op = plans_[r][i];
      const int ps = peer_stage(r, op);
      if (ps < 0 || ps >= n_virtual_) {
        err = "rank " + std::to_string(r) + " " + to_string(op) + " talks to a missing stage";
        return false;
      }
      const bool send = op.kind == Action::SendAct || op.kind == Action::SendGrad;
      if (send && done_.count(event(op.kind == Action::SendAct ? Action::Fwd : Action::Bwd, vstage(r, op), op.micro)) == 0) {
        err = "rank " + std::to_string(r) + " sends " + to_string(op) + " before computing it";
        return false;
      }
      const int q = rank_of(ps);
      if (pc_[q] >= plans_[q].size() || !plans_[q][pc_[q]].is_comm()) continue;
      const size_t qend = group_end(q);
      for (size_t j = pc_[q]; j < qend; ++j)
        if (pair_time_[q][j] < 0 && matches(op, r, plans_[q][j], q)) {
          pair_time_[r][i] = pair_time_[q][j] = std::max(posted(r), posted(q));
          for (const auto& [rank, idx] : {std::pair<int, size_t>{r, i}, std::pair<int, size_t>{q, j}}) {
            const Action& x = plans_[rank][idx];
            if (x.kind == Action::RecvAct || x.kind == Action::RecvGrad)
              received_.insert(event(x.kind, vstage(rank, x), x.micro));
          }
          progress = true;
          break;
        }
    }
    const int start = posted(r);
    int finish = start;
    for (size_t i = pc_[r]; i < end; ++i) {
      if (pair_time_[r][i] < 0) return false;
      finish = std::max(finish, pair_time_[r][i]);
    }
    clock_[r] = start;
    ready_[r] = finish;
    pc_[r] = end;
    progress = true;
    return true;
  }

  std::vector<std::vector<Action>> plans_;
  int pp_, n_virtual_;
  std::vector<size_t> pc_;
  std::vector<int> clock_;                    // when the rank's computes are done
  std::vector<int> ready_;                    // when its last exchange group is done
  std::vector<std::vector<int>> pair_time_;   // when each exchange paired; -1: not yet
  std::set<Event> done_, received_;
};

std::vector<std::vector<Action>> all_plans(ScheduleKind kind, int pp, int n_micro, int v = 1) {
  std::vector<std::vector<Action>> plans;
  for (int r = 0; r < pp; ++r) plans.push_back(make_plan(kind, pp, r, n_micro, v));
  return plans;
}

SimResult simulate(ScheduleKind kind, int pp, int n_micro, int v = 1) {
  return Simulator(all_plans(kind, pp, n_micro, v), v).run();
}

// Every (chunk, micro-batch) of every rank: each compute once, in order (forward, backward or
// input-gradient then weight-gradient pass), its exchanges present; the passes that produce the
// parameter gradients in micro-batch order per chunk (the last one makes them final).
void check_complete(const std::vector<std::vector<Action>>& plans, int v, int n_micro, bool split) {
  const int pp = static_cast<int>(plans.size());
  for (int r = 0; r < pp; ++r) {
    std::map<std::tuple<int, int, int>, int> count, at;   // (kind, chunk, micro)
    for (size_t i = 0; i < plans[r].size(); ++i) {
      const Action& a = plans[r][i];
      ASSERT_GE(a.micro, 0);
      ASSERT_LT(a.micro, n_micro);
      ASSERT_GE(a.chunk, 0);
      ASSERT_LT(a.chunk, v);
      ++count[{a.kind, a.chunk, a.micro}];
      at[{a.kind, a.chunk, a.micro}] = static_cast<int>(i);
      if (a.grouped) ASSERT_TRUE(a.is_comm() && i + 1 < plans[r].size() && plans[r][i + 1].is_comm());
    }
    const Action::Kind grads = split ? Action::BwdWeight : Action::Bwd;
    for (int c = 0; c < v; ++c) {
      const int s = c * pp + r;
      const bool prev = pp > 1 && s > 0, next = pp > 1 && s < pp * v - 1;
      for (int m = 0; m < n_micro; ++m) {
        SCOPED_TRACE("rank " + std::to_string(r) + " chunk " + std::to_string(c) + " micro " + std::to_string(m));
        EXPECT_EQ((count[{Action::Fwd, c, m}]), 1);
        EXPECT_EQ((count[{Action::Bwd, c, m}]), split ? 0 : 1);
        EXPECT_EQ((count[{Action::BwdInput, c, m}]), split ? 1 : 0);
        EXPECT_EQ((count[{Action::BwdWeight, c, m}]), split ? 1 : 0);
        const int back = at[{split ? Action::BwdInput : Action::Bwd, c, m}];
        EXPECT_LT((at[{Action::Fwd, c, m}]), back);
        if (split) EXPECT_LT(back, (at[{Action::BwdWeight, c, m}]));
        EXPECT_EQ((count[{Action::RecvAct, c, m}]), prev ? 1 : 0);
        EXPECT_EQ((count[{Action::SendGrad, c, m}]), prev ? 1 : 0);
        EXPECT_EQ((count[{Action::SendAct, c, m}]), next ? 1 : 0);
        EXPECT_EQ((count[{Action::RecvGrad, c, m}]), next ? 1 : 0);
        if (m > 0) EXPECT_LT((at[{grads, c, m - 1}]), (at[{grads, c, m}]));
      }
    }
  }
}

TEST(Schedule, GPipeAndOneFOneBAreCompleteAndDeadlockFree) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int n_micro = pp; n_micro <= 3 * pp; ++n_micro) {
      SCOPED_TRACE("pp=" + std::to_string(pp) + " n_micro=" + std::to_string(n_micro));
      for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
        const auto plans = all_plans(kind, pp, n_micro);
        check_complete(plans, 1, n_micro, false);
        for (int r = 0; r < pp; ++r) {
          if (kind == ScheduleKind::OneFOneB) {
            EXPECT_EQ(peak_in_flight(plans[r]), pp - r) << "1F1B stage " << r;
          } else {
            EXPECT_EQ(peak_in_flight(plans[r]), n_micro);
          }
          // The executor's slots: as many as the activations held at once; no split backward.
          EXPECT_EQ(PipelineExecutor::slots_needed(plans[r]), peak_in_flight(plans[r]));
          EXPECT_EQ(PipelineExecutor::stashes_needed(plans[r]), 0);
        }
        const SimResult res = Simulator(plans, 1).run();
        ASSERT_EQ(res.error, "");
        // Both leave (p-1)(F+B) idle: a bubble of (p-1)/m.
        EXPECT_EQ(res.makespan - res.work, 3 * (pp - 1));
      }
    }
}

TEST(Schedule, InterleavedIsCompleteDeadlockFreeWithBubbleOverV) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int v = 1; v <= 4; ++v)
      for (int n_micro = pp; n_micro <= 4 * pp; n_micro += pp) {
        SCOPED_TRACE("pp=" + std::to_string(pp) + " v=" + std::to_string(v) + " n_micro=" + std::to_string(n_micro));
        const auto plans = all_plans(ScheduleKind::Interleaved, pp, n_micro, v);
        check_complete(plans, v, n_micro, false);
        for (int r = 0; r < pp; ++r) {
          // Chunk activations: Megatron's warm-up forwards plus the one of the steady phase.
          const int bound = std::min(2 * (pp - r - 1) + (v - 1) * pp + 1, n_micro * v);
          EXPECT_EQ(peak_in_flight(plans[r]), bound) << "rank " << r;
          EXPECT_EQ(PipelineExecutor::slots_needed(plans[r]), bound) << "rank " << r;
          // A (micro-batch, chunk) keeps its slot from its first action to its last, and no other
          // one holds that slot from its forward to its backward.
          int n_slots = 0;
          const std::vector<int> slot = PipelineExecutor::assign_slots(plans[r], &n_slots);
          std::map<std::pair<int, int>, int> slot_of;
          std::map<int, std::pair<int, int>> holder;
          for (size_t i = 0; i < plans[r].size(); ++i) {
            const Action& a = plans[r][i];
            const std::pair<int, int> key{a.micro, a.chunk};
            ASSERT_EQ(slot_of.emplace(key, slot[i]).first->second, slot[i]) << to_string(a);
            if (a.kind == Action::Fwd) {
              ASSERT_EQ(holder.count(slot[i]), 0u) << to_string(a);
              holder[slot[i]] = key;
            }
            if (a.kind == Action::Bwd) holder.erase(slot[i]);
          }
        }
        const SimResult res = Simulator(plans, v).run();
        ASSERT_EQ(res.error, "");
        // (p-1)(F+B) of a chunk, 1/v of a stage's: the bubble is (p-1)/(v*m).
        EXPECT_EQ(res.makespan - res.work, 3 * (pp - 1));
        EXPECT_DOUBLE_EQ(res.bubble(), static_cast<double>(pp - 1) / (v * n_micro));
      }
}

TEST(Schedule, ZeroBubbleIsCompleteDeadlockFreeWithOneFOneBsPeak) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int n_micro = pp; n_micro <= 3 * pp; ++n_micro) {
      SCOPED_TRACE("pp=" + std::to_string(pp) + " n_micro=" + std::to_string(n_micro));
      const auto plans = all_plans(ScheduleKind::ZeroBubble, pp, n_micro);
      check_complete(plans, 1, n_micro, true);
      int peak = 0, peak_1f1b = 0;
      for (int r = 0; r < pp; ++r) {
        EXPECT_LE(peak_in_flight(plans[r]), pp) << "rank " << r;
        peak = std::max(peak, peak_in_flight(plans[r]));
        // The executor's slots are held until the weight pass, which follows the exchange group
        // that may already receive the next forward's input: at most one slot more than the
        // activations held at once, on the stages that receive activations. Stage r defers r weight passes,
        // so r + 1 micro-batches at most are between their input-gradient and weight passes,
        // each with a weight-gradient stash. The weight passes run in micro-batch order (the
        // gradients accumulate as under 1F1B), each on its input pass's stash.
        EXPECT_GE(PipelineExecutor::slots_needed(plans[r]), peak_in_flight(plans[r])) << "rank " << r;
        EXPECT_LE(PipelineExecutor::slots_needed(plans[r]), peak_in_flight(plans[r]) + (r > 0 ? 1 : 0))
            << "rank " << r;
        int n_stashes = 0;
        const std::vector<int> stash = PipelineExecutor::assign_stashes(plans[r], &n_stashes);
        EXPECT_EQ(n_stashes, r + 1) << "rank " << r;
        std::map<int, int> stash_of;
        int next_w = 0;
        for (size_t i = 0; i < plans[r].size(); ++i) {
          const Action& a = plans[r][i];
          if (a.kind == Action::BwdInput) stash_of[a.micro] = stash[i];
          if (a.kind != Action::BwdWeight) continue;
          EXPECT_EQ(a.micro, next_w++) << "rank " << r;
          EXPECT_EQ(stash[i], stash_of.at(a.micro)) << to_string(a);
        }
        peak_1f1b = std::max(peak_1f1b, peak_in_flight(make_plan(ScheduleKind::OneFOneB, pp, r, n_micro)));
      }
      EXPECT_EQ(peak, peak_1f1b);
      const SimResult zb = Simulator(plans, 1).run(), ofob = simulate(ScheduleKind::OneFOneB, pp, n_micro);
      ASSERT_EQ(zb.error, "");
      ASSERT_EQ(zb.work, ofob.work);
      // ZB-H1's (p-1)(F+B-W) against 1F1B's (p-1)(F+B+W).
      EXPECT_EQ(zb.makespan - zb.work, pp - 1);
      if (pp > 1) EXPECT_LT(zb.bubble(), ofob.bubble());
    }
}

TEST(Schedule, BubbleTable) {
  const int pp = 4, n_micro = 8;
  std::printf("bubble in the unit-time model, pp=%d m=%d (F=1, B=2 or Bi=W=1 per chunk)\n", pp, n_micro);
  std::printf("  %-16s %8s %8s %22s\n", "schedule", "bubble", "theory", "peak in-flight stages");
  struct Row {
    const char* name;
    ScheduleKind kind;
    int v;
    double theory;   // (p-1)/m, (p-1)/(v*m), and ZB-H1's (p-1)(F+B-W) / (m(F+B+W))
  };
  const double p1_m = (pp - 1.0) / n_micro;
  for (const Row& row : {Row{"gpipe", ScheduleKind::GPipe, 1, p1_m}, Row{"1f1b", ScheduleKind::OneFOneB, 1, p1_m},
                         Row{"interleaved v=2", ScheduleKind::Interleaved, 2, p1_m / 2},
                         Row{"interleaved v=4", ScheduleKind::Interleaved, 4, p1_m / 4},
                         Row{"zero_bubble", ScheduleKind::ZeroBubble, 1, p1_m / 3}}) {
    const SimResult res = simulate(row.kind, pp, n_micro, row.v);
    ASSERT_EQ(res.error, "");
    double peak = 0;   // in whole-stage activations: a chunk holds 1/v of them
    for (int r = 0; r < pp; ++r)
      peak = std::max(peak, static_cast<double>(peak_in_flight(make_plan(row.kind, pp, r, n_micro, row.v))) / row.v);
    std::printf("  %-16s %8.4f %8.4f %22.2f\n", row.name, res.bubble(), row.theory, peak);
    EXPECT_DOUBLE_EQ(res.bubble(), row.theory) << row.name;
  }
}

TEST(Schedule, SimulatorCatchesBadPlans) {
  // Ungrouped 1F1B exchanges deadlock under rendezvous.
  auto plans = all_plans(ScheduleKind::OneFOneB, 2, 4);
  for (auto& plan : plans)
    for (Action& a : plan) a.grouped = false;
  EXPECT_NE(Simulator(plans, 1).run().error.find("deadlock"), std::string::npos);
  // A weight pass moved before its input-gradient pass.
  plans = all_plans(ScheduleKind::ZeroBubble, 2, 4);
  auto w = std::find_if(plans[1].begin(), plans[1].end(), [](const Action& a) { return a.kind == Action::BwdWeight; });
  std::rotate(plans[1].begin(), w, w + 1);
  EXPECT_NE(Simulator(plans, 1).run().error.find("input-gradient"), std::string::npos);
  // A second chunk's forward without the receive of its activation (both sides dropped).
  plans = all_plans(ScheduleKind::Interleaved, 2, 2, 2);
  for (int r = 0; r < 2; ++r) {
    auto& p = plans[r];
    p.erase(std::remove_if(p.begin(), p.end(),
                           [&](const Action& a) {
                             return a.micro == 0 && ((r == 0 && a.kind == Action::RecvAct && a.chunk == 1) ||
                                                     (r == 1 && a.kind == Action::SendAct && a.chunk == 0));
                           }),
            p.end());
    for (size_t i = 0; i < p.size(); ++i)
      if (p[i].grouped && (i + 1 == p.size() || !p[i + 1].is_comm())) p[i].grouped = false;
  }
  EXPECT_NE(Simulator(plans, 2).run().error.find("before its activation"), std::string::npos);
}

TEST(Schedule, ForwardOnlyPlansForEvaluation) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int v = 1; v <= (pp > 1 ? 3 : 1); ++v)
      for (int n_micro = 1; n_micro <= 2 * pp; ++n_micro) {
        std::vector<std::vector<Action>> plans;
        for (int s = 0; s < pp; ++s) {
          plans.push_back(make_forward_plan(pp, s, n_micro, v));
          int fwd = 0;
          for (const Action& a : plans.back()) {
            EXPECT_NE(a.kind, Action::Bwd);
            EXPECT_TRUE(a.kind != Action::SendGrad && a.kind != Action::RecvGrad);
            fwd += a.kind == Action::Fwd;
          }
          EXPECT_EQ(fwd, n_micro * v);
          EXPECT_EQ(peak_in_flight(plans.back()), 1);   // activations are dropped after each forward
          EXPECT_EQ(PipelineExecutor::slots_needed(plans.back()), 1);
        }
        const SimResult r = Simulator(plans, v).run();
        EXPECT_EQ(r.error, "") << "pp=" << pp << " v=" << v << " n_micro=" << n_micro;
      }
}

TEST(Schedule, ParsesNames) {
  EXPECT_EQ(parse_schedule("gpipe"), ScheduleKind::GPipe);
  EXPECT_EQ(parse_schedule("1f1b"), ScheduleKind::OneFOneB);
  EXPECT_EQ(parse_schedule("interleaved"), ScheduleKind::Interleaved);
  EXPECT_EQ(parse_schedule("zero_bubble"), ScheduleKind::ZeroBubble);
  EXPECT_THROW(parse_schedule("zigzag"), InputError);
}

}  // namespace
}  // namespace trident
