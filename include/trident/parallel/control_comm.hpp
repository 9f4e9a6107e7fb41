// ControlComm: small host-side collectives that steer the run (stop at this step?, checkpoint
// checksums and barriers), bounded by parallel.timeout_s and naming the ranks that did not arrive.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

namespace trident {

// Each operation gathers one value per rank at rank 0 and sends the result back, so that rank 0
// sees who has arrived: when a rank has not within timeout_s, rank 0 aborts the job naming it.
// Ranks other than 0 abort on their own only when rank 0 itself does not arrive within timeout_s,
// or does not answer within twice timeout_s after it has (rank 0 names a stalled rank first). Rank 0 handles one message per rank: meant for a few values per step, not bulk data.
class ControlComm {
 public:
  // Collective over comm, which it duplicates (its messages then never match anyone else's).
  ControlComm(MPI_Comm comm, double timeout_s);
  ~ControlComm();
  ControlComm(const ControlComm&) = delete;
  ControlComm& operator=(const ControlComm&) = delete;

  // `what` names the operation in the timeout message, e.g. "checkpoint save: checksum of wte".
  uint64_t sum(uint64_t v, const std::string& what) { return run(v, Op::Sum, what); }
  uint64_t max(uint64_t v, const std::string& what) { return run(v, Op::Max, what); }
  uint64_t broadcast_from_0(uint64_t v, const std::string& what) { return run(v, Op::FromRank0, what); }
  void barrier(const std::string& what) { run(0, Op::Sum, what); }

 private:
  enum class Op { Sum, Max, FromRank0 };
  uint64_t run(uint64_t v, Op op, const std::string& what);
  uint64_t gather_at_0(uint64_t v, Op op, const std::string& what, int tag);
  uint64_t send_to_0(uint64_t v, const std::string& what, int tag);
  [[noreturn]] void time_out(const std::string& what, const std::string& who) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  double timeout_s_;
  int rank_ = 0, size_ = 1;
  int seq_ = 0;   // operations so far: the message tag, the same on every rank
};

}  // namespace trident
