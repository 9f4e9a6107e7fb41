// Expected errors found by some ranks only (a file missing on one node, too few GPUs on one
// host, a bad token in the batch one rank reads) must stop every rank, or the others would hang
// in the next collective.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>

#include "trident/core/error.hpp"

namespace trident {

// An InputError that every rank throws at once (collective_check's): main reports it once.
class CollectiveInputError : public InputError {
 public:
  using InputError::InputError;
};

// Runs fn on every rank of comm. If it throws InputError on any rank, every rank throws a
// CollectiveInputError carrying the message of the lowest such rank.
void collective_check(MPI_Comm comm, const std::function<void()>& fn);

// Runs fn, a phase in which the ranks work in lockstep (training, evaluation), so that an error
// is one rank's alone: its peers would wait for it in their next collective until
// parallel.timeout_s. An exception from fn other than a CollectiveInputError (rethrown) is
// printed on this rank as "<rank context> trident <command>: error: <message>" and ends the whole
// job through MPI_Abort, with status 2 for an InputError and 1 for anything else.
int abort_job_on_error(const char* command, const std::function<int()>& fn);

}  // namespace trident
