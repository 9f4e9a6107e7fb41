// The checks that every communicator's pair operations share.
#include "trident/parallel/pair_exchange.hpp"

namespace trident {

size_t partial_bytes(const Comm& comm, size_t count, DType t, size_t slot_bytes) {
  TRIDENT_CHECK(slot_bytes > 0,
                str("send_partial_async on the ", comm.name(), " communicator without enable_partials"));
  const size_t bytes = count * dtype_size(t);
  TRIDENT_CHECK(bytes <= slot_bytes,
                str("a partial sum of ", bytes, " bytes exceeds the ", slot_bytes, " reserved by enable_partials"));
  return bytes;
}

}  // namespace trident
