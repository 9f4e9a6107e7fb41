// Expected errors found by some ranks only (a file missing on one node, too few GPUs on one
// host) must stop every rank, or the others would hang in the next collective.
#pragma once

#include <mpi.h>

#include <functional>

namespace trident {

// Runs fn on every rank of comm. If it throws InputError on any rank, every rank throws an
// InputError carrying the message of the lowest such rank.
void collective_check(MPI_Comm comm, const std::function<void()>& fn);

}  // namespace trident
