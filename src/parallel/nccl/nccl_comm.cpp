// NcclComm: the Comm interface over NCCL, with a per-process watchdog that turns hangs and
// asynchronous NCCL errors into an abort with a message instead of a silent hang.
#include "trident/parallel/nccl/nccl_comm.hpp"

#include <cuda.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstdio>
#include <exception>
#include <chrono>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/core/trace.hpp"
#include "trident/parallel/host_collectives.hpp"
#include "trident/parallel/pair_exchange.hpp"
#include "host_checks.hpp"
#include "peer_link.hpp"
#include "trident/gpu/profiler.hpp"

#define NCCL_CHECK(stmt)                                                                   \
  do {                                                                                     \
    ncclResult_t r_ = (stmt);                                                              \
    if (r_ != ncclSuccess)                                                                 \
      ::trident::fatal(__FILE__, __LINE__, #stmt,                                          \
                       ::trident::str(ncclGetErrorString(r_), " ", ncclGetLastError(nullptr))); \
  } while (0)

namespace trident {
namespace {

using gpu::PeerLink;
using gpu::StreamMemOps;

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::I32: return ncclInt32;
  }
  TRIDENT_FATAL("unknown dtype");
}

// One in-flight operation: its completion event, what it was, and when it started.
struct Pending {
  cudaEvent_t done = nullptr;
  std::string what;     // "tp all-reduce"
  long step = -1;
  std::chrono::steady_clock::time_point start;
  std::atomic<bool> finished{false};
};

// Watches every communicator of the process. Events come from a free list, so the steady
// state creates none.
class Watchdog {
 public:
  static Watchdog& instance() {
    static Watchdog w;
    return w;
  }

  void start(int device, double timeout_s) {
    std::lock_guard<std::mutex> lock(mu_);
    timeout_s_ = timeout_s;
    device_ = device;
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }

  void add_comm(ncclComm_t c, const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    comms_.push_back({c, name});
  }

  void remove_comm(ncclComm_t c) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = comms_.begin(); it != comms_.end(); ++it)
      if (it->first == c) {
        comms_.erase(it);
        return;
      }
  }

  std::shared_ptr<Pending> begin(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<Pending> p;
    if (!free_.empty()) {
      p = free_.back();
      free_.pop_back();
    } else {
      p = std::make_shared<Pending>();
      CUDA_HOST_CHECK(cudaEventCreateWithFlags(&p->done, cudaEventDisableTiming));
    }
    p->what = what;
    p->step = current_step();
    p->start = std::chrono::steady_clock::now();
    p->finished = false;
    return p;
  }

  void watch(std::shared_ptr<Pending> p) {
    std::lock_guard<std::mutex> lock(mu_);
    watched_.push_back(std::move(p));
  }

  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    cudaSetDevice(device_);
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(50));
      for (const auto& [comm, name] : comms_) {
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(comm, &async);
        if (async != ncclSuccess && async != ncclInProgress)
          abort_all(str("NCCL asynchronous error on the ", name, " communicator: ", ncclGetErrorString(async),
                        " at step ", current_step()));
      }
      auto now = std::chrono::steady_clock::now();
      for (auto it = watched_.begin(); it != watched_.end();) {
        Pending& p = **it;
        if (!p.finished) {
          cudaError_t q = cudaEventQuery(p.done);
          if (q == cudaSuccess) p.finished = true;
          else if (q != cudaErrorNotReady) abort_all(str(p.what, " failed: ", cudaGetErrorString(q)));
        }
        if (p.finished) {
          // Reuse the event only once no Request can still wait on it.
          if (it->use_count() == 1) {
            free_.push_back(*it);
            it = watched_.erase(it);
          } else {
            ++it;
          }
          continue;
        }
        if (std::chrono::duration<double>(now - p.start).count() > timeout_s_)
          abort_all(str("timeout: ", p.what, " did not finish within parallel.timeout_s = ", timeout_s_,
                        " s at step ", p.step, "; a peer rank is stalled or dead"));
        ++it;
      }
    }
  }

  // Called with mu_ held from the watchdog thread: abort the communicators so no kernel keeps
  // spinning, then the job. ncclCommAbort can itself block behind a kernel that never sees its
  // peer, so it runs on a helper thread that gets two seconds before the job is aborted anyway.
  [[noreturn]] void abort_all(const std::string& msg) {
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread([comms = comms_, done] {
      for (const auto& c : comms) ncclCommAbort(c.first);
      *done = true;
    }).detach();
    for (int i = 0; i < 40 && !*done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    fatal(__FILE__, __LINE__, "watchdog", msg);
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
  bool stop_ = false;
  double timeout_s_ = 600;
  int device_ = 0;
  std::vector<std::pair<ncclComm_t, std::string>> comms_;
  std::list<std::shared_ptr<Pending>> watched_;
  std::vector<std::shared_ptr<Pending>> free_;
};

class NcclWork : public CommWork {
 public:
  explicit NcclWork(std::shared_ptr<Pending> p) : p_(std::move(p)) {}
  // Under the profiler, the region's time is how long `s` stalled on this operation.
  void wait(Stream s) override {
    const cudaStream_t stream = static_cast<cudaStream_t>(s.handle);
    const std::string name = gpu::Profiler::instance().enabled() ? "wait " + p_->what : std::string();
    gpu::ProfileScope prof(stream, name.c_str());
    CUDA_HOST_CHECK(cudaStreamWaitEvent(stream, p_->done, 0));
  }

 private:
  std::shared_ptr<Pending> p_;
};

// A partial sum sent over the PeerLink as a Request. wait() is timed like a collective's wait:
// profiled as "wait <what>", and the watchdog sees p's event, recorded after the wait.
class PeerPartial : public PartialWork {
 public:
  PeerPartial(PeerLink& link, uint64_t seq, std::shared_ptr<Pending> p) : link_(link), seq_(seq), p_(std::move(p)) {}
  void wait(Stream s) override {
    const cudaStream_t stream = static_cast<cudaStream_t>(s.handle);
    {
      const std::string name = gpu::Profiler::instance().enabled() ? "wait " + p_->what : std::string();
      gpu::ProfileScope prof(stream, name.c_str());
      link_.wait(seq_, stream);
    }
    CUDA_HOST_CHECK(cudaEventRecord(p_->done, stream));
    Watchdog::instance().watch(p_);
  }
  const void* peer() const override { return link_.slot(seq_); }
  void release(Stream s) override { link_.release(seq_, static_cast<cudaStream_t>(s.handle)); }
  PeerRelease device_release() override { return link_.device_release(seq_); }

 private:
  PeerLink& link_;
  uint64_t seq_;
  std::shared_ptr<Pending> p_;
};

class NcclComm : public Comm, public PairExchange {
 public:
  // max_ctas > 0: NCCL's kernels of this communicator use at most that many CTAs (SMs), which
  // leaves the rest to the compute they run beside.
  // gpus_per_node > 0: nodes are runs of that many ranks (parallel.gpus_per_node), which the
  // peer-to-peer fast paths do not cross.
  NcclComm(MPI_Comm mpi, std::string name, int max_ctas = 0, int gpus_per_node = 0)
      : mpi_(mpi), name_(std::move(name)), gpus_per_node_(gpus_per_node) {
    MPI_Comm_rank(mpi, &rank_);
    MPI_Comm_size(mpi, &size_);
    ncclUniqueId id;
    if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, mpi);
    if (max_ctas > 0) {
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.maxCTAs = max_ctas;
      NCCL_CHECK(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config));
    } else {
      NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
    }
    CUDA_HOST_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_HOST_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    Watchdog::instance().add_comm(comm_, name_);
  }

  ~NcclComm() override {
    // In increasing partner order on every rank: each link's teardown is collective over its pair,
    // and that order lets the lowest pair still waited on always finish.
    for (std::unique_ptr<PeerLink>& link : links_) link.reset();
    for (MPI_Comm& pair : pair_comms_) MPI_Comm_free(&pair);
    for (cudaEvent_t e : gathered_) cudaEventDestroy(e);
    if (join_) cudaStreamDestroy(join_);
    Watchdog::instance().remove_comm(comm_);
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
    cudaEventDestroy(ready_);
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  Request all_reduce_async(void* buf, size_t count, DType t, ReduceOp op, Stream s) override {
    return launch(s, "all-reduce", [&] {
      NCCL_CHECK(ncclAllReduce(buf, buf, count, nccl_type(t), op == ReduceOp::Sum ? ncclSum : ncclMax, comm_, stream_));
    });
  }

  Request reduce_scatter_async(void* buf, size_t count, DType t, Stream s) override {
    char* base = static_cast<char*>(buf);
    return launch(s, "reduce-scatter", [&] {
      NCCL_CHECK(ncclReduceScatter(base, base + rank_ * count * dtype_size(t), count, nccl_type(t), ncclSum, comm_,
                                   stream_));
    });
  }

  Request reduce_scatter_to_async(const void* in, void* out, size_t count, DType t, Stream s) override {
    return launch(s, "reduce-scatter", [&] {
      NCCL_CHECK(ncclReduceScatter(in, out, count, nccl_type(t), ncclSum, comm_, stream_));
    });
  }

  Request all_gather_async(void* buf, size_t count, DType t, Stream s) override {
    char* base = static_cast<char*>(buf);
    const size_t bytes = count * dtype_size(t);
    if (!links_.empty() && bytes <= slot_bytes_) {   // fused sums inside a node: by the copy engines
      std::shared_ptr<Pending> p = Watchdog::instance().begin(str(name_, " all-gather ", count));
      const cudaStream_t stream = static_cast<cudaStream_t>(s.handle);
      if (size_ == 2) {
        links_[1 - rank_]->gather(base + rank_ * bytes, base + (1 - rank_) * bytes, bytes, stream, p->done);
      } else {
        // Each pair's copies on its own link (copy stream), joined into one event.
        for (int r = 0; r < size_; ++r) {
          if (r == rank_) continue;
          links_[r]->gather(base + rank_ * bytes, base + r * bytes, bytes, stream, gathered_[r]);
          CUDA_HOST_CHECK(cudaStreamWaitEvent(join_, gathered_[r], 0));
        }
        CUDA_HOST_CHECK(cudaEventRecord(p->done, join_));
      }
      Watchdog::instance().watch(p);
      return std::make_unique<NcclWork>(std::move(p));
    }
    return launch(s, "all-gather", [&] {
      NCCL_CHECK(ncclAllGather(base + rank_ * count * dtype_size(t), base, count, nccl_type(t), comm_, stream_));
    });
  }

  Request broadcast_async(void* buf, size_t count, DType t, int root, Stream s) override {
    return launch(s, "broadcast", [&] { NCCL_CHECK(ncclBroadcast(buf, buf, count, nccl_type(t), root, comm_, stream_)); });
  }

  Request exchange_async(const std::vector<P2POp>& ops, Stream s) override {
    return launch(s, "send/recv", [&] {
      NCCL_CHECK(ncclGroupStart());
      for (const P2POp& o : ops) {
        if (o.kind == P2POp::Send)
          NCCL_CHECK(ncclSend(o.buf, o.count, nccl_type(o.dtype), o.peer, comm_, stream_));
        else
          NCCL_CHECK(ncclRecv(o.buf, o.count, nccl_type(o.dtype), o.peer, comm_, stream_));
      }
      NCCL_CHECK(ncclGroupEnd());
    });
  }

  void barrier() override { MPI_Barrier(mpi_); }
  PairExchange* pair_exchange() override { return this; }

  // One PeerLink per pair of the group's ranks, each over a communicator of that pair (made in the
  // same order on every rank: each split is collective over the group, each link over its pair).
  std::string enable_partials(size_t max_bytes) override {
    const std::string why = group_problem("fused sums");
    if (!why.empty()) return why;
    links_.resize(size_);
    for (int i = 0; i < size_; ++i) {
      for (int j = i + 1; j < size_; ++j) {
        const bool mine = rank_ == i || rank_ == j;
        MPI_Comm pair = MPI_COMM_NULL;
        MPI_CHECK(MPI_Comm_split(mpi_, mine ? 0 : MPI_UNDEFINED, rank_, &pair));
        if (!mine) continue;
        pair_comms_.push_back(pair);
        links_[rank_ == i ? j : i] = std::make_unique<PeerLink>(pair, max_bytes);
      }
    }
    slot_bytes_ = max_bytes;
    if (size_ > 2) {
      CUDA_HOST_CHECK(cudaStreamCreateWithFlags(&join_, cudaStreamNonBlocking));
      gathered_.assign(size_, nullptr);
      for (cudaEvent_t& e : gathered_) CUDA_HOST_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
    const PeerLink& any = *links_[rank_ == 0 ? 1 : 0];
    log_info(str("parallel.tp_fused_sum: partial sums by copy engine between ", size_, " GPUs, flags ",
                 any.flags_copied() ? "copied (no direct remote writes)" : "written directly"));
    return "";
  }

  std::vector<Request> gather_each_async(void* buf, size_t count, DType t, Stream s) override {
    const size_t bytes = partial_bytes(*this, count, t, links_.empty() ? 0 : slot_bytes_);
    char* base = static_cast<char*>(buf);
    std::vector<Request> each(size_);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      std::shared_ptr<Pending> p = Watchdog::instance().begin(str(name_, " gather from rank ", r));
      links_[r]->gather(base + rank_ * bytes, base + r * bytes, bytes, static_cast<cudaStream_t>(s.handle), p->done);
      Watchdog::instance().watch(p);
      each[r] = std::make_unique<NcclWork>(std::move(p));
    }
    return each;
  }

  PartialRequest send_partial_async(const void* buf, size_t count, DType t, int to, Stream s) override {
    TRIDENT_CHECK(to >= 0 && to < size_ && to != rank_,
                  str("a partial sum sent to rank ", to, " of the ", name_, " group of ", size_, " from rank ", rank_));
    const size_t bytes = partial_bytes(*this, count, t, links_.empty() ? 0 : slot_bytes_);
    PeerLink& link = *links_[to];
    // Named by size: the profile then tells the forward's half micro-batches from the rest.
    std::shared_ptr<Pending> p = Watchdog::instance().begin(str(name_, " partial sum ", count));
    const uint64_t seq = link.send(buf, bytes, static_cast<cudaStream_t>(s.handle));
    return std::make_unique<PeerPartial>(link, seq, std::move(p));
  }

 private:
  // Why this group cannot link its GPUs directly ("" if it can): all of them in this node, each
  // with peer access to every other and the driver's 64-bit stream memory operations. Collective:
  // every rank checks, and all return the first reason found.
  std::string group_problem(const char* what) {
    if (size_ < 2) return str("the ", name_, " group has one rank; ", what, " need two or more");
    const int node_size = node_ranks(mpi_, gpus_per_node_).local_size;
    int device = 0;
    std::vector<int> devices(size_);
    CUDA_HOST_CHECK(cudaGetDevice(&device));
    MPI_CHECK(MPI_Allgather(&device, 1, MPI_INT, devices.data(), 1, MPI_INT, mpi_));
    int mem_ops = 0;
    CU_CHECK(StreamMemOps::get().attribute(&mem_ops, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, device));
    std::string why;
    if (node_size != size_) {
      why = str("the ", size_, " ranks of the ", name_, " group run on more than one node",
                gpus_per_node_ ? str(" (parallel.gpus_per_node = ", gpus_per_node_, ")") : std::string());
    } else if (!mem_ops) {
      why = str("GPU ", device, " has no 64-bit stream memory operations");
    } else {
      for (int r = 0; r < size_ && why.empty(); ++r) {
        int peer_access = 0;
        if (r != rank_) CUDA_HOST_CHECK(cudaDeviceCanAccessPeer(&peer_access, device, devices[r]));
        if (r != rank_ && !peer_access)
          why = str("GPU ", device, " cannot access GPU ", devices[r], " directly (no peer access)");
      }
    }
    // Every rank returns the same reason (the first rank's that has one), so all stop alike.
    char mine[256] = {};
    std::vector<char> all(static_cast<size_t>(size_) * sizeof mine);
    std::snprintf(mine, sizeof mine, "%s", why.c_str());
    MPI_CHECK(MPI_Allgather(mine, sizeof mine, MPI_CHAR, all.data(), sizeof mine, MPI_CHAR, mpi_));
    for (int r = 0; r < size_; ++r)
      if (all[r * sizeof mine]) return std::string(&all[r * sizeof mine]);
    return "";
  }

  // Orders the side stream after the caller's stream, runs the NCCL call on it, and records
  // the completion event the watchdog and wait() use.
  template <class Fn>
  Request launch(Stream s, const char* op, Fn&& fn) {
    CUDA_HOST_CHECK(cudaEventRecord(ready_, static_cast<cudaStream_t>(s.handle)));
    CUDA_HOST_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
    std::shared_ptr<Pending> p = Watchdog::instance().begin(str(name_, " ", op));
    TraceRange range(name_, op);
    fn();
    CUDA_HOST_CHECK(cudaEventRecord(p->done, stream_));
    Watchdog::instance().watch(p);
    return std::make_unique<NcclWork>(std::move(p));
  }

  MPI_Comm mpi_;
  std::string name_;
  int gpus_per_node_ = 0;
  int rank_ = 0, size_ = 1;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  // Fused sums (enable_partials): links_[r] to rank r (null at this rank), over pair_comms_; with
  // more than two ranks a gather joins its links' copies on join_ (gathered_[r]: link r's).
  std::vector<std::unique_ptr<PeerLink>> links_;
  std::vector<MPI_Comm> pair_comms_;
  size_t slot_bytes_ = 0;
  cudaStream_t join_ = nullptr;
  std::vector<cudaEvent_t> gathered_;
};

}  // namespace

ParallelGroups make_nccl_groups(const AxisMpiComms& axes, const Topology& topo, double timeout_s, int tp_max_ctas,
                                int dp_max_ctas, int gpus_per_node) {
  int device = 0;
  CUDA_HOST_CHECK(cudaGetDevice(&device));
  Watchdog::instance().start(device, timeout_s);
  ParallelGroups g;
  g.topo = topo;
  g.mpi = axes;
  MPI_Comm_rank(axes.world, &g.rank);
  g.coord = topo.coord_of(g.rank);
  // Same order on every rank: each init is a collective over its group.
  g.world = std::make_unique<NcclComm>(axes.world, "world", 0, gpus_per_node);
  g.tp = std::make_unique<NcclComm>(axes.tp, "tp", tp_max_ctas, gpus_per_node);
  g.dp = std::make_unique<NcclComm>(axes.dp, "dp", dp_max_ctas, gpus_per_node);
  g.pp = std::make_unique<NcclComm>(axes.pp, "pp");
  if (axes.embed != MPI_COMM_NULL) g.embed = std::make_unique<NcclComm>(axes.embed, "embed");
  g.control = std::make_unique<ControlComm>(axes.world, timeout_s);
  return g;
}

}  // namespace trident
