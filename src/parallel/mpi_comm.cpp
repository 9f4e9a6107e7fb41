// MpiComm: non-blocking MPI collectives; wait() polls with a timeout so a stalled peer aborts
// the job with a message instead of hanging it.
#include "trident/parallel/mpi_comm.hpp"

#include <chrono>
#include <climits>
#include <cstring>
#include <functional>
#include <thread>

#include "trident/core/error.hpp"
#include "trident/core/trace.hpp"
#include "trident/parallel/mpi_check.hpp"

namespace trident {
namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32: return MPI_FLOAT;
    case DType::I32: return MPI_INT;
    default: TRIDENT_FATAL(str("MpiComm cannot reduce ", dtype_name(t), " buffers (CPU backend is fp32)"));
  }
}

class MpiWork : public CommWork {
 public:
  MpiWork(std::vector<MPI_Request> reqs, std::string what, double timeout_s, std::function<void()> after = {})
      : reqs_(std::move(reqs)), what_(std::move(what)), timeout_s_(timeout_s), after_(std::move(after)) {}

  void wait(Stream) override {
    if (done_) return;
    TraceRange range("wait", what_.c_str());   // "wait pp send/recv": where a rank blocks on a transfer
    auto start = std::chrono::steady_clock::now();
    for (long spins = 0;; ++spins) {
      int flag = 0;
      MPI_CHECK(MPI_Testall(static_cast<int>(reqs_.size()), reqs_.data(), &flag, MPI_STATUSES_IGNORE));
      if (flag) break;
      if (spins > 64) std::this_thread::yield();  // oversubscribed CPU ranks need the core back
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (waited > timeout_s_)
        TRIDENT_FATAL(str("timeout: ", what_, " did not finish within parallel.timeout_s = ", timeout_s_,
                          " s at step ", current_step(), "; a peer rank is stalled or dead"));
    }
    done_ = true;
    if (after_) after_();
  }

 private:
  std::vector<MPI_Request> reqs_;
  std::string what_;
  double timeout_s_;
  std::function<void()> after_;
  bool done_ = false;
};

// The other rank's partial in one slot of the ring; wait() completes the send and the receive.
class MpiPartial : public PartialWork {
 public:
  // held: the comm's flag of this slot, set while the slot's partial is unreleased.
  MpiPartial(std::vector<MPI_Request> reqs, std::string what, double timeout_s, const void* slot,
             std::shared_ptr<std::vector<char>> held, int index)
      : work_(std::move(reqs), std::move(what), timeout_s), slot_(slot), held_(std::move(held)), index_(index) {}
  void wait(Stream s) override { work_.wait(s); }
  const void* peer() const override { return slot_; }
  void release(Stream) override {
    TRIDENT_CHECK((*held_)[index_], "a partial sum was released twice");
    (*held_)[index_] = 0;
  }

 private:
  MpiWork work_;
  const void* slot_;
  std::shared_ptr<std::vector<char>> held_;
  int index_;
};

}  // namespace

std::string MpiComm::enable_partials(size_t max_bytes) {
  if (size_ < 2) return str("the ", name_, " group has one rank; fused sums need two or more");
  slot_bytes_ = max_bytes;
  partial_slots_.assign(size_, {});
  partial_seq_.assign(size_, 0);
  slot_held_.assign(size_, nullptr);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    partial_slots_[r].assign(kPartialSlots, std::vector<char>(max_bytes));
    slot_held_[r] = std::make_shared<std::vector<char>>(kPartialSlots, 0);
  }
  return "";
}

PartialRequest MpiComm::send_partial_async(const void* buf, size_t count, DType t, int to, Stream) {
  TRIDENT_CHECK(to >= 0 && to < size_ && to != rank_,
                str("a partial sum sent to rank ", to, " of the ", name_, " group of ", size_, " from rank ", rank_));
  const size_t bytes = partial_bytes(*this, count, t, slot_bytes_);
  const int k = static_cast<int>(partial_seq_[to]++ % kPartialSlots);
  std::vector<char>& held = *slot_held_[to];
  TRIDENT_CHECK(!held[k], str("partial-sum slot ", k, " of rank ", to, " reused before its partial was released"));
  held[k] = 1;
  char* slot = partial_slots_[to][k].data();
  std::vector<MPI_Request> reqs(2);
  const int n = mpi_count(bytes, "a message");
  MPI_CHECK(MPI_Irecv(slot, n, MPI_BYTE, to, 1, comm_, &reqs[0]));
  MPI_CHECK(MPI_Isend(buf, n, MPI_BYTE, to, 1, comm_, &reqs[1]));
  return std::make_unique<MpiPartial>(std::move(reqs), str(name_, " partial sum"), timeout_s_, slot, slot_held_[to], k);
}

std::vector<Request> MpiComm::gather_each_async(void* buf, size_t count, DType t, Stream) {
  const size_t bytes = partial_bytes(*this, count, t, slot_bytes_);
  char* base = static_cast<char*>(buf);
  const int n = mpi_count(bytes, "a message");
  std::vector<Request> each(size_);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    std::vector<MPI_Request> reqs(2);
    MPI_CHECK(MPI_Irecv(base + r * bytes, n, MPI_BYTE, r, 2, comm_, &reqs[0]));
    MPI_CHECK(MPI_Isend(base + rank_ * bytes, n, MPI_BYTE, r, 2, comm_, &reqs[1]));
    each[r] = std::make_unique<MpiWork>(std::move(reqs), str(name_, " gather from rank ", r), timeout_s_);
  }
  return each;
}

void mpi_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

MpiComm::MpiComm(MPI_Comm comm, std::string name, double timeout_s)
    : comm_(comm), name_(std::move(name)), timeout_s_(timeout_s) {
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

Request MpiComm::all_reduce_async(void* buf, size_t count, DType t, ReduceOp op, Stream) {
  TraceRange range(name_, "all-reduce");
  MPI_Request r;
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, mpi_count(count, "a message"), mpi_type(t),
                           op == ReduceOp::Sum ? MPI_SUM : MPI_MAX, comm_, &r));
  return std::make_unique<MpiWork>(std::vector<MPI_Request>{r}, str(name_, " all-reduce"), timeout_s_);
}

Request MpiComm::reduce_scatter_async(void* buf, size_t count, DType t, Stream) {
  TraceRange range(name_, "reduce-scatter");
  MPI_Request r;
  MPI_CHECK(MPI_Ireduce_scatter_block(MPI_IN_PLACE, buf, mpi_count(count, "a message"), mpi_type(t), MPI_SUM,
                                      comm_, &r));
  // MPI leaves the reduced block at the start of the buffer; our contract puts it at rank*count.
  size_t bytes = count * dtype_size(t);
  char* base = static_cast<char*>(buf);
  int rank = rank_;
  auto move_block = [base, bytes, rank] {
    if (rank != 0) std::memmove(base + rank * bytes, base, bytes);
  };
  return std::make_unique<MpiWork>(std::vector<MPI_Request>{r}, str(name_, " reduce-scatter"), timeout_s_,
                                   move_block);
}

Request MpiComm::reduce_scatter_to_async(const void* in, void* out, size_t count, DType t, Stream) {
  TraceRange range(name_, "reduce-scatter");
  MPI_Request r;
  MPI_CHECK(MPI_Ireduce_scatter_block(in, out, mpi_count(count, "a message"), mpi_type(t), MPI_SUM, comm_, &r));
  return std::make_unique<MpiWork>(std::vector<MPI_Request>{r}, str(name_, " reduce-scatter"), timeout_s_);
}

Request MpiComm::all_gather_async(void* buf, size_t count, DType t, Stream) {
  TraceRange range(name_, "all-gather");
  MPI_Request r;
  MPI_CHECK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, mpi_count(count, "a message"), mpi_type(t),
                           comm_, &r));
  return std::make_unique<MpiWork>(std::vector<MPI_Request>{r}, str(name_, " all-gather"), timeout_s_);
}

Request MpiComm::broadcast_async(void* buf, size_t count, DType t, int root, Stream) {
  TraceRange range(name_, "broadcast");
  MPI_Request r;
  MPI_CHECK(MPI_Ibcast(buf, mpi_count(count, "a message"), mpi_type(t), root, comm_, &r));
  return std::make_unique<MpiWork>(std::vector<MPI_Request>{r}, str(name_, " broadcast"), timeout_s_);
}

Request MpiComm::exchange_async(const std::vector<P2POp>& ops, Stream) {
  TraceRange range(name_, "send/recv");
  std::vector<MPI_Request> reqs(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2POp& o = ops[i];
    // Raw bytes: point-to-point needs no reduction, so any dtype travels.
    int n = mpi_count(o.count * dtype_size(o.dtype), "a message");
    if (o.kind == P2POp::Send)
      MPI_CHECK(MPI_Isend(o.buf, n, MPI_BYTE, o.peer, 0, comm_, &reqs[i]));
    else
      MPI_CHECK(MPI_Irecv(o.buf, n, MPI_BYTE, o.peer, 0, comm_, &reqs[i]));
  }
  return std::make_unique<MpiWork>(std::move(reqs), str(name_, " send/recv"), timeout_s_);
}

void MpiComm::barrier() {
  MPI_Request r;
  MPI_CHECK(MPI_Ibarrier(comm_, &r));
  MpiWork(std::vector<MPI_Request>{r}, str(name_, " barrier"), timeout_s_).wait(Stream{});
}

}  // namespace trident
