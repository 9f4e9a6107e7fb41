// Agreement on expected errors: the lowest failing rank's message is broadcast to all; errors of
// one rank in lockstep phases abort the job from that rank.
#include "trident/parallel/collective_error.hpp"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "trident/parallel/mpi_comm.hpp"

namespace trident {
namespace {

[[noreturn]] void abort_job(const char* command, const char* kind, const char* what, int status) {
  std::fprintf(stderr, "%s trident %s: %s: %s\n", error_context().c_str(), command, kind, what);
  std::fflush(stderr);
  mpi_abort(status);
  std::abort();   // MPI_Abort does not return; this is for the compiler
}

}  // namespace

void collective_check(MPI_Comm comm, const std::function<void()>& fn) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::string msg;
  try {
    fn();
  } catch (const InputError& e) {
    msg = e.what();
    if (msg.empty()) msg = "input error";
  }
  int mine = msg.empty() ? INT_MAX : rank, first = INT_MAX;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == INT_MAX) return;
  int len = static_cast<int>(msg.size());
  MPI_Bcast(&len, 1, MPI_INT, first, comm);
  msg.resize(len);
  MPI_Bcast(msg.data(), len, MPI_CHAR, first, comm);
  throw CollectiveInputError(first == 0 ? msg : str(msg, " (reported by rank ", first, ")"));
}

int abort_job_on_error(const char* command, const std::function<int()>& fn) {
  try {
    return fn();
  } catch (const CollectiveInputError&) {
    throw;
  } catch (const InputError& e) {
    abort_job(command, "error", e.what(), 2);
  } catch (const std::exception& e) {
    abort_job(command, "internal error", e.what(), 1);
  }
}

}  // namespace trident
