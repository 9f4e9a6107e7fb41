// The pair operations that every communicator of two ranks can express through its others.
#include "trident/parallel/pair_exchange.hpp"

namespace trident {

Request scatter_partial_by_exchange(Comm& comm, void* buf, size_t count, DType t, void* inbox, Stream s) {
  TRIDENT_CHECK(comm.size() == 2,
                str("scatter_partial_async on the ", comm.name(), " group of ", comm.size(), " ranks (needs 2)"));
  char* other = static_cast<char*>(buf) + (1 - comm.rank()) * count * dtype_size(t);
  const int peer = 1 - comm.rank();
  return comm.exchange_async({P2POp{P2POp::Send, other, count, t, peer}, P2POp{P2POp::Recv, inbox, count, t, peer}}, s);
}

size_t partial_bytes(const Comm& comm, size_t count, DType t, size_t slot_bytes) {
  TRIDENT_CHECK(slot_bytes > 0,
                str("send_partial_async on the ", comm.name(), " communicator without enable_partials"));
  const size_t bytes = count * dtype_size(t);
  TRIDENT_CHECK(bytes <= slot_bytes,
                str("a partial sum of ", bytes, " bytes exceeds the ", slot_bytes, " reserved by enable_partials"));
  return bytes;
}

}  // namespace trident
