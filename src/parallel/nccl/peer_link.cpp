// PeerFlags and PeerLink: copy-engine transfers between the two GPUs of a pair.
#include "peer_link.hpp"

#include <exception>
#include <type_traits>

#include "host_checks.hpp"
#include "trident/gpu/profiler.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"

namespace trident::gpu {
namespace {

CUdeviceptr addr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// Both ranks of the pair drain this GPU (every stream), run `unmap` (closing their mappings of
// the other's memory), then meet again: so neither frees memory that the other's last copies or
// flag writes may still reach, or that it still maps. The meetings are skipped while an
// exception unwinds, which the other rank may not be doing (it would wait here forever). Reports
// no error: destructors call it.
template <class Unmap>
void unmap_together(MPI_Comm mpi, Unmap&& unmap) {
  const bool together = std::uncaught_exceptions() == 0;
  if (together) {
    cudaDeviceSynchronize();
    MPI_Barrier(mpi);
  }
  unmap();
  if (together) MPI_Barrier(mpi);
}

int pair_rank(MPI_Comm mpi) {
  int rank = 0;
  MPI_Comm_rank(mpi, &rank);
  return rank;
}

}  // namespace

const StreamMemOps& StreamMemOps::get() {
  static const StreamMemOps ops = [] {
    StreamMemOps o;
    auto find = [](const char* name, auto** fn) {
      cudaDriverEntryPointQueryResult found;
      void* p = nullptr;
      CUDA_HOST_CHECK(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found));
      TRIDENT_CHECK(found == cudaDriverEntryPointSuccess && p, str("the CUDA driver has no ", name));
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(p);
    };
    find("cuStreamWaitValue64", &o.wait64);
    find("cuStreamWriteValue64", &o.write64);
    find("cuDeviceGetAttribute", &o.attribute);
    find("cuMemGetAddressRange", &o.address_range);
    return o;
  }();
  return ops;
}

char* map_peer_memory(MPI_Comm mpi, void* p, size_t bytes, void** mapping) {
  CUdeviceptr start = 0;
  size_t range = 0;
  CU_CHECK(StreamMemOps::get().address_range(&start, &range, addr(p)));
  struct Export {
    cudaIpcMemHandle_t handle;
    size_t offset, bytes;
  } mine{}, theirs{};
  CUDA_HOST_CHECK(cudaIpcGetMemHandle(&mine.handle, reinterpret_cast<void*>(start)));
  mine.offset = addr(p) - start;
  mine.bytes = bytes;
  const int other = 1 - pair_rank(mpi);
  MPI_CHECK(MPI_Sendrecv(&mine, sizeof mine, MPI_BYTE, other, 8, &theirs, sizeof theirs, MPI_BYTE, other, 8, mpi,
                              MPI_STATUS_IGNORE));
  TRIDENT_CHECK(theirs.bytes == bytes,
                str("a peer buffer of ", bytes, " bytes here is ", theirs.bytes, " bytes on the other rank"));
  CUDA_HOST_CHECK(cudaIpcOpenMemHandle(mapping, theirs.handle, cudaIpcMemLazyEnablePeerAccess));
  return static_cast<char*>(*mapping) + theirs.offset;
}

// ---- PeerFlags: [flags][probe][flags * kStaging staging words]

PeerFlags::PeerFlags(MPI_Comm mpi, int flags) : flags_(flags) {
  const size_t words = static_cast<size_t>(flags) * (1 + kStaging) + 1;
  CUDA_HOST_CHECK(cudaMalloc(&mine_, words * sizeof(uint64_t)));
  CUDA_HOST_CHECK(cudaMemset(mine_, 0, words * sizeof(uint64_t)));
  CUDA_HOST_CHECK(cudaDeviceSynchronize());   // zeroed before the other rank can write them
  theirs_ = reinterpret_cast<uint64_t*>(map_peer_memory(mpi, mine_, words * sizeof(uint64_t), &mapping_));
  MPI_CHECK(MPI_Barrier(mpi));   // both mapped before either writes
  cudaStream_t s = nullptr;
  CUDA_HOST_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // A write the driver refuses, or one that fails as it runs, means flags are copied instead. A
  // failure that outlives the cleared error (a fault: sticky) leaves this process's CUDA context
  // unusable, so it stops here with the reason instead of failing later at an unrelated call.
  const CUresult probe = StreamMemOps::get().write64(s, addr(&theirs_[flags]), 1, CU_STREAM_WRITE_VALUE_DEFAULT);
  const cudaError_t ran = probe == CUDA_SUCCESS ? cudaStreamSynchronize(s) : cudaSuccess;
  copied_ = probe != CUDA_SUCCESS || ran != cudaSuccess;
  cudaGetLastError();
  if (ran != cudaSuccess && cudaStreamSynchronize(s) != cudaSuccess)
    fatal(__FILE__, __LINE__, "PeerFlags: a test write into the other GPU's memory",
          str(cudaGetErrorString(ran), "; the CUDA context cannot be used after it: on this machine set "
              "parallel.tp_fused_sum to false"));
  cudaStreamDestroy(s);
  MPI_CHECK(MPI_Barrier(mpi));
}

PeerFlags::~PeerFlags() {
  unmap();
  cudaFree(mine_);
}

void PeerFlags::unmap() {
  if (mapping_) cudaIpcCloseMemHandle(mapping_);
  mapping_ = nullptr;
  theirs_ = nullptr;
}

void PeerFlags::write(int flag, uint64_t value, cudaStream_t s) {
  const StreamMemOps& ops = StreamMemOps::get();
  if (!copied_) {
    CU_CHECK(ops.write64(s, addr(&theirs_[flag]), value, CU_STREAM_WRITE_VALUE_DEFAULT));
    return;
  }
  uint64_t* stage = &mine_[flags_ + 1 + static_cast<size_t>(flag) * kStaging + value % kStaging];
  CU_CHECK(ops.write64(s, addr(stage), value, CU_STREAM_WRITE_VALUE_DEFAULT));
  CUDA_HOST_CHECK(cudaMemcpyAsync(&theirs_[flag], stage, sizeof(uint64_t), cudaMemcpyDeviceToDevice, s));
}

void PeerFlags::wait(int flag, uint64_t value, cudaStream_t s) {
  CU_CHECK(StreamMemOps::get().wait64(s, addr(&mine_[flag]), value, CU_STREAM_WAIT_VALUE_GEQ));
}

// ---- PeerLink

PeerLink::PeerLink(MPI_Comm mpi, size_t slot_bytes) : mpi_(mpi), slot_bytes_(slot_bytes), flags_(mpi, 2 * kSlots) {
  CUDA_HOST_CHECK(cudaMalloc(&slots_, kSlots * slot_bytes_));
  CUDA_HOST_CHECK(cudaMalloc(&counters_, kSlots * sizeof(unsigned)));
  CUDA_HOST_CHECK(cudaMemset(counters_, 0, kSlots * sizeof(unsigned)));
  CUDA_HOST_CHECK(cudaDeviceSynchronize());   // zeroed before any stream's kernel counts in them
  peer_slots_ = map_peer_memory(mpi, slots_, kSlots * slot_bytes_, &peer_mapping_);
  CUDA_HOST_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
  CUDA_HOST_CHECK(cudaStreamCreateWithFlags(&flag_stream_, cudaStreamNonBlocking));
  CUDA_HOST_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
  CUDA_HOST_CHECK(cudaEventCreateWithFlags(&released_, cudaEventDisableTiming));
  for (cudaEvent_t& e : sent_) CUDA_HOST_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  MPI_CHECK(MPI_Barrier(mpi));
}

PeerLink::~PeerLink() {
  unmap_together(mpi_, [&] {
    cudaIpcCloseMemHandle(peer_mapping_);
    flags_.unmap();
  });
  for (cudaEvent_t e : sent_) cudaEventDestroy(e);
  cudaEventDestroy(ready_);
  cudaEventDestroy(released_);
  cudaStreamDestroy(flag_stream_);
  cudaStreamDestroy(copy_stream_);
  cudaFree(counters_);
  cudaFree(slots_);
}

uint64_t PeerLink::send(const void* buf, size_t bytes, cudaStream_t s) {
  const uint64_t seq = ++seq_;
  const int k = static_cast<int>(seq % kSlots);
  // sent_[k] is recorded again below: the partial that last used slot k must have been waited.
  TRIDENT_CHECK(unwaited_[k] == 0, str("partial sum ", unwaited_[k], " not waited before slot ", k, " is reused"));
  unwaited_[k] = seq;
  CUDA_HOST_CHECK(cudaEventRecord(ready_, s));
  CUDA_HOST_CHECK(cudaStreamWaitEvent(copy_stream_, ready_, 0));
  if (seq > kSlots) flags_.wait(kSlots + k, seq - kSlots, copy_stream_);   // freed
  {
    // Profiled as a side-stream op: how long the copy engine takes (beside the compute).
    ProfileScope prof(copy_stream_, "copy-engine send (bytes)", static_cast<long>(bytes));
    CUDA_HOST_CHECK(cudaMemcpyAsync(peer_slots_ + k * slot_bytes_, buf, bytes, cudaMemcpyDeviceToDevice, copy_stream_));
  }
  CUDA_HOST_CHECK(cudaEventRecord(sent_[k], copy_stream_));
  flags_.write(k, seq, copy_stream_);   // arrived
  return seq;
}

void PeerLink::wait(uint64_t seq, cudaStream_t s) {
  const int k = static_cast<int>(seq % kSlots);
  unwaited_[k] = 0;
  CUDA_HOST_CHECK(cudaStreamWaitEvent(s, sent_[k], 0));
  flags_.wait(k, seq, s);
}

void PeerLink::gather(const void* mine, void* theirs, size_t bytes, cudaStream_t s, cudaEvent_t done) {
  const uint64_t seq = send(mine, bytes, s);
  wait(seq, copy_stream_);
  CUDA_HOST_CHECK(cudaMemcpyAsync(theirs, slot(seq), bytes, cudaMemcpyDeviceToDevice, copy_stream_));
  CUDA_HOST_CHECK(cudaEventRecord(done, copy_stream_));
  release(seq, copy_stream_);
}

// A flag write on a compute stream costs it 1.4-2.0 us (H100), so the freed flag is written
// from the link's flag stream after an event (a fraction of that); the sender needs it only
// kSlots partials later. (The copy stream may be blocked on the other rank's freed flag, so it
// cannot carry this rank's.)
void PeerLink::release(uint64_t seq, cudaStream_t s) {
  const int flag = kSlots + static_cast<int>(seq % kSlots);
  if (s == copy_stream_) {
    flags_.write(flag, seq, s);
    return;
  }
  CUDA_HOST_CHECK(cudaEventRecord(released_, s));
  CUDA_HOST_CHECK(cudaStreamWaitEvent(flag_stream_, released_, 0));
  flags_.write(flag, seq, flag_stream_);
}

PeerRelease PeerLink::device_release(uint64_t seq) const {
  const int k = static_cast<int>(seq % kSlots);
  uint64_t* flag = flags_.remote(kSlots + k);
  if (!flag) return {};
  return PeerRelease{flag, seq, counters_ + k};
}

}  // namespace trident::gpu
