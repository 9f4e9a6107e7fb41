// The planner applied to the launched job: hardware from the runtime (GPU memory, ranks per node),
// reduced over all ranks so that every rank ranks the same layouts and picks the same one.
#include "auto_layout.hpp"

#include <algorithm>
#include <cstdio>

#include "runtime.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/train/planner.hpp"

namespace trident {

namespace {
// What the planner assumes of a CPU rank: a fixed memory budget (the host's memory is shared by its
// ranks and rarely the limit), about one core's GEMM rate, and shared-memory MPI bandwidth.
constexpr double kCpuBudgetGib = 8;
constexpr double kCpuGemmTflops = 0.01;
constexpr double kCpuLinkGbps = 1;

std::string fixed_gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", bytes / double(1 << 30));
  return buf;
}
}  // namespace

void apply_auto_layout(RunConfig& cfg, MPI_Comm world) {
  if (!cfg.parallel.auto_layout) return;
  int size = 1;
  MPI_Comm_size(world, &size);
  const bool cuda = uses_cuda(cfg);
  // The smallest node and the smallest GPU bound what every rank can be given.
  unsigned long long memory = cuda ? gpu_memory_bytes() : 0, smallest_memory = 0;
  int per_node = node_info(world).local_size, smallest_node = 0;
  MPI_Allreduce(&memory, &smallest_memory, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, world);
  MPI_Allreduce(&per_node, &smallest_node, 1, MPI_INT, MPI_MIN, world);

  Hardware hw;
  hw.gpus = size;
  hw.gpus_per_node = smallest_node;
  if (cuda) {
    if (smallest_memory == 0)
      throw InputError("parallel.auto: the GPU memory size is unknown on some node; set parallel.tp, parallel.pp, "
                       "parallel.zero and train.micro_batch_size by hand (see 'trident plan')");
    hw.memory_gib = static_cast<double>(smallest_memory) / double(1 << 30);
  } else {
    hw.memory_gib = kCpuBudgetGib;
    hw.gemm_tflops = kCpuGemmTflops;
    hw.nvlink_gbps = hw.ib_gbps = kCpuLinkGbps;
    hw.act_bytes = 4;
    hw.workspace_gib = 0;
  }

  const std::vector<Candidate> ranked = rank_layouts(cfg, hw);
  if (ranked.empty()) explain_no_valid_layout(cfg, size);
  if (!ranked.front().fits) {
    double least = ranked.front().memory.total();
    for (const Candidate& c : ranked) least = std::min(least, c.memory.total());
    throw InputError(str("parallel.auto: no layout of ", size, " ranks fits in ", hw.memory_gib,
                         " GiB per rank (the smallest needs ", fixed_gib(least),
                         " GiB); launch more ranks or lower train.global_batch_size"));
  }
  const Candidate& best = ranked.front();
  apply_layout(cfg, best.layout);
  log_info(str("parallel.auto: dp=", best.layout.dp, " tp=", best.layout.tp, " pp=", best.layout.pp,
               " zero=", best.layout.zero, " schedule=", best.layout.schedule, " micro_batch_size=",
               best.layout.micro_batch_size, " (planner: ", fixed_gib(best.memory.total()), " of ",
               hw.memory_gib, " GiB per rank",
               cuda ? str(", ", static_cast<long>(best.time.tokens_per_s), " tokens/s estimated") : std::string(),
               "; best of ", ranked.size(), " layouts)"));
}

}  // namespace trident
