// Checked host-side MPI collectives (see host_collectives.hpp).
#include "trident/parallel/host_collectives.hpp"

#include <climits>

#include "trident/core/error.hpp"
#include "trident/parallel/mpi_check.hpp"

namespace trident {
namespace {

MPI_Op mpi_op(HostReduce op) {
  switch (op) {
    case HostReduce::Sum: return MPI_SUM;
    case HostReduce::Max: return MPI_MAX;
    case HostReduce::Min: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

template <class T>
MPI_Datatype mpi_type();
template <>
MPI_Datatype mpi_type<int>() { return MPI_INT; }
template <>
MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }
template <>
MPI_Datatype mpi_type<uint64_t>() { return MPI_UINT64_T; }

}  // namespace

MpiSession::MpiSession(int& argc, char**& argv) {
  int provided = 0;
  MPI_CHECK(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided));
}

MpiSession::~MpiSession() { MPI_Finalize(); }

int comm_rank(MPI_Comm comm) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  return rank;
}

int comm_size(MPI_Comm comm) {
  int size = 1;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  return size;
}

void barrier(MPI_Comm comm) { MPI_CHECK(MPI_Barrier(comm)); }

template <class T>
T all_reduce(T v, HostReduce op, MPI_Comm comm) {
  T all{};
  MPI_CHECK(MPI_Allreduce(&v, &all, 1, mpi_type<T>(), mpi_op(op), comm));
  return all;
}
template int all_reduce<int>(int, HostReduce, MPI_Comm);
template double all_reduce<double>(double, HostReduce, MPI_Comm);
template uint64_t all_reduce<uint64_t>(uint64_t, HostReduce, MPI_Comm);

void all_reduce(std::vector<uint64_t>& v, HostReduce op, MPI_Comm comm) {
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v.data(), mpi_count(v.size(), "a host collective"), MPI_UINT64_T,
                          mpi_op(op), comm));
}

bool all_true(bool ok, MPI_Comm comm) { return all_reduce(ok ? 1 : 0, HostReduce::Min, comm) == 1; }

void all_reduce(std::vector<uint64_t>& v, HostReduce op, const ParallelGroups& g) { all_reduce(v, op, g.mpi.world); }

void all_reduce(std::vector<double>& v, HostReduce op, const ParallelGroups& g) {
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v.data(), mpi_count(v.size(), "a host collective"), MPI_DOUBLE, mpi_op(op),
                          g.mpi.world));
}

bool all_true(bool ok, const ParallelGroups& g) { return all_true(ok, g.mpi.world); }

void broadcast_bytes(void* data, size_t bytes, MPI_Comm comm) {
  MPI_CHECK(MPI_Bcast(data, mpi_count(bytes, "a host collective"), MPI_BYTE, 0, comm));
}

std::vector<char> all_gather_bytes(const void* data, size_t bytes, MPI_Comm comm) {
  const int n = mpi_count(bytes, "a host collective");
  std::vector<char> all(bytes * static_cast<size_t>(comm_size(comm)));
  MPI_CHECK(MPI_Allgather(data, n, MPI_BYTE, all.data(), n, MPI_BYTE, comm));
  return all;
}

std::string gather_text_at_0(const std::string& mine, MPI_Comm comm) {
  const int rank = comm_rank(comm), size = comm_size(comm);
  int len = mpi_count(mine.size(), "a host collective");
  std::vector<int> lens(size), offsets(size);
  MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm));
  size_t total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[r] = mpi_count(total, "a host collective");
    total += static_cast<size_t>(lens[r]);
  }
  std::string all(rank == 0 ? total : 0, '\0');
  MPI_CHECK(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, 0, comm));
  return all;
}

NodeRanks node_ranks(MPI_Comm comm, int gpus_per_node) {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  if (gpus_per_node > 0) {
    const int world_rank = comm_rank(MPI_COMM_WORLD);
    MPI_Comm emulated = MPI_COMM_NULL;
    MPI_CHECK(MPI_Comm_split(node, world_rank / gpus_per_node, world_rank, &emulated));
    MPI_CHECK(MPI_Comm_free(&node));
    node = emulated;
  }
  NodeRanks n;
  n.local_rank = comm_rank(node);
  n.local_size = comm_size(node);
  n.first = all_reduce(comm_rank(comm), HostReduce::Min, node);
  MPI_CHECK(MPI_Comm_free(&node));
  return n;
}

std::string mpi_library_version() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_CHECK(MPI_Get_library_version(version, &len));
  return std::string(version, static_cast<size_t>(len));
}

}  // namespace trident
