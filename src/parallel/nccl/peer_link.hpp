// Copy-engine transfers between the two GPUs of a pair on one node, for NcclComm: the other
// GPU's memory mapped through CUDA IPC, written by cudaMemcpyAsync (a copy engine: no SM runs
// it), and flags in each GPU's memory that the other GPU writes and this one awaits with the
// driver's stream memory operations. PeerLink carries fused TP sums (a ring of slots).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>
#include <mpi.h>

#include <cstdint>

#include "trident/parallel/pair_exchange.hpp"

namespace trident::gpu {

// The driver's stream memory operations and the other entry points used here, found through
// the runtime so that nothing links libcuda directly.
struct StreamMemOps {
  CUresult (*wait64)(CUstream, CUdeviceptr, cuuint64_t, unsigned int) = nullptr;
  CUresult (*write64)(CUstream, CUdeviceptr, cuuint64_t, unsigned int) = nullptr;
  CUresult (*attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*address_range)(CUdeviceptr*, size_t*, CUdeviceptr) = nullptr;
  static const StreamMemOps& get();
};

// Collective over the pair's `mpi`: the other rank's [p, p + bytes) (p may lie inside a larger
// allocation; IPC maps whole allocations), mapped into this process. Both ranks pass the same
// size. *mapping receives what cudaIpcCloseMemHandle must close.
char* map_peer_memory(MPI_Comm mpi, void* p, size_t bytes, void** mapping);

// 64-bit flags in this GPU's memory that the other GPU of the pair writes, and the other's
// mapped here. Where the driver cannot write into the other GPU's memory directly (probed at
// construction), a write goes to a local staging word and is copied over; each flag has
// kStaging staging words, used in turn by the written value, so one is rewritten only kStaging
// writes of its flag later.
class PeerFlags {
 public:
  static constexpr int kStaging = 64;

  PeerFlags(MPI_Comm mpi, int flags);   // collective; all flags start at 0
  ~PeerFlags();                         // unmap() first, on both ranks (see its owners)
  PeerFlags(const PeerFlags&) = delete;
  PeerFlags& operator=(const PeerFlags&) = delete;

  // The other GPU's flag = value, after the work queued on s (the default write orders the
  // copies queued before it ahead of the flag; a copied flag follows them in stream order).
  void write(int flag, uint64_t value, cudaStream_t s);
  // s waits until this GPU's flag >= value.
  void wait(int flag, uint64_t value, cudaStream_t s);
  bool copied() const { return copied_; }
  // The other GPU's flag as mapped here, for kernels to write (null where writes are copied).
  uint64_t* remote(int flag) const { return copied_ || !theirs_ ? nullptr : &theirs_[flag]; }
  void unmap();

 private:
  int flags_ = 0;
  bool copied_ = false;
  uint64_t* mine_ = nullptr;     // (flags + probe + flags * kStaging)
  uint64_t* theirs_ = nullptr;   // the other rank's, mapped here
  void* mapping_ = nullptr;
};

// Fused TP sums: each partial is copied into a ring of kSlots slots on the receiver. Partial
// number `seq` (the same sequence on both ranks) uses slot seq % kSlots. Flags:
//   arrived[k]: the last seq copied into my slot k (the sender writes it after its copy),
//   freed[k]:   the last seq the other rank has read from ITS slot k (it writes it on release);
// a sender waits until the slot's previous partial (seq - kSlots) is freed before copying.
class PeerLink {
 public:
  static constexpr int kSlots = kPartialSlots;

  PeerLink(MPI_Comm mpi, size_t slot_bytes);   // collective over the pair
  ~PeerLink();

  size_t slot_bytes() const { return slot_bytes_; }
  bool flags_copied() const { return flags_.copied(); }
  // Queues the copy of `bytes` at buf (after the work queued on s) into the other rank's next
  // slot; returns its sequence number.
  uint64_t send(const void* buf, size_t bytes, cudaStream_t s);
  // Orders s after this rank's copy of `seq` (its buffer may be overwritten next) and the
  // arrival of the other rank's.
  void wait(uint64_t seq, cudaStream_t s);
  // The in-place all-gather of a pair on the copy stream: this rank's block goes to the other
  // rank's next slot, then the other rank's block is copied from this rank's slot into place and
  // the slot released; `done` is recorded after that copy. Readers of the other block's old
  // values must be queued on s before this.
  void gather(const void* mine, void* theirs, size_t bytes, cudaStream_t s, cudaEvent_t done);
  const void* slot(uint64_t seq) const { return slots_ + (seq % kSlots) * slot_bytes_; }
  void release(uint64_t seq, cudaStream_t s);
  // release(seq) for the kernel that reads the partial to do itself (PeerRelease): the freed
  // flag and a block counter of its slot. Empty where flags are copied.
  PeerRelease device_release(uint64_t seq) const;

 private:
  // Flags: arrived[kSlots], then freed[kSlots].
  MPI_Comm mpi_;
  size_t slot_bytes_;
  PeerFlags flags_;
  uint64_t unwaited_[kSlots] = {};   // per slot: the partial sent and not yet waited (0: none)
  char* slots_ = nullptr;            // (kSlots, slot_bytes): the other rank's partials
  char* peer_slots_ = nullptr;       // the other rank's slots_, mapped here
  void* peer_mapping_ = nullptr;
  uint64_t seq_ = 0;
  cudaStream_t copy_stream_ = nullptr;
  cudaStream_t flag_stream_ = nullptr;   // release()'s freed flags, off the compute stream
  cudaEvent_t ready_ = nullptr;
  cudaEvent_t released_ = nullptr;
  cudaEvent_t sent_[kSlots] = {};
  unsigned* counters_ = nullptr;   // per slot: device_release's block counter, zero between uses
};

}  // namespace trident::gpu
