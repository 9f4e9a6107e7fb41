// ParallelGroups: this rank's coordinates and one Comm per parallel axis, passed explicitly
// to the model and the trainer (no globals).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "trident/parallel/comm.hpp"
#include "trident/parallel/control_comm.hpp"
#include "trident/parallel/topology.hpp"

namespace trident {

// The MPI sub-communicators of one layout; NCCL communicators are bootstrapped over them.
struct AxisMpiComms {
  MPI_Comm world = MPI_COMM_NULL, tp = MPI_COMM_NULL, pp = MPI_COMM_NULL, dp = MPI_COMM_NULL,
           embed = MPI_COMM_NULL;  // embed: first and last stage; MPI_COMM_NULL on middle stages
};

// Splits `world` (whose size must equal topo.world()) into the axis communicators.
AxisMpiComms split_axes(MPI_Comm world, const Topology& topo);

struct ParallelGroups {
  ParallelGroups() = default;
  ParallelGroups(ParallelGroups&& o) noexcept { swap(o); }
  ParallelGroups& operator=(ParallelGroups&& o) noexcept {
    swap(o);
    return *this;
  }
  ~ParallelGroups();   // frees the MPI communicators
  void swap(ParallelGroups& o) noexcept;

  Topology topo{1, 1, 1};
  // Host-side communicators, for the parallel layer only (bootstrap, host_collectives, gathers):
  // the layers above reach MPI through its functions, HDF5 through parallel_io_comm.
  AxisMpiComms mpi;
  int rank = 0;    // in `world`
  Coord coord;
  std::unique_ptr<Comm> world, tp, pp, dp;
  std::unique_ptr<Comm> embed;   // null on middle stages and when pp = 1
  // Host-side decisions over the world (stop signals, checkpoint saves) under parallel.timeout_s.
  std::unique_ptr<ControlComm> control;

  bool first_stage() const { return coord.pp == 0; }
  bool last_stage() const { return coord.pp == topo.pp() - 1; }
  // "[rank r host tp/pp/dp]" prefix of errors and warnings.
  std::string context(const std::string& host) const;
};

// The world communicator for HDF5's MPI-IO driver (H5Pset_fapl_mpio: checkpoints and the I/O
// probe in io/), which takes nothing but an MPI_Comm: the one raw communicator the parallel layer
// hands to a layer above.
MPI_Comm parallel_io_comm(const ParallelGroups& g);

// Groups whose comms are MpiComms (host memory, the CPU backend). Takes ownership of `axes`.
ParallelGroups make_mpi_groups(const AxisMpiComms& axes, const Topology& topo, double timeout_s);

}  // namespace trident
