// MpiComm: Comm over an MPI communicator with host buffers (the CPU backend's collectives).
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "trident/parallel/pair_exchange.hpp"

namespace trident {

class MpiComm : public Comm, public PairExchange {
 public:
  // Does not own `comm`: ParallelGroups frees its communicators.
  MpiComm(MPI_Comm comm, std::string name, double timeout_s);
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  MPI_Comm mpi() const { return comm_; }

  Request all_reduce_async(void* buf, size_t count, DType t, ReduceOp op, Stream s) override;
  Request reduce_scatter_async(void* buf, size_t count, DType t, Stream s) override;
  Request reduce_scatter_to_async(const void* in, void* out, size_t count, DType t, Stream s) override;
  Request all_gather_async(void* buf, size_t count, DType t, Stream s) override;
  Request broadcast_async(void* buf, size_t count, DType t, int root, Stream s) override;
  Request exchange_async(const std::vector<P2POp>& ops, Stream s) override;
  void barrier() override;
  PairExchange* pair_exchange() override { return this; }

  std::string enable_partials(size_t max_bytes) override;
  PartialRequest send_partial_async(const void* buf, size_t count, DType t, int to, Stream s) override;
  std::vector<Request> gather_each_async(void* buf, size_t count, DType t, Stream s) override;

 private:
  MPI_Comm comm_;
  std::string name_;
  double timeout_s_;
  int rank_ = 0, size_ = 1;
  // Fused sums: each other rank's partials land in a ring of slots of their own (by that rank);
  // slot_held_[r][k] while slot k's partial from rank r is unreleased (a send that would reuse it
  // is a bug).
  std::vector<std::vector<std::vector<char>>> partial_slots_;
  size_t slot_bytes_ = 0;   // each slot's size (enable_partials' max_bytes; 0 before it)
  std::vector<long> partial_seq_;
  std::vector<std::shared_ptr<std::vector<char>>> slot_held_;
};

// Aborts every rank of MPI_COMM_WORLD; registered as core's abort hook.
void mpi_abort(int code);

}  // namespace trident
