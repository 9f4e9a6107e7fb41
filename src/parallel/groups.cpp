// Axis communicators from MPI_Comm_split, and the MPI flavour of ParallelGroups.
#include "trident/parallel/groups.hpp"

#include "trident/core/error.hpp"
#include "trident/parallel/mpi_comm.hpp"

#include <utility>

namespace trident {

AxisMpiComms split_axes(MPI_Comm world, const Topology& topo) {
  int rank = 0, size = 0;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  TRIDENT_CHECK(size == topo.world(), str("world of ", size, " ranks for a layout of ", topo.world()));
  Coord c = topo.coord_of(rank);
  AxisMpiComms a;
  MPI_Comm_dup(world, &a.world);
  // Color = the coordinates that stay fixed along the axis; key = position along it.
  MPI_Comm_split(world, c.dp + topo.dp() * c.pp, c.tp, &a.tp);
  MPI_Comm_split(world, c.tp + topo.tp() * c.pp, c.dp, &a.dp);
  MPI_Comm_split(world, c.tp + topo.tp() * c.dp, c.pp, &a.pp);
  bool in_embed = topo.pp() > 1 && (c.pp == 0 || c.pp == topo.pp() - 1);
  MPI_Comm_split(world, in_embed ? c.tp + topo.tp() * c.dp : MPI_UNDEFINED, c.pp, &a.embed);
  return a;
}

MPI_Comm parallel_io_comm(const ParallelGroups& g) { return g.mpi.world; }

std::string ParallelGroups::context(const std::string& host) const {
  return str("[rank ", rank, " ", host, " tp", coord.tp, "/pp", coord.pp, "/dp", coord.dp, "]");
}

void ParallelGroups::swap(ParallelGroups& o) noexcept {
  std::swap(topo, o.topo);
  std::swap(mpi, o.mpi);
  std::swap(rank, o.rank);
  std::swap(coord, o.coord);
  std::swap(world, o.world);
  std::swap(tp, o.tp);
  std::swap(pp, o.pp);
  std::swap(dp, o.dp);
  std::swap(embed, o.embed);
  std::swap(control, o.control);
}

ParallelGroups::~ParallelGroups() {
  // Comms first: they may still refer to the MPI communicators.
  world.reset();
  tp.reset();
  pp.reset();
  dp.reset();
  embed.reset();
  control.reset();
  for (MPI_Comm* c : {&mpi.world, &mpi.tp, &mpi.pp, &mpi.dp, &mpi.embed})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

ParallelGroups make_mpi_groups(const AxisMpiComms& axes, const Topology& topo, double timeout_s) {
  ParallelGroups g;
  g.topo = topo;
  g.mpi = axes;
  MPI_Comm_rank(axes.world, &g.rank);
  g.coord = topo.coord_of(g.rank);
  g.world = std::make_unique<MpiComm>(axes.world, "world", timeout_s);
  g.tp = std::make_unique<MpiComm>(axes.tp, "tp", timeout_s);
  g.pp = std::make_unique<MpiComm>(axes.pp, "pp", timeout_s);
  g.dp = std::make_unique<MpiComm>(axes.dp, "dp", timeout_s);
  if (axes.embed != MPI_COMM_NULL) g.embed = std::make_unique<MpiComm>(axes.embed, "embed", timeout_s);
  g.control = std::make_unique<ControlComm>(axes.world, timeout_s);
  return g;
}

}  // namespace trident
