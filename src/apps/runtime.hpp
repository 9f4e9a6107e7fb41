// Runtime: what a command needs to run on this rank — the backend chosen at run time, the
// parallel groups of the layout, and where this rank sits on its node.
#pragma once

#include <mpi.h>

#include <cmath>
#include <memory>
#include <string>

#include "trident/backend/backend.hpp"
#include "trident/config/run_config.hpp"
#include "trident/parallel/groups.hpp"

namespace trident {

struct NodeInfo {
  std::string host;
  int local_rank = 0, local_size = 1;
};

// Hostname and rank within the node (MPI_COMM_TYPE_SHARED split of `world`).
NodeInfo node_info(MPI_Comm world);

// The nodes trident sees (parallel.gpus_per_node's, else the machines) and which axes of the layout
// stay inside one, for the log: "nodes: 2 of 2 ranks (parallel.gpus_per_node = 2, on 1 machine);
// tp inside a node, dp across nodes". Collective over `world`.
std::string describe_nodes(const RunConfig& cfg, MPI_Comm world);

struct Runtime {
  NodeInfo node;
  std::unique_ptr<Backend> backend;
  ParallelGroups groups;
};

// GPUs visible to this process: 0 when there is none or CUDA was not built.
int visible_gpus();
// Whether cfg.backend resolves to the CUDA backend on this node (auto: when GPUs are visible).
bool uses_cuda(const RunConfig& cfg);
// Memory of the smallest visible GPU in bytes; 0 when there is none or CUDA was not built.
size_t gpu_memory_bytes();

// This rank's memory in use and what it has: on a device backend its GPU's (cudaMemGetInfo:
// everything allocated on the GPU, the CUDA context and other processes included), on the CPU
// backend the process's resident set and the node's physical memory.
struct MemoryUse {
  double used = 0, total = 0;
};
MemoryUse memory_use(const Backend& be);

// The most GPU memory in use that a rank's samples saw: cudaMemGetInfo's total - free, so the CUDA
// context, NCCL's buffers (allocated at a communicator's first collective), the cuBLASLt
// workspace and op scratch count with trident's arenas. Sampled between steps: trident allocates
// up front and frees nothing in a step, so the memory in use then is the step's peak; a buffer
// allocated and freed inside one step (cuBLASLt's autotuning trials in the first) is missed. On a
// GPU shared with other processes their memory counts too. NaN on the CPU backend (no device).
class DevicePeak {
 public:
  void sample(const Backend& be);
  double bytes() const { return bytes_; }

 private:
  double bytes_ = std::nan("");
};

// Picks the backend (cfg.backend: auto, cpu, cuda), binds the GPU (local rank), builds the
// groups of the validated layout over `world` and registers the rank context for errors.
// Throws InputError for launches that cannot work (cuda without GPUs, more ranks than GPUs).
Runtime make_runtime(const RunConfig& cfg, MPI_Comm world);

}  // namespace trident
