// Host-memory transfers between world ranks for the layers above parallel (the gathers of tests
// and exports): checked MPI point-to-point over the groups' world communicator, so that no
// layer above needs MPI itself.
#pragma once

#include <vector>

#include "trident/parallel/groups.hpp"

namespace trident {

// Sends data to world rank `to`, which receives it with recv_floats(g, <this rank>, ...).
void send_floats(const ParallelGroups& g, int to, const std::vector<float>& data);
// Receives data.size() floats from world rank `from`.
void recv_floats(const ParallelGroups& g, int from, std::vector<float>& data);

}  // namespace trident
