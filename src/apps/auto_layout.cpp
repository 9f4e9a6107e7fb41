// The planner applied to the launched job: hardware from the runtime (GPU memory, ranks per node),
// reduced over all ranks so that every rank ranks the same layouts and picks the same one; and
// the memory check of a layout before anything is allocated.
#include "auto_layout.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "runtime.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/parallel/host_collectives.hpp"
#include "trident/train/planner.hpp"

namespace trident {

namespace {
// What the planner assumes of a CPU rank: a fixed memory budget (the host's memory is shared by its
// ranks and rarely the limit), about one core's GEMM rate and memory rate, and shared-memory MPI
// bandwidth.
constexpr double kCpuBudgetGib = 8;
constexpr double kCpuGemmTflops = 0.01;
constexpr double kCpuLinkGbps = 1;
constexpr double kCpuMemoryGbps = 5;

std::string fixed_gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", bytes / double(1 << 30));
  return buf;
}

// Host memory a new allocation can get now: MemAvailable (free plus reclaimable cache), else the
// free pages.
double host_available_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f) {
    char line[256];
    unsigned long long kib = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof line, f)) found = std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
    std::fclose(f);
    if (found) return static_cast<double>(kib) * 1024;
  }
  return static_cast<double>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
}
}  // namespace

MemoryEstimate planned_memory(const RunConfig& cfg) {
  Hardware hw;
  if (!uses_cuda(cfg)) {
    hw.act_bytes = 4;
    hw.device = false;
  }
  return estimate_memory(cfg, hw);
}

void check_memory_fits(const RunConfig& cfg, MPI_Comm world, bool training) {
  const bool cuda = uses_cuda(cfg);
  // A GPU is the rank's own; host memory is shared by the ranks of the node.
  const double mine = cuda ? static_cast<double>(gpu_memory_bytes())
                           : host_available_bytes() / node_info(world).local_size;
  const double budget = all_reduce(mine, HostReduce::Min, world);
  if (budget <= 0) return;   // unknown (no GPU visible): make_runtime reports what is wrong
  MemoryEstimate e = planned_memory(cfg);
  if (!training) {
    // Forward only: no gradients or optimizer state, one micro-batch's activations at a time.
    e.grads = e.optimizer = e.host = 0;
    e.activations /= e.in_flight;
  }
  if (!cuda) e.optimizer += e.host;   // a CPU rank's offloaded state is in the same host memory
  if (e.total() <= budget) return;
  throw InputError(str("the model and layout need an estimated ", fixed_gib(e.total()), " GiB per rank (parameters ",
                       fixed_gib(e.params), ", gradients ", fixed_gib(e.grads), ", optimizer ", fixed_gib(e.optimizer),
                       ", activations ", fixed_gib(e.activations + e.scratch), ") but ",
                       cuda ? "the smallest GPU has " : "host memory available per rank is ", fixed_gib(budget),
                       " GiB; use smaller model sizes or train.micro_batch_size, or more ranks (see 'trident plan')"));
}

void apply_auto_layout(RunConfig& cfg, MPI_Comm world) {
  if (!cfg.parallel.auto_layout) return;
  const int size = comm_size(world);
  const bool cuda = uses_cuda(cfg);
  // The smallest node and the smallest GPU bound what every rank can be given.
  const uint64_t smallest_memory = all_reduce<uint64_t>(cuda ? gpu_memory_bytes() : 0, HostReduce::Min, world);
  // parallel.gpus_per_node (an invalid one is refused by validation right after) cuts the machines.
  const int gpn_option = cfg.parallel.gpus_per_node;
  const int gpn = gpn_option > 0 && size % gpn_option == 0 ? gpn_option : 0;
  const int smallest_node = all_reduce(node_ranks(world, gpn).local_size, HostReduce::Min, world);

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
    hw.hbm_gbps = kCpuMemoryGbps;
    hw.act_bytes = 4;
    hw.device = false;
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
               hw.memory_gib, " GiB per rank, ", hw.gpus_per_node, " ranks per node",
               cuda ? str(", ", static_cast<long>(best.time.tokens_per_s), " tokens/s estimated") : std::string(),
               "; best of ", ranked.size(), " layouts)"));
}

}  // namespace trident
