// NCCL flavour of ParallelGroups: one NCCL communicator per axis on the current CUDA device,
// bootstrapped by broadcasting NCCL ids over the axis MPI communicators (nccl-tests order).
// Host-only header; the implementation builds with the CUDA backend.
#pragma once

#include "trident/parallel/groups.hpp"

namespace trident {

// Collectives run on a side stream per communicator, ordered with events against the caller's
// stream. A watchdog thread polls ncclCommGetAsyncError and the completion of every operation;
// one that is not done within timeout_s aborts all communicators and the job with a message
// naming the rank, axis, operation and step. tp_max_ctas / dp_max_ctas > 0 cap the CTAs of the
// TP / DP communicator's kernels (parallel.tp_comm_ctas, parallel.dp_comm_ctas). gpus_per_node > 0
// (parallel.gpus_per_node): runs of that many consecutive ranks are nodes, and the peer-to-peer
// fast paths of a pair (PairExchange) need both ranks in one. Takes ownership of `axes`.
ParallelGroups make_nccl_groups(const AxisMpiComms& axes, const Topology& topo, double timeout_s, int tp_max_ctas = 0,
                                int dp_max_ctas = 0, int gpus_per_node = 0);

}  // namespace trident
