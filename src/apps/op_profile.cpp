// The per-op GPU time table (op_profile.hpp).
#include "op_profile.hpp"

#include <cstdio>
#include <utility>

namespace trident {

StepProfile step_profile(std::vector<OpTime> ops, int steps, double total_ms) {
  StepProfile p;
  if (steps <= 0) return p;
  p.ops = std::move(ops);
  p.step_ms = total_ms / steps;
  for (OpTime& t : p.ops) {
    t.ms /= steps;
    (t.name.rfind("wait ", 0) == 0 ? p.wait_ms : p.op_ms) += t.ms;
  }
  return p;
}

void print_profile(const StepProfile& p, int steps, const std::string& step) {
  std::printf("\nGPU time per %s by op (rank 0, mean of %d profiled steps, CUDA events around each op):\n",
              step.c_str(), steps);
  std::printf("%-52s %8s %10s %7s\n", "op (sizes)", "calls", "ms/step", "share");
  for (const OpTime& t : p.ops)
    std::printf("%-52s %8.0f %10.3f %6.1f%%\n", t.name.c_str(), double(t.calls) / steps, t.ms, 100 * t.ms / p.step_ms);
  const double idle = p.step_ms - p.op_ms - p.wait_ms;
  std::printf("%-52s %8s %10.3f %6.1f%%\n", "sum of ops", "", p.op_ms, 100 * p.op_ms / p.step_ms);
  std::printf("%-52s %8s %10.3f %6.1f%%\n", "sum of communication waits", "", p.wait_ms, 100 * p.wait_ms / p.step_ms);
  // Ops queued on the backend's side stream run beside the main stream's, so the sum of op times
  // can exceed the step and the remainder turn negative.
  std::printf("%-52s %8s %10.3f %6.1f%%\n",
              idle >= 0 ? "rest (stream idle: host work, syncs, launches)" : "rest (negative: side-stream ops overlapped)",
              "", idle, 100 * idle / p.step_ms);
  std::printf("%-52s %8s %10.3f\n", "step (host wall clock)", "", p.step_ms);
}

}  // namespace trident
