// Agreement on expected errors: the lowest failing rank's message is broadcast to all.
#include "trident/parallel/collective_error.hpp"

#include <climits>
#include <string>

#include "trident/core/error.hpp"

namespace trident {

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
  throw InputError(first == 0 ? msg : str(msg, " (reported by rank ", first, ")"));
}

}  // namespace trident
