// The Comm operations that every communicator can express through its others.
#include "trident/parallel/comm.hpp"

namespace trident {

Request Comm::scatter_partial_async(void* buf, size_t count, DType t, void* inbox, Stream s) {
  TRIDENT_CHECK(size() == 2, str("scatter_partial_async on the ", name(), " group of ", size(), " ranks (needs 2)"));
  char* other = static_cast<char*>(buf) + (1 - rank()) * count * dtype_size(t);
  const int peer = 1 - rank();
  return exchange_async({P2POp{P2POp::Send, other, count, t, peer}, P2POp{P2POp::Recv, inbox, count, t, peer}}, s);
}

size_t Comm::partial_bytes(size_t count, DType t, size_t slot_bytes) const {
  TRIDENT_CHECK(slot_bytes > 0, str("send_partial_async on the ", name(), " communicator without enable_partials"));
  const size_t bytes = count * dtype_size(t);
  TRIDENT_CHECK(bytes <= slot_bytes,
                str("a partial sum of ", bytes, " bytes exceeds the ", slot_bytes, " reserved by enable_partials"));
  return bytes;
}

}  // namespace trident
