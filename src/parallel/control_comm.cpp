// ControlComm: gather at rank 0, answer from rank 0, each wait polled against parallel.timeout_s.
#include "trident/parallel/control_comm.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "trident/core/error.hpp"
#include "trident/parallel/mpi_check.hpp"

namespace trident {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Polls until every request is done or `deadline_s` seconds from `start` have passed; false then.
bool wait_until(std::vector<MPI_Request>& reqs, Clock::time_point start, double deadline_s) {
  for (long spins = 0;; ++spins) {
    int done = 0;
    MPI_CHECK(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE));
    if (done) return true;
    if (seconds_since(start) > deadline_s) return false;
    if (spins > 64) std::this_thread::sleep_for(std::chrono::milliseconds(1));   // give oversubscribed ranks the core
  }
}

}  // namespace

ControlComm::ControlComm(MPI_Comm comm, double timeout_s) : timeout_s_(timeout_s) {
  MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

ControlComm::~ControlComm() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

uint64_t ControlComm::run(uint64_t v, Op op, const std::string& what) {
  if (size_ == 1) return v;
  // Tags stay within the 32767 every MPI implementation allows; every rank counts the same.
  const int tag = seq_++ % 32768;
  return rank_ == 0 ? gather_at_0(v, op, what, tag) : send_to_0(v, what, tag);
}

uint64_t ControlComm::gather_at_0(uint64_t v, Op op, const std::string& what, int tag) {
  const auto start = Clock::now();
  std::vector<uint64_t> values(size_, v);
  std::vector<MPI_Request> reqs(size_ - 1);
  for (int r = 1; r < size_; ++r) MPI_CHECK(MPI_Irecv(&values[r], 1, MPI_UINT64_T, r, tag, comm_, &reqs[r - 1]));
  if (!wait_until(reqs, start, timeout_s_)) {
    std::string missing;
    for (int r = 1; r < size_; ++r) {
      int arrived = 0;
      MPI_CHECK(MPI_Test(&reqs[r - 1], &arrived, MPI_STATUS_IGNORE));
      if (!arrived) missing += str(missing.empty() ? "" : ", ", r);
    }
    time_out(what, str("rank(s) ", missing, " did not arrive (stalled or dead)"));
  }
  uint64_t result = v;
  for (int r = 1; r < size_; ++r) {
    if (op == Op::Sum) result += values[r];
    if (op == Op::Max) result = std::max(result, values[r]);
  }
  for (int r = 1; r < size_; ++r) MPI_CHECK(MPI_Isend(&result, 1, MPI_UINT64_T, r, tag, comm_, &reqs[r - 1]));
  if (!wait_until(reqs, Clock::now(), timeout_s_)) time_out(what, "a rank that arrived stopped answering");
  return result;
}

uint64_t ControlComm::send_to_0(uint64_t v, const std::string& what, int tag) {
  const auto start = Clock::now();
  uint64_t result = 0;
  // A synchronous send completes only once rank 0 has posted its receive, i.e. has arrived.
  std::vector<MPI_Request> sent(1), answer(1);
  MPI_CHECK(MPI_Issend(&v, 1, MPI_UINT64_T, 0, tag, comm_, &sent[0]));
  MPI_CHECK(MPI_Irecv(&result, 1, MPI_UINT64_T, 0, tag, comm_, &answer[0]));
  if (!wait_until(sent, start, timeout_s_)) time_out(what, "rank 0 did not arrive (stalled or dead)");
  // Rank 0 arrived no later than now, so it names a missing rank within timeout_s from here: wait
  // twice that before speaking for it.
  if (!wait_until(answer, Clock::now(), 2 * timeout_s_))
    time_out(what, "rank 0 arrived but did not answer (stalled or dead)");
  return result;
}

void ControlComm::time_out(const std::string& what, const std::string& who) const {
  TRIDENT_FATAL(str("timeout: ", what, " did not finish within parallel.timeout_s = ", timeout_s_, " s at step ",
                    current_step(), "; ", who));
}

}  // namespace trident
