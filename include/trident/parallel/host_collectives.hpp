// Checked host-side MPI for the layers above parallel (io's probe and checkpoint checks, apps'
// start-up, placement and reports): one function per MPI operation, so that no layer above needs
// MPI calls of its own. A failing call ends the process naming the call, file:line and MPI's message.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "trident/parallel/groups.hpp"

namespace trident {

// The MPI session of one process (main): MPI_Init_thread with MPI_THREAD_FUNNELED (only the main
// thread calls MPI), MPI_Finalize when it ends.
class MpiSession {
 public:
  MpiSession(int& argc, char**& argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

int comm_rank(MPI_Comm comm);
int comm_size(MPI_Comm comm);
void barrier(MPI_Comm comm);

// The reductions of host values (Comm's ReduceOp is the device collectives' and has no Min).
enum class HostReduce { Sum, Max, Min };
// Every rank gets op over the ranks' v; defined for int, double and uint64_t.
template <class T>
T all_reduce(T v, HostReduce op, MPI_Comm comm);
// Element-wise over the ranks' v (the same length on every rank), in place.
void all_reduce(std::vector<uint64_t>& v, HostReduce op, MPI_Comm comm);
// True on every rank when ok holds on every rank.
bool all_true(bool ok, MPI_Comm comm);
// The same two over the world of a layout's groups (checkpoint loads: the ranks of g, which need
// not be MPI_COMM_WORLD's).
void all_reduce(std::vector<uint64_t>& v, HostReduce op, const ParallelGroups& g);
void all_reduce(std::vector<double>& v, HostReduce op, const ParallelGroups& g);
bool all_true(bool ok, const ParallelGroups& g);

// Rank 0's `bytes` bytes at data, on every rank (each passes a buffer of that size).
void broadcast_bytes(void* data, size_t bytes, MPI_Comm comm);
template <class T>
T broadcast_from_0(T v, MPI_Comm comm) {
  static_assert(std::is_trivially_copyable_v<T>, "broadcast_from_0 copies bytes");
  broadcast_bytes(&v, sizeof v, comm);
  return v;
}

// Every rank's `bytes` bytes at data (the same count on every rank), in rank order, on every rank.
std::vector<char> all_gather_bytes(const void* data, size_t bytes, MPI_Comm comm);
template <class T>
std::vector<T> all_gather(const T& v, MPI_Comm comm) {
  static_assert(std::is_trivially_copyable_v<T>, "all_gather copies bytes");
  const std::vector<char> bytes = all_gather_bytes(&v, sizeof v, comm);
  std::vector<T> all(bytes.size() / sizeof v);
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(all.data()));
  return all;
}
// Rank 0 gets every rank's text concatenated in rank order (the others get ""); any lengths.
std::string gather_text_at_0(const std::string& mine, MPI_Comm comm);

// This rank's place among the ranks of comm that share its node (MPI_COMM_TYPE_SHARED). With
// gpus_per_node > 0 (parallel.gpus_per_node) a node is further cut into runs of that many
// consecutive MPI_COMM_WORLD ranks, each one node (the emulated nodes of tools/perf/emulate_nodes.sh).
struct NodeRanks {
  int local_rank = 0, local_size = 1;
  int first = 0;   // the lowest rank of comm on this node: the node's name
};
NodeRanks node_ranks(MPI_Comm comm, int gpus_per_node = 0);

// The MPI library's version text (MPI_Get_library_version).
std::string mpi_library_version();

}  // namespace trident
