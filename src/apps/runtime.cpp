// Backend selection and process placement. The only place that knows whether CUDA was built.
#include "runtime.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

#include "trident/backend/cpu_backend.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/parallel/collective_error.hpp"
#include "trident/parallel/host_collectives.hpp"
#include "trident/parallel/mpi_comm.hpp"
#include "trident/parallel/topology.hpp"
#if TRIDENT_HAVE_CUDA
#include "trident/backend/cuda_backend.hpp"
#include "trident/backend/nvtx_trace.hpp"
#include "trident/parallel/nccl/nccl_comm.hpp"
#endif

namespace trident {

NodeInfo node_info(MPI_Comm world) {
  NodeInfo n;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  n.host = host;
  const NodeRanks ranks = node_ranks(world);
  n.local_rank = ranks.local_rank;
  n.local_size = ranks.local_size;
  return n;
}

std::string describe_nodes(const RunConfig& cfg, MPI_Comm world) {
  const int gpn = cfg.parallel.gpus_per_node;
  const std::vector<int> node = all_gather(node_ranks(world, gpn).first, world);
  const std::vector<int> machine = all_gather(node_ranks(world).first, world);
  auto count = [](std::vector<int> ids) {
    std::sort(ids.begin(), ids.end());
    return static_cast<int>(std::unique(ids.begin(), ids.end()) - ids.begin());
  };
  const int world_size = static_cast<int>(node.size()), nodes = count(node), machines = count(machine);
  int largest = 0;
  for (int id : node) largest = std::max(largest, static_cast<int>(std::count(node.begin(), node.end(), id)));
  std::string s = str("nodes: ", nodes, " of ", largest, largest == 1 ? " rank" : " ranks", " (");
  s += gpn ? str("parallel.gpus_per_node = ", gpn, ", on ", machines, machines == 1 ? " machine)" : " machines)")
           : std::string("the machines)");
  const Topology topo(cfg.parallel.dp, cfg.parallel.tp, cfg.parallel.pp);
  std::string inside, across;
  for (auto [axis, name] : {std::pair{Axis::TP, "tp"}, std::pair{Axis::PP, "pp"}, std::pair{Axis::DP, "dp"}}) {
    bool spans = false, used = false;
    for (int r = 0; r < world_size; ++r)
      for (int q : topo.group(axis, r)) {
        used = used || q != r;
        spans = spans || node[q] != node[r];
      }
    if (!used) continue;
    std::string& list = spans ? across : inside;
    list += list.empty() ? name : str(", ", name);
  }
  if (!inside.empty()) s += str("; ", inside, " inside a node");
  if (!across.empty()) s += str(inside.empty() ? "; " : ", ", across, " across nodes");
  return s;
}

int visible_gpus() {
#if TRIDENT_HAVE_CUDA
  return cuda_device_count();
#else
  return 0;
#endif
}

bool uses_cuda(const RunConfig& cfg) { return cfg.backend == "cuda" || (cfg.backend == "auto" && visible_gpus() > 0); }

size_t gpu_memory_bytes() {
  size_t smallest = 0;
#if TRIDENT_HAVE_CUDA
  for (int d = 0; d < visible_gpus(); ++d) {
    const size_t bytes = cuda_device_memory_bytes(d);
    if (bytes > 0 && (smallest == 0 || bytes < smallest)) smallest = bytes;
  }
#endif
  return smallest;
}

MemoryUse memory_use(const Backend& be) {
  MemoryUse m;
#if TRIDENT_HAVE_CUDA
  if (be.is_device()) {
    size_t used = 0, total = 0;
    if (cuda_memory_in_use(&used, &total)) m = {static_cast<double>(used), static_cast<double>(total)};
    return m;
  }
#endif
  (void)be;
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  m.used = static_cast<double>(resident) * page;
  m.total = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * page;
  return m;
}

void DevicePeak::sample(const Backend& be) {
  if (!be.is_device()) return;
  const double used = memory_use(be).used;
  if (used > 0 && !(used <= bytes_)) bytes_ = used;   // the first sample replaces NaN
}

namespace {

#if TRIDENT_HAVE_CUDA
// The [cuda] options (validated: attention_kernels is auto, wgmma or mma).
CudaOptions cuda_options(const CudaConfig& c) {
  CudaOptions o;
  o.attention_kernels = c.attention_kernels == "mma"     ? AttentionKernels::Mma
                        : c.attention_kernels == "wgmma" ? AttentionKernels::Wgmma
                                                         : AttentionKernels::Auto;
  o.attention_dkv_parts = c.attention_dkv_parts;
  o.side_stream = c.side_stream;
  o.graphs = c.graphs;
  o.gemm_autotune = c.gemm_autotune;
  o.gemm_log = c.gemm_log;
  o.sync_launches = c.sync_launches;
  return o;
}
#endif

std::unique_ptr<Backend> make_backend(const RunConfig& cfg, const NodeInfo& node) {
  if (!uses_cuda(cfg)) {
    // Ranks sharing a node share its cores; OMP_NUM_THREADS, when set, wins.
    if (!std::getenv("OMP_NUM_THREADS")) {
      int cores = static_cast<int>(std::thread::hardware_concurrency());
      omp_set_num_threads(std::max(1, cores / node.local_size));
    }
    return make_cpu_backend();
  }
#if TRIDENT_HAVE_CUDA
  const int gpus = visible_gpus();
  if (gpus == 0) throw InputError("backend = cuda but no GPU is visible on this node; use backend = cpu");
  if (node.local_size > gpus)
    throw InputError(str(node.local_size, " ranks on node ", node.host, " but only ", gpus,
                         " GPUs; launch at most one rank per GPU, or use backend = cpu"));
  install_nvtx_trace();
  return make_cuda_backend(node.local_rank, cuda_options(cfg.cuda));
#else
  throw InputError("backend = cuda but this trident was built without CUDA; rebuild where nvcc is found or use backend = cpu");
#endif
}

}  // namespace

Runtime make_runtime(const RunConfig& cfg, MPI_Comm world) {
  Runtime rt;
  rt.node = node_info(world);
  Topology topo(cfg.parallel.dp, cfg.parallel.tp, cfg.parallel.pp);
  collective_check(world, [&] { rt.backend = make_backend(cfg, rt.node); });
  AxisMpiComms axes = split_axes(world, topo);
#if TRIDENT_HAVE_CUDA
  if (rt.backend->is_device())
    rt.groups = make_nccl_groups(axes, topo, cfg.parallel.timeout_s, cfg.parallel.tp_comm_ctas,
                                 cfg.parallel.dp_comm_ctas, cfg.parallel.gpus_per_node);
  else
#endif
    rt.groups = make_mpi_groups(axes, topo, cfg.parallel.timeout_s);
  set_error_context(rt.groups.context(rt.node.host), mpi_abort);
  return rt;
}

}  // namespace trident
