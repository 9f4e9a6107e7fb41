// CudaBackend (bf16 activations and parameters, fp32 gradients and optimizer state): memory,
// the compute stream and argument checks; each op calls its family's entry point (encoder.cu, ...).
#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "adamw.cuh"
#include "attention.cuh"
#include "attention_mma.cuh"
#include "common.cuh"
#include "cross_entropy.cuh"
#include "nvml_telemetry.hpp"
#include "elementwise.cuh"
#include "encoder.cuh"
#include "layernorm.cuh"
#include "peer_partial.cuh"
#include "matmul.cuh"
#include "policy_loss.cuh"
#include "preference.cuh"
#include "reduce.cuh"
#include "reward.cuh"
#include "rmsnorm.cuh"
#include "rope.cuh"
#include "sampling.cuh"
#include "swiglu.cuh"
#include "value_head.cuh"
#include "trident/backend/cuda_backend.hpp"
#include "trident/backend/peer_ops.hpp"
#include "trident/core/log.hpp"
#include "trident/gpu/profiler.hpp"

namespace trident {
namespace {

using gpu::bf16;

// Data of a tensor that must have dtype t and exactly n elements.
template <class T>
T* data_of(TensorView v, DType t, size_t n, const char* what) {
  TRIDENT_CHECK(v.dtype == t, str(what, " is ", dtype_name(v.dtype), ", expected ", dtype_name(t)));
  TRIDENT_CHECK(v.numel == n, str(what, " has ", v.numel, " elements, expected ", n));
  TRIDENT_CHECK(n == 0 || v.data != nullptr, str(what, " is not given"));
  return v.as<T>();
}

// Activations and parameters (the compute dtype).
bf16* act(TensorView v, size_t n, const char* what) { return data_of<bf16>(v, DType::BF16, n, what); }
float* f32(TensorView v, size_t n, const char* what) { return data_of<float>(v, DType::F32, n, what); }

// As above for optional arguments: nullptr when the view is empty.
bf16* act_optional(TensorView v, size_t n, const char* what) { return v.empty() ? nullptr : act(v, n, what); }
// A norm backward's din_keep: null when not given, else checked (check_din_keep).
bf16* keep_of(TensorView din_keep, TensorView din_accum, const char* op) {
  if (din_keep.empty()) return nullptr;
  check_din_keep(din_keep, din_accum, op);
  return act(din_keep, din_accum.numel, op);
}
float* f32_optional(TensorView v, size_t n, const char* what) { return v.empty() ? nullptr : f32(v, n, what); }

// The position table may hold more rows (the model's block size) than this batch's T uses.
template <class Elem>
Elem* positions(TensorView wpe, DType t, int T, int C, const char* what) {
  if (wpe.empty()) return nullptr;
  TRIDENT_CHECK(wpe.numel >= static_cast<size_t>(T) * C, str(what, " has ", wpe.numel, " elements, fewer than T*C"));
  return data_of<Elem>(wpe, t, wpe.numel, what);
}

size_t rows_x_cols(int rows, int cols) { return static_cast<size_t>(rows) * static_cast<size_t>(cols); }

// StreamReplay on a CUDA stream: the first run queues the ops as they are, the second captures
// them into a graph, later runs launch it. A capture is dropped and taken again when `epoch`
// changes (op scratch was reallocated: the graph would read freed memory). Runs stay plain while
// ops are timed (the profiler's events) or launches synchronised (cuda.sync_launches): neither
// may happen inside a capture.
class CudaReplay final : public StreamReplay {
 public:
  CudaReplay(cudaStream_t stream, std::function<long()> epoch) : stream_(stream), epoch_(std::move(epoch)) {}
  ~CudaReplay() override { drop(); }

  void run(const std::function<void()>& queue_ops) override {
    if (!warmed_ || gpu::Profiler::instance().enabled() || gpu::sync_after_launch()) {
      queue_ops();
      warmed_ = true;
      return;
    }
    if (exec_ && captured_at_ != epoch_()) drop();
    if (!exec_) capture(queue_ops);
    CUDA_CHECK(cudaGraphLaunch(exec_, stream_));
  }

 private:
  void capture(const std::function<void()>& queue_ops) {
    CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      queue_ops();
    } catch (...) {
      cudaGraph_t partial = nullptr;
      static_cast<void>(cudaStreamEndCapture(stream_, &partial));
      if (partial) static_cast<void>(cudaGraphDestroy(partial));
      throw;
    }
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    const cudaError_t err = cudaGraphInstantiate(&exec_, graph, 0);
    static_cast<void>(cudaGraphDestroy(graph));
    CUDA_CHECK(err);
    captured_at_ = epoch_();
  }
  void drop() {
    if (!exec_) return;
    const cudaError_t err = cudaGraphExecDestroy(exec_);   // may run during unwinding: warn only
    if (err != cudaSuccess) log_warn(str("cuda backend: cudaGraphExecDestroy: ", gpu::cuda_error_text(err)));
    exec_ = nullptr;
  }

  cudaStream_t stream_;
  std::function<long()> epoch_;
  bool warmed_ = false;
  cudaGraphExec_t exec_ = nullptr;
  long captured_at_ = 0;
};

class CudaBackend final : public Backend, public PeerOps {
 public:
  CudaBackend(int device, const CudaOptions& options) : device_(device), telemetry_(device) {
    const int count = cuda_device_count();
    TRIDENT_CHECK(device >= 0 && device < count,
                  str("cuda backend: device ", device, " requested, ", count, " visible"));
    CUDA_CHECK(cudaSetDevice(device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&main_stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&transfer_stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&transfer_fork_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&transfer_join_, cudaEventDisableTiming));
    stream_ = main_stream_;
    side_enabled_ = options.side_stream;
    graphs_ = options.graphs;
    gpu::set_sync_after_launch(options.sync_launches);
    matmul_ = std::make_unique<gpu::Matmul>(options.gemm_autotune, options.gemm_log);
    gpu::choose_attention_engine(options.attention_kernels);   // its probe at set-up, not inside the first step
    gpu::set_attention_dkv_parts(options.attention_dkv_parts);
  }

  ~CudaBackend() override {
    // No fatal() while tearing down (this may run during unwinding): report and go on.
    warn_if(cudaStreamSynchronize(transfer_stream_), "cudaStreamSynchronize");
    warn_if(cudaStreamSynchronize(side_stream_), "cudaStreamSynchronize");
    warn_if(cudaStreamSynchronize(main_stream_), "cudaStreamSynchronize");
    matmul_.reset();
    for (Upload& u : uploads_) {
      if (u.done) warn_if(cudaEventDestroy(u.done), "cudaEventDestroy");
      if (u.host) warn_if(cudaFreeHost(u.host), "cudaFreeHost");
    }
    warn_if(cudaEventDestroy(fork_), "cudaEventDestroy");
    warn_if(cudaEventDestroy(join_), "cudaEventDestroy");
    warn_if(cudaEventDestroy(transfer_fork_), "cudaEventDestroy");
    warn_if(cudaEventDestroy(transfer_join_), "cudaEventDestroy");
    warn_if(cudaStreamDestroy(transfer_stream_), "cudaStreamDestroy");
    warn_if(cudaStreamDestroy(side_stream_), "cudaStreamDestroy");
    warn_if(cudaStreamDestroy(main_stream_), "cudaStreamDestroy");
  }

  std::string name() const override { return str("cuda:", device_); }
  DType compute_dtype() const override { return DType::BF16; }
  bool is_device() const override { return true; }

  // ---- memory and stream
  void* alloc(size_t bytes) override {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
      static_cast<void>(cudaGetLastError());  // out-of-memory is not sticky; clear it
      size_t free_bytes = 0, total_bytes = 0;
      static_cast<void>(cudaMemGetInfo(&free_bytes, &total_bytes));
      fatal(__FILE__, __LINE__, "cudaMalloc",
            str(gpu::cuda_error_text(err), " requesting ", bytes, " bytes on device ", device_, "; ", free_bytes,
                " of ", total_bytes, " bytes free, ", live_bytes_, " held by this backend"));
    }
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
    // Other streams (communication) may touch the buffer before any compute-stream event.
    wait_for_stream();
    std::lock_guard<std::mutex> lock(mutex_);
    ++allocations_;
    sizes_[p] = bytes;
    live_bytes_ += bytes;
    peak_bytes_ = std::max(peak_bytes_, live_bytes_);
    return p;
  }

  void release(void* p) override {
    if (!p) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = sizes_.find(p);
      TRIDENT_CHECK(it != sizes_.end(), "cuda backend: release() of a pointer alloc() did not return");
      live_bytes_ -= it->second;
      sizes_.erase(it);
    }
    wait_for_stream();  // queued kernels may still use it
    CUDA_CHECK(cudaFree(p));
  }

  size_t peak_bytes() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return peak_bytes_;
  }

  // ---- host memory and the transfer stream (the copy engines, beside the compute)
  void* alloc_host(size_t bytes) override {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
    if (err != cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      fatal(__FILE__, __LINE__, "cudaHostAlloc",
            str(gpu::cuda_error_text(err), " requesting ", bytes, " bytes of page-locked host memory"));
    }
    std::memset(p, 0, bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    ++allocations_;
    return p;
  }

  void release_host(void* p) override {
    if (!p) return;
    CUDA_CHECK(cudaStreamSynchronize(transfer_stream_));   // a queued transfer may still use it
    CUDA_CHECK(cudaFreeHost(p));
  }

  Stream transfer_stream() override { return Stream{transfer_stream_}; }

  void copy_to_host_async(void* dst, TensorView src) override {
    if (!src.numel) return;
    TRIDENT_CHECK(!on_side(), "cuda backend: copy_to_host_async between side_begin() and side_end()");
    gpu::ProfileScope prof(transfer_stream_, "copy to host", src.numel);
    queue_after(transfer_stream_, main_stream_, transfer_fork_);
    CUDA_CHECK(cudaMemcpyAsync(dst, src.data, src.bytes(), cudaMemcpyDeviceToHost, transfer_stream_));
  }

  void copy_from_host_async(TensorView dst, const void* src) override {
    if (!dst.numel) return;
    TRIDENT_CHECK(!on_side(), "cuda backend: copy_from_host_async between side_begin() and side_end()");
    gpu::ProfileScope prof(transfer_stream_, "copy from host", dst.numel);
    queue_after(transfer_stream_, main_stream_, transfer_fork_);
    CUDA_CHECK(cudaMemcpyAsync(dst.data, src, dst.bytes(), cudaMemcpyHostToDevice, transfer_stream_));
  }

  void join_transfers() override {
    TRIDENT_CHECK(!on_side(), "cuda backend: join_transfers between side_begin() and side_end()");
    queue_after(main_stream_, transfer_stream_, transfer_join_);
  }

  void zero(TensorView t) override {
    gpu::ProfileScope prof(stream_, "zero", t.numel);
    if (t.numel) CUDA_CHECK(cudaMemsetAsync(t.data, 0, t.bytes(), stream_));
  }

  void copy_to_host(void* dst, TensorView src) override {
    if (!src.numel) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, src.data, src.bytes(), cudaMemcpyDeviceToHost, stream_));
    wait_for_stream();
  }

  void copy_from_host(TensorView dst, const void* src) override {
    if (!dst.numel) return;
    TRIDENT_CHECK(!on_side(), "cuda backend: copy_from_host between side_begin() and side_end()");
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, src) != cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      attr.type = cudaMemoryTypeHost;   // unknown: be safe
    }
    // The caller may reuse or free src as soon as this returns. A small pageable source (a
    // step's batch) is staged in pinned memory first, so that the copy is queued in stream order
    // without the host waiting for the work before it (the driver may synchronize a pageable
    // copy with the stream); larger ones (checkpoints) are copied from where they are and, from
    // pinned memory, waited for.
    if (attr.type == cudaMemoryTypeUnregistered && dst.bytes() <= kStagedUploadBytes) {
      Upload& u = uploads_[upload_seq_++ % 2];
      if (u.bytes < dst.bytes()) {   // grows while warming up only: the batch has one size
        if (u.host) {
          CUDA_CHECK(cudaEventSynchronize(u.done));   // its last copy has read it
          CUDA_CHECK(cudaFreeHost(u.host));
        }
        CUDA_CHECK(cudaMallocHost(&u.host, dst.bytes()));
        u.bytes = dst.bytes();
        if (!u.done) CUDA_CHECK(cudaEventCreateWithFlags(&u.done, cudaEventDisableTiming));
        std::lock_guard<std::mutex> lock(mutex_);
        ++allocations_;
      } else {
        CUDA_CHECK(cudaEventSynchronize(u.done));   // its copy of two uploads ago has run
      }
      std::memcpy(u.host, src, dst.bytes());
      CUDA_CHECK(cudaMemcpyAsync(dst.data, u.host, dst.bytes(), cudaMemcpyHostToDevice, stream_));
      CUDA_CHECK(cudaEventRecord(u.done, stream_));
      return;
    }
    CUDA_CHECK(cudaMemcpyAsync(dst.data, src, dst.bytes(), cudaMemcpyHostToDevice, stream_));
    if (attr.type != cudaMemoryTypeUnregistered) wait_for_stream();
  }


  void copy(TensorView dst, TensorView src) override {
    gpu::ProfileScope prof(stream_, "copy", src.numel);
    TRIDENT_CHECK(dst.numel == src.numel, str("copy: ", src.numel, " elements into ", dst.numel));
    if (!src.numel) return;
    if (dst.dtype == src.dtype) {
      CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, src.bytes(), cudaMemcpyDeviceToDevice, stream_));
    } else if (dst.dtype == DType::BF16 && src.dtype == DType::F32) {
      gpu::convert(dst.as<bf16>(), src.as<float>(), src.numel, stream_);
    } else if (dst.dtype == DType::F32 && src.dtype == DType::BF16) {
      gpu::convert(dst.as<float>(), src.as<bf16>(), src.numel, stream_);
    } else {
      TRIDENT_FATAL(str("copy: no conversion from ", dtype_name(src.dtype), " to ", dtype_name(dst.dtype)));
    }
  }

  Stream stream() override {
    TRIDENT_CHECK(!on_side(), "cuda backend: the stream was asked for between side_begin() and side_end()");
    return Stream{stream_};
  }

  void set_gemm_sm_margin(int sms) override { matmul_->set_sm_margin(sms); }

  // ---- concurrency: the side stream, with its own scratch
  void side_begin() override {
    TRIDENT_CHECK(!on_side(), "cuda backend: side_begin() twice");
    if (!side_enabled_) return;
    queue_after(side_stream_, main_stream_, fork_);
    stream_ = side_stream_;
    scratch_ = &side_scratch_;
    side_used_ = true;
  }
  void side_end() override {
    stream_ = main_stream_;
    scratch_ = &main_scratch_;
  }
  void side_join() override {
    TRIDENT_CHECK(!on_side(), "cuda backend: side_join() before side_end()");
    if (!side_used_) return;
    queue_after(main_stream_, side_stream_, join_);
    side_used_ = false;
  }
  std::unique_ptr<StreamReplay> make_replay() override {
    TRIDENT_CHECK(!on_side(), "cuda backend: make_replay between side_begin() and side_end()");
    if (!graphs_) return std::make_unique<PlainReplay>();
    return std::make_unique<CudaReplay>(main_stream_, [this] { return main_scratch_.growths() + side_scratch_.growths(); });
  }
  void set_profiling(bool on) override { gpu::Profiler::instance().enable(on); }
  void start_telemetry() override { telemetry_.start(); }
  GpuTelemetry stop_telemetry() override { return telemetry_.stop(); }
  std::vector<OpTime> take_profile() override { return gpu::Profiler::instance().take(); }
  void synchronize() override { wait_for_stream(); }
  BackendCounters counters() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return BackendCounters{allocations_ + main_scratch_.growths() + side_scratch_.growths(), matmul_->plans_built(),
                           host_waits_};
  }

  // ---- embedding
  void encoder_fwd(TensorView out, const int32_t* tokens, TensorView wte, TensorView wpe, int B, int T, int C,
                   int vocab_start, int v_local, const int32_t* doc_start) override {
    gpu::ProfileScope prof(stream_, "encoder_fwd", B * T, C);
    TRIDENT_CHECK(tokens != nullptr, "encoder_fwd: tokens not given");
    gpu::encoder_fwd(act(out, rows_x_cols(B * T, C), "encoder_fwd: out"), tokens,
                     act(wte, rows_x_cols(v_local, C), "encoder_fwd: wte"),
                     positions<bf16>(wpe, DType::BF16, T, C, "encoder_fwd: wpe"), doc_start, B, T, C, vocab_start,
                     v_local, stream_);
  }

  void encoder_bwd(TensorView dwte, TensorView dwpe, TensorView dout, const int32_t* tokens, int B, int T, int C,
                   int vocab_start, int v_local, const int32_t* doc_start) override {
    gpu::ProfileScope prof(stream_, "encoder_bwd", B * T, C);
    TRIDENT_CHECK(tokens != nullptr, "encoder_bwd: tokens not given");
    gpu::encoder_bwd(f32(dwte, rows_x_cols(v_local, C), "encoder_bwd: dwte"),
                     positions<float>(dwpe, DType::F32, T, C, "encoder_bwd: dwpe"),
                     act(dout, rows_x_cols(B * T, C), "encoder_bwd: dout"), tokens, doc_start, B, T, C, vocab_start,
                     v_local, *scratch_, stream_);
  }

  // ---- LayerNorm
  void layernorm_fwd(TensorView out, TensorView mean, TensorView rstd, TensorView in, TensorView w, TensorView b, int N,
                     int C, float eps) override {
    gpu::ProfileScope prof(stream_, "layernorm_fwd", N, C);
    const size_t NC = rows_x_cols(N, C);
    gpu::layernorm_fwd(act(out, NC, "layernorm_fwd: out"), f32(mean, N, "layernorm_fwd: mean"),
                       f32(rstd, N, "layernorm_fwd: rstd"), act(in, NC, "layernorm_fwd: in"),
                       act(w, C, "layernorm_fwd: w"), act(b, C, "layernorm_fwd: b"), N, C, eps, stream_);
  }

  void add_layernorm_fwd(TensorView sum, TensorView out, TensorView mean, TensorView rstd, TensorView a,
                         TensorView residual, TensorView w, TensorView b, int N, int C, float eps) override {
    add_layernorm_fwd(sum, out, mean, rstd, a, TensorView{}, residual, w, b, N, C, eps, PeerRelease{});
  }

  void add_layernorm_fwd(TensorView sum, TensorView out, TensorView mean, TensorView rstd, TensorView a,
                         TensorView a_peer, TensorView residual, TensorView w, TensorView b, int N, int C,
                         float eps, PeerRelease release) override {
    TRIDENT_CHECK(!release || !a_peer.empty(), "add_layernorm_fwd: a release without a_peer");
    gpu::ProfileScope prof(stream_, "add_layernorm_fwd", N, C);
    const size_t NC = rows_x_cols(N, C);
    gpu::add_layernorm_fwd(act(sum, NC, "add_layernorm_fwd: sum"), act(out, NC, "add_layernorm_fwd: out"),
                           f32(mean, N, "add_layernorm_fwd: mean"), f32(rstd, N, "add_layernorm_fwd: rstd"),
                           act(a, NC, "add_layernorm_fwd: a"), act_optional(a_peer, NC, "add_layernorm_fwd: a_peer"),
                           act(residual, NC, "add_layernorm_fwd: residual"),
                           act(w, C, "add_layernorm_fwd: w"), act(b, C, "add_layernorm_fwd: b"), N, C, eps, release,
                           stream_);
  }

  void layernorm_bwd(TensorView din_accum, TensorView dw, TensorView db, TensorView dsum, TensorView dout,
                     TensorView in, TensorView w, TensorView mean, TensorView rstd, int N, int C,
                     TensorView din_keep = {}) override {
    layernorm_bwd(din_accum, dw, db, dsum, dout, TensorView{}, in, w, mean, rstd, N, C, PeerRelease{}, din_keep);
  }

  void layernorm_bwd(TensorView din_accum, TensorView dw, TensorView db, TensorView dsum, TensorView dout,
                     TensorView dout_peer, TensorView in, TensorView w, TensorView mean, TensorView rstd, int N,
                     int C, PeerRelease release) override {
    layernorm_bwd(din_accum, dw, db, dsum, dout, dout_peer, in, w, mean, rstd, N, C, release, TensorView{});
  }

  void layernorm_bwd(TensorView din_accum, TensorView dw, TensorView db, TensorView dsum, TensorView dout,
                     TensorView dout_peer, TensorView in, TensorView w, TensorView mean, TensorView rstd, int N,
                     int C, PeerRelease release, TensorView din_keep) {
    TRIDENT_CHECK(!release || !dout_peer.empty(), "layernorm_bwd: a release without dout_peer");
    gpu::ProfileScope prof(stream_, "layernorm_bwd", N, C);
    const size_t NC = rows_x_cols(N, C);
    gpu::layernorm_bwd(act(din_accum, NC, "layernorm_bwd: din_accum"), keep_of(din_keep, din_accum, "layernorm_bwd"),
                       f32(dw, C, "layernorm_bwd: dw"),
                       f32(db, C, "layernorm_bwd: db"), f32_optional(dsum, C, "layernorm_bwd: dsum"),
                       act(dout, NC, "layernorm_bwd: dout"), act_optional(dout_peer, NC, "layernorm_bwd: dout_peer"),
                       act(in, NC, "layernorm_bwd: in"), act(w, C, "layernorm_bwd: w"),
                       f32(mean, N, "layernorm_bwd: mean"), f32(rstd, N, "layernorm_bwd: rstd"), N, C, release,
                       *scratch_, stream_);
  }

  // ---- RMSNorm
  void rmsnorm_fwd(TensorView out, TensorView rstd, TensorView in, TensorView w, int N, int C, float eps) override {
    gpu::ProfileScope prof(stream_, "rmsnorm_fwd", N, C);
    const size_t NC = rows_x_cols(N, C);
    gpu::rmsnorm_fwd(act(out, NC, "rmsnorm_fwd: out"), f32(rstd, N, "rmsnorm_fwd: rstd"),
                     act(in, NC, "rmsnorm_fwd: in"), act(w, C, "rmsnorm_fwd: w"), N, C, eps, stream_);
  }

  void add_rmsnorm_fwd(TensorView sum, TensorView out, TensorView rstd, TensorView a, TensorView residual, TensorView w,
                       int N, int C, float eps) override {
    add_rmsnorm_fwd(sum, out, rstd, a, TensorView{}, residual, w, N, C, eps, PeerRelease{});
  }

  void add_rmsnorm_fwd(TensorView sum, TensorView out, TensorView rstd, TensorView a, TensorView a_peer,
                       TensorView residual, TensorView w, int N, int C, float eps, PeerRelease release) override {
    TRIDENT_CHECK(!release || !a_peer.empty(), "add_rmsnorm_fwd: a release without a_peer");
    gpu::ProfileScope prof(stream_, "add_rmsnorm_fwd", N, C);
    const size_t NC = rows_x_cols(N, C);
    gpu::add_rmsnorm_fwd(act(sum, NC, "add_rmsnorm_fwd: sum"), act(out, NC, "add_rmsnorm_fwd: out"),
                         f32(rstd, N, "add_rmsnorm_fwd: rstd"), act(a, NC, "add_rmsnorm_fwd: a"),
                         act_optional(a_peer, NC, "add_rmsnorm_fwd: a_peer"),
                         act(residual, NC, "add_rmsnorm_fwd: residual"), act(w, C, "add_rmsnorm_fwd: w"), N, C, eps,
                         release, stream_);
  }

  void rmsnorm_bwd(TensorView din_accum, TensorView dw, TensorView dout, TensorView in, TensorView w, TensorView rstd,
                   int N, int C, TensorView din_keep = {}) override {
    rmsnorm_bwd(din_accum, dw, dout, TensorView{}, in, w, rstd, N, C, PeerRelease{}, din_keep);
  }

  void rmsnorm_bwd(TensorView din_accum, TensorView dw, TensorView dout, TensorView dout_peer, TensorView in,
                   TensorView w, TensorView rstd, int N, int C, PeerRelease release) override {
    rmsnorm_bwd(din_accum, dw, dout, dout_peer, in, w, rstd, N, C, release, TensorView{});
  }

  void rmsnorm_bwd(TensorView din_accum, TensorView dw, TensorView dout, TensorView dout_peer, TensorView in,
                   TensorView w, TensorView rstd, int N, int C, PeerRelease release, TensorView din_keep) {
    TRIDENT_CHECK(!release || !dout_peer.empty(), "rmsnorm_bwd: a release without dout_peer");
    gpu::ProfileScope prof(stream_, "rmsnorm_bwd", N, C);
    const size_t NC = rows_x_cols(N, C);
    gpu::rmsnorm_bwd(act(din_accum, NC, "rmsnorm_bwd: din_accum"), keep_of(din_keep, din_accum, "rmsnorm_bwd"),
                     f32(dw, C, "rmsnorm_bwd: dw"),
                     act(dout, NC, "rmsnorm_bwd: dout"), act_optional(dout_peer, NC, "rmsnorm_bwd: dout_peer"),
                     act(in, NC, "rmsnorm_bwd: in"), act(w, C, "rmsnorm_bwd: w"), f32(rstd, N, "rmsnorm_bwd: rstd"),
                     N, C, release, *scratch_, stream_);
  }

  void sum_partials(TensorView out, const std::vector<TensorView>& parts) override {
    TRIDENT_CHECK(!parts.empty() && parts.size() <= static_cast<size_t>(kMaxPartials),
                  str("sum_partials: ", parts.size(), " partials (1 to ", kMaxPartials, ")"));
    gpu::ProfileScope prof(stream_, "sum_partials", out.numel, static_cast<long>(parts.size()));
    const size_t n = out.numel;
    gpu::Partials p;
    p.count = static_cast<int>(parts.size());
    for (int i = 0; i < p.count; ++i) p.part[i] = act(parts[static_cast<size_t>(i)], n, "sum_partials: a partial");
    gpu::sum_partials(act(out, n, "sum_partials: out"), p, n, stream_);
  }

  // ---- elementwise
  void add(TensorView out, TensorView a, TensorView b) override {
    gpu::ProfileScope prof(stream_, "add", out.numel);
    const size_t n = out.numel;
    gpu::add(act(out, n, "add: out"), act(a, n, "add: a"), act(b, n, "add: b"), n, stream_);
  }

  void gelu_fwd(TensorView out, TensorView in) override {
    gpu::ProfileScope prof(stream_, "gelu_fwd", out.numel);
    const size_t n = out.numel;
    gpu::gelu_fwd(act(out, n, "gelu_fwd: out"), act(in, n, "gelu_fwd: in"), n, stream_);
  }

  void gelu_bwd(TensorView din, TensorView dout, TensorView pre) override {
    gpu::ProfileScope prof(stream_, "gelu_bwd", din.numel);
    const size_t n = din.numel;
    gpu::gelu_bwd(act(din, n, "gelu_bwd: din"), act(dout, n, "gelu_bwd: dout"), act(pre, n, "gelu_bwd: pre"), n,
                  stream_);
  }

  void swiglu_fwd(TensorView out, TensorView in, int N, int F) override {
    gpu::ProfileScope prof(stream_, "swiglu_fwd", N, F);
    const size_t NF = rows_x_cols(N, F);
    gpu::swiglu_fwd(act(out, NF, "swiglu_fwd: out"), act(in, 2 * NF, "swiglu_fwd: in"), N, F, stream_);
  }

  void swiglu_bwd(TensorView din, TensorView dout, TensorView in, int N, int F) override {
    gpu::ProfileScope prof(stream_, "swiglu_bwd", N, F);
    const size_t NF = rows_x_cols(N, F);
    gpu::swiglu_bwd(act(din, 2 * NF, "swiglu_bwd: din"), act(dout, NF, "swiglu_bwd: dout"),
                    act(in, 2 * NF, "swiglu_bwd: in"), N, F, stream_);
  }

  // ---- GEMMs
  void matmul_fwd(TensorView out, TensorView in, TensorView w, TensorView bias, int N, int K, int M) override {
    check_not_side("matmul_fwd");
    gpu::ProfileScope prof(stream_, "matmul_fwd", N, K, M);
    matmul_->forward(act(out, rows_x_cols(N, M), "matmul_fwd: out"), nullptr,
                     act(in, rows_x_cols(N, K), "matmul_fwd: in"), act(w, rows_x_cols(M, K), "matmul_fwd: w"),
                     act_optional(bias, M, "matmul_fwd: bias"), N, K, M, stream_);
  }

  void matmul_gelu_fwd(TensorView out, TensorView pre, TensorView in, TensorView w, TensorView bias, int N, int K,
                       int M) override {
    check_not_side("matmul_gelu_fwd");
    gpu::ProfileScope prof(stream_, "matmul_gelu_fwd", N, K, M);
    matmul_->forward(act(out, rows_x_cols(N, M), "matmul_gelu_fwd: out"),
                     act(pre, rows_x_cols(N, M), "matmul_gelu_fwd: pre"),
                     act(in, rows_x_cols(N, K), "matmul_gelu_fwd: in"), act(w, rows_x_cols(M, K), "matmul_gelu_fwd: w"),
                     act_optional(bias, M, "matmul_gelu_fwd: bias"), N, K, M, stream_);
  }

  void matmul_bwd(TensorView din, TensorView dw, TensorView dbias, TensorView dout, TensorView in, TensorView w, int N,
                  int K, int M) override {
    if (!din.empty() || !dw.empty()) check_not_side("matmul_bwd");
    gpu::ProfileScope prof(stream_, "matmul_bwd", N, K, M);
    matmul_->backward(act_optional(din, rows_x_cols(N, K), "matmul_bwd: din"),
                      f32_optional(dw, rows_x_cols(M, K), "matmul_bwd: dw"),
                      f32_optional(dbias, M, "matmul_bwd: dbias"), act(dout, rows_x_cols(N, M), "matmul_bwd: dout"),
                      act(in, rows_x_cols(N, K), "matmul_bwd: in"), act(w, rows_x_cols(M, K), "matmul_bwd: w"), nullptr,
                      N, K, M, *scratch_, stream_);
  }

  void matmul_gelu_bwd(TensorView din, TensorView dw, TensorView dbias, TensorView dout, TensorView in, TensorView w,
                       TensorView pre, int N, int K, int M) override {
    check_not_side("matmul_gelu_bwd");
    gpu::ProfileScope prof(stream_, "matmul_gelu_bwd", N, K, M);
    matmul_->backward(act(din, rows_x_cols(N, K), "matmul_gelu_bwd: din"),
                      f32_optional(dw, rows_x_cols(M, K), "matmul_gelu_bwd: dw"),
                      f32_optional(dbias, M, "matmul_gelu_bwd: dbias"),
                      act(dout, rows_x_cols(N, M), "matmul_gelu_bwd: dout"),
                      act(in, rows_x_cols(N, K), "matmul_gelu_bwd: in"), act(w, rows_x_cols(M, K), "matmul_gelu_bwd: w"),
                      act(pre, rows_x_cols(N, K), "matmul_gelu_bwd: pre"), N, K, M, *scratch_, stream_);
  }

  // ---- attention
  void attention_fwd(TensorView out, TensorView lse, TensorView qkv, int B, int T, int NH, int NKV, int HS,
                     const int32_t* doc_start) override {
    gpu::ProfileScope prof(stream_, "attention_fwd", B * T, NH, HS);
    const size_t BT = rows_x_cols(B, T), C = rows_x_cols(NH, HS), C_qkv = rows_x_cols(NH + 2 * NKV, HS);
    gpu::attention_fwd(act(out, BT * C, "attention_fwd: out"), f32(lse, BT * NH, "attention_fwd: lse"),
                       act(qkv, BT * C_qkv, "attention_fwd: qkv"), doc_start, B, T, NH, NKV, HS, stream_);
  }

  void attention_bwd(TensorView dqkv, TensorView dbias, TensorView dout, TensorView qkv, TensorView out, TensorView lse,
                     int B, int T, int NH, int NKV, int HS, const int32_t* doc_start, TensorView rope = {}) override {
    gpu::ProfileScope prof(stream_, "attention_bwd", B * T, NH, HS);
    TRIDENT_CHECK(rope.empty() || dbias.empty(), "attention_bwd: rope with dbias (a bias added before the rotation)");
    if (!rope.empty()) check_rope_args(rope, T, NH, NKV, HS, 0, "attention_bwd");
    const size_t BT = rows_x_cols(B, T), C = rows_x_cols(NH, HS), C_qkv = rows_x_cols(NH + 2 * NKV, HS);
    gpu::attention_bwd(act(dqkv, BT * C_qkv, "attention_bwd: dqkv"),
                       f32_optional(dbias, C_qkv, "attention_bwd: dbias"), act(dout, BT * C, "attention_bwd: dout"),
                       act(qkv, BT * C_qkv, "attention_bwd: qkv"), act(out, BT * C, "attention_bwd: out"),
                       f32(lse, BT * NH, "attention_bwd: lse"), doc_start,
                       rope.empty() ? nullptr : f32(rope, rope.numel, "attention_bwd: rope"), B, T, NH, NKV, HS,
                       *scratch_, stream_);
  }

  void attention_decode(TensorView out, TensorView k_cache, TensorView v_cache, TensorView qkv, const int32_t* rows,
                        int N, int S, int Tmax, int NH, int NKV, int HS) override {
    gpu::ProfileScope prof(stream_, "attention_decode", N, NH, HS);
    const size_t C = rows_x_cols(NH, HS), C_qkv = rows_x_cols(NH + 2 * NKV, HS);
    const size_t cache = rows_x_cols(S, Tmax) * rows_x_cols(NKV, HS);
    gpu::attention_decode(act(out, rows_x_cols(N, C), "attention_decode: out"),
                          act(k_cache, cache, "attention_decode: k_cache"),
                          act(v_cache, cache, "attention_decode: v_cache"),
                          act(qkv, rows_x_cols(N, C_qkv), "attention_decode: qkv"), rows, N, S, Tmax, NH, NKV, HS,
                          stream_);
  }

  // ---- sampling
  void sample_shard(TensorView stats, TensorView logits, const int32_t* keys, uint64_t seed, float temperature, int N,
                    int v_local, int v_valid, int vocab_start) override {
    gpu::ProfileScope prof(stream_, "sample_shard", N, v_local);
    check_vocab(v_local, v_valid, "sample_shard");
    TRIDENT_CHECK(keys != nullptr || N == 0, "sample_shard: keys not given");
    gpu::sample_shard(f32(stats, rows_x_cols(N, kSampleStats), "sample_shard: stats"),
                      act(logits, rows_x_cols(N, v_local), "sample_shard: logits"), keys, seed, temperature, N,
                      v_local, v_valid, vocab_start, stream_);
  }

  // ---- rotary position embedding
  void rope_fwd(TensorView qkv, TensorView rope, int B, int T, int NH, int NKV, int HS, int pos0,
                const int32_t* doc_start) override {
    gpu::ProfileScope prof(stream_, "rope_fwd", B * T, NH + NKV, HS);
    check_rope_args(rope, T, NH, NKV, HS, pos0, "rope_fwd");
    const size_t n = rows_x_cols(B, T) * rows_x_cols(NH + 2 * NKV, HS);
    gpu::rope_rotate(act(qkv, n, "rope_fwd: qkv"), f32(rope, rope.numel, "rope_fwd: rope"), doc_start, B, T, NH, NKV,
                     HS, pos0, 1.0f, stream_);
  }

  void rope_bwd(TensorView dqkv, TensorView rope, int B, int T, int NH, int NKV, int HS, int pos0,
                const int32_t* doc_start) override {
    gpu::ProfileScope prof(stream_, "rope_bwd", B * T, NH + NKV, HS);
    check_rope_args(rope, T, NH, NKV, HS, pos0, "rope_bwd");
    const size_t n = rows_x_cols(B, T) * rows_x_cols(NH + 2 * NKV, HS);
    gpu::rope_rotate(act(dqkv, n, "rope_bwd: dqkv"), f32(rope, rope.numel, "rope_bwd: rope"), doc_start, B, T, NH,
                     NKV, HS, pos0, -1.0f, stream_);
  }

  // ---- cross-entropy
  void xent_max(TensorView rowmax, TensorView logits, int N, int v_local, int v_valid) override {
    gpu::ProfileScope prof(stream_, "xent_max", N, v_local);
    check_vocab(v_local, v_valid, "xent_max");
    gpu::xent_max(f32(rowmax, N, "xent_max: rowmax"), act(logits, rows_x_cols(N, v_local), "xent_max: logits"), N,
                  v_local, v_valid, stream_);
  }

  void xent_stats(TensorView stats, TensorView logits, TensorView rowmax, const int32_t* targets, int N, int v_local,
                  int v_valid, int vocab_start) override {
    gpu::ProfileScope prof(stream_, "xent_stats", N, v_local);
    check_vocab(v_local, v_valid, "xent_stats");
    TRIDENT_CHECK(targets != nullptr, "xent_stats: targets not given");
    gpu::xent_stats(f32(stats, rows_x_cols(N, 2), "xent_stats: stats"),
                    act(logits, rows_x_cols(N, v_local), "xent_stats: logits"), f32(rowmax, N, "xent_stats: rowmax"),
                    targets, N, v_local, v_valid, vocab_start, stream_);
  }

  void xent_bwd(TensorView losses, TensorView logits, TensorView rowmax, TensorView stats, const int32_t* targets,
                int N, int v_local, int v_valid, int vocab_start, float dloss) override {
    gpu::ProfileScope prof(stream_, "xent_bwd", N, v_local);
    check_vocab(v_local, v_valid, "xent_bwd");
    TRIDENT_CHECK(targets != nullptr, "xent_bwd: targets not given");
    gpu::xent_bwd(f32_optional(losses, N, "xent_bwd: losses"), act(logits, rows_x_cols(N, v_local), "xent_bwd: logits"),
                  f32(rowmax, N, "xent_bwd: rowmax"), f32(stats, rows_x_cols(N, 2), "xent_bwd: stats"), targets, N,
                  v_local, v_valid, vocab_start, dloss, stream_);
  }

  void xent_entropy_sums(TensorView entropy_sums, TensorView logits, TensorView rowmax, int N, int v_local,
                         int v_valid) override {
    gpu::ProfileScope prof(stream_, "xent_entropy_sums", N, v_local);
    check_vocab(v_local, v_valid, "xent_entropy_sums");
    gpu::xent_entropy_sums(f32(entropy_sums, rows_x_cols(N, 2), "xent_entropy_sums: entropy_sums"),
                           act(logits, rows_x_cols(N, v_local), "xent_entropy_sums: logits"),
                           f32(rowmax, N, "xent_entropy_sums: rowmax"), N, v_local, v_valid, stream_);
  }

  void xent_fused(TensorView losses, TensorView logits, TensorView /*rowmax*/, TensorView /*stats*/,
                  const int32_t* targets, int N, int v_local, int v_valid, float dloss) override {
    gpu::ProfileScope prof(stream_, "xent_fused", N, v_local);
    check_vocab(v_local, v_valid, "xent_fused");
    TRIDENT_CHECK(targets != nullptr, "xent_fused: targets not given");
    gpu::xent_fused(f32_optional(losses, N, "xent_fused: losses"),
                    act(logits, rows_x_cols(N, v_local), "xent_fused: logits"), targets, N, v_local, v_valid, dloss,
                    stream_);
  }

  // ---- sequence-level losses
  void segment_sum(TensorView out, TensorView in, int S, int len) override {
    gpu::ProfileScope prof(stream_, "segment_sum", S, len);
    gpu::segment_sum(f32(out, S, "segment_sum: out"), f32(in, rows_x_cols(S, len), "segment_sum: in"), S, len,
                     stream_);
  }

  void scale_rows(TensorView x, TensorView w, int rows, int cols) override {
    gpu::ProfileScope prof(stream_, "scale_rows", rows, cols);
    gpu::scale_rows(act(x, rows_x_cols(rows, cols), "scale_rows: x"), f32(w, rows, "scale_rows: w"), rows, cols,
                    stream_);
  }

  void dpo_loss(TensorView acc, TensorView row_weights, TensorView policy_nll, TensorView ref_nll,
                const int32_t* targets, int pairs, int T, const DpoArgs& a) override {
    gpu::ProfileScope prof(stream_, "dpo_loss", pairs, T);
    TRIDENT_CHECK(a.loss != DpoLoss::Ipo || targets != nullptr, "dpo_loss: IPO needs the targets");
    gpu::dpo_loss(f32(acc, 5, "dpo_loss: acc"), f32_optional(row_weights, rows_x_cols(2 * pairs, T), "dpo_loss: row_weights"),
                  f32(policy_nll, 2 * pairs, "dpo_loss: policy_nll"), f32(ref_nll, 2 * pairs, "dpo_loss: ref_nll"),
                  targets, pairs, T, a, stream_);
  }

  void policy_loss(TensorView acc, TensorView weights, TensorView nll, TensorView old_logp, TensorView coef,
                   TensorView coef_adv, TensorView ref_nll, TensorView entropy_sums, int N,
                   const PolicyArgs& a) override {
    gpu::ProfileScope prof(stream_, "policy_loss", N, 1);
    gpu::policy_loss(f32(acc, 5, "policy_loss: acc"), f32_optional(weights, N, "policy_loss: weights"),
                     f32(nll, N, "policy_loss: nll"), f32(old_logp, N, "policy_loss: old_logp"),
                     f32(coef, N, "policy_loss: coef"), f32(coef_adv, N, "policy_loss: coef_adv"),
                     a.kl_beta != 0 ? f32(ref_nll, N, "policy_loss: ref_nll") : nullptr,
                     f32_optional(entropy_sums, rows_x_cols(N, 2), "policy_loss: entropy_sums"), N, a, stream_);
  }

  void reward_fwd(TensorView scores, TensorView dscores, TensorView stats, TensorView lnf, TensorView w,
                  const int32_t* targets, int B, int T, int C, float dloss) override {
    gpu::ProfileScope prof(stream_, "reward_fwd", B, C);
    TRIDENT_CHECK(B > 0 && B % 2 == 0, str("reward_fwd: B = ", B, " sequences do not form pairs"));
    TRIDENT_CHECK(targets != nullptr, "reward_fwd: targets not given");
    gpu::reward_fwd(f32(scores, B, "reward_fwd: scores"), f32_optional(dscores, B, "reward_fwd: dscores"),
                    f32(stats, 3, "reward_fwd: stats"), act(lnf, rows_x_cols(B * T, C), "reward_fwd: lnf"),
                    act(w, C, "reward_fwd: w"), targets, B, T, C, dloss, stream_);
  }

  void reward_bwd(TensorView dlnf, TensorView dw, TensorView dscores, TensorView lnf, TensorView w,
                  const int32_t* targets, int B, int T, int C) override {
    gpu::ProfileScope prof(stream_, "reward_bwd", B, C);
    TRIDENT_CHECK(B > 0 && B % 2 == 0, str("reward_bwd: B = ", B, " sequences do not form pairs"));
    TRIDENT_CHECK(targets != nullptr, "reward_bwd: targets not given");
    gpu::reward_bwd(act(dlnf, rows_x_cols(B * T, C), "reward_bwd: dlnf"), f32(dw, C, "reward_bwd: dw"),
                    f32(dscores, B, "reward_bwd: dscores"), act(lnf, rows_x_cols(B * T, C), "reward_bwd: lnf"),
                    act(w, C, "reward_bwd: w"), targets, B, T, C, stream_);
  }

  void value_fwd(TensorView values, TensorView dvalues, TensorView acc, TensorView lnf, TensorView w,
                 TensorView old_values, TensorView returns, TensorView coef, int N, int C, const ValueArgs& a) override {
    gpu::ProfileScope prof(stream_, "value_fwd", N, C);
    const bool loss = !coef.empty();
    gpu::value_fwd(f32(values, N, "value_fwd: values"), loss ? f32_optional(dvalues, N, "value_fwd: dvalues") : nullptr,
                   loss ? f32(acc, 5, "value_fwd: acc") : nullptr, act(lnf, rows_x_cols(N, C), "value_fwd: lnf"),
                   act(w, C, "value_fwd: w"), loss ? f32(old_values, N, "value_fwd: old_values") : nullptr,
                   loss ? f32(returns, N, "value_fwd: returns") : nullptr, loss ? f32(coef, N, "value_fwd: coef") : nullptr,
                   N, C, a, stream_);
  }

  void value_bwd(TensorView dlnf, TensorView dw, TensorView dvalues, TensorView lnf, TensorView w, int N,
                 int C) override {
    gpu::ProfileScope prof(stream_, "value_bwd", N, C);
    gpu::value_bwd(act(dlnf, rows_x_cols(N, C), "value_bwd: dlnf"), f32(dw, C, "value_bwd: dw"),
                   f32(dvalues, N, "value_bwd: dvalues"), act(lnf, rows_x_cols(N, C), "value_bwd: lnf"),
                   act(w, C, "value_bwd: w"), N, C, stream_);
  }

  // ---- reductions and optimizer
  void sum_squares(TensorView acc, TensorView x) override {
    gpu::ProfileScope prof(stream_, "sum_squares", x.numel);
    float* a = f32(acc, 1, "sum_squares: acc");
    if (x.dtype == DType::BF16) {
      gpu::sum_squares(a, act(x, x.numel, "sum_squares: x"), x.numel, *scratch_, stream_);
    } else {
      gpu::sum_squares(a, f32(x, x.numel, "sum_squares: x"), x.numel, *scratch_, stream_);
    }
  }

  void sum(TensorView acc, TensorView x) override {
    gpu::ProfileScope prof(stream_, "sum", x.numel);
    gpu::sum(f32(acc, 1, "sum: acc"), f32(x, x.numel, "sum: x"), x.numel, *scratch_, stream_);
  }

  void scale(TensorView x, float s) override {
    gpu::ProfileScope prof(stream_, "scale", x.numel);
    gpu::scale(f32(x, x.numel, "scale: x"), s, x.numel, stream_);
  }

  void accumulate(TensorView acc, TensorView x) override {
    gpu::ProfileScope prof(stream_, "accumulate", acc.numel);
    gpu::accumulate(f32(acc, acc.numel, "accumulate: acc"), f32(x, acc.numel, "accumulate: x"), acc.numel, stream_);
  }

  void adamw(TensorView param, TensorView master, TensorView m, TensorView v, TensorView grad,
             const AdamWArgs& a) override {
    gpu::ProfileScope prof(stream_, "adamw", master.numel);
    const size_t n = master.numel;
    gpu::adamw(act_optional(param, n, "adamw: param"), f32(master, n, "adamw: master"), f32(m, n, "adamw: m"),
               f32(v, n, "adamw: v"), f32(grad, n, "adamw: grad"), n, a, stream_);
  }

  void sum_squares_multi(TensorView acc, TensorView x, TensorView pieces) override {
    gpu::ProfileScope prof(stream_, "sum_squares_multi", pieces.numel / kPieceWords);
    gpu::sum_squares_multi(f32(acc, 1, "sum_squares_multi: acc"), f32(x, x.numel, "sum_squares_multi: x"),
                           piece_table(pieces, "sum_squares_multi"), static_cast<int>(pieces.numel / kPieceWords),
                           *scratch_, stream_);
  }

  void adamw_multi(TensorView param, TensorView master, TensorView m, TensorView v, TensorView grad,
                   TensorView pieces, const AdamWArgs& a, TensorView norm_sq, float clip) override {
    gpu::ProfileScope prof(stream_, "adamw_multi", pieces.numel / kPieceWords);
    const size_t n = master.numel, flat = grad.numel;
    gpu::adamw_multi(act_optional(param, flat, "adamw_multi: param"), f32(master, n, "adamw_multi: master"),
                     f32(m, n, "adamw_multi: m"), f32(v, n, "adamw_multi: v"), f32(grad, flat, "adamw_multi: grad"),
                     piece_table(pieces, "adamw_multi"), static_cast<int>(pieces.numel / kPieceWords), a,
                     f32_optional(norm_sq, 1, "adamw_multi: norm_sq"), clip, stream_);
  }

  PeerOps* peer_ops() override { return this; }

 private:
  // Host waits cover the side stream's work too.
  void wait_for_stream() {
    TRIDENT_CHECK(!on_side(), "cuda backend: a host wait between side_begin() and side_end()");
    side_join();
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::lock_guard<std::mutex> lock(mutex_);
    ++host_waits_;
  }

  // The caller guarantees that every piece lies inside its buffers (the optimizer builds them);
  // one block per piece, so their number must fit the grid.
  static const MultiTensorEntry* piece_table(TensorView pieces, const char* op) {
    const MultiTensorEntry* table = pieces_in(pieces, op);
    TRIDENT_CHECK(pieces.numel / kPieceWords < (1u << 31), str(op, ": too many pieces"));
    return table;
  }

  static void check_vocab(int v_local, int v_valid, const char* op) {
    TRIDENT_CHECK(v_valid >= 0 && v_valid <= v_local,
                  str(op, ": v_valid=", v_valid, " must lie in 0..v_local=", v_local));
  }

  static void warn_if(cudaError_t err, const char* what) {
    if (err != cudaSuccess) log_warn(str("cuda backend teardown: ", what, ": ", gpu::cuda_error_text(err)));
  }

  // Work queued on `waiter` from now on starts after the work queued on `signaller` so far.
  static void queue_after(cudaStream_t waiter, cudaStream_t signaller, cudaEvent_t event) {
    CUDA_CHECK(cudaEventRecord(event, signaller));
    CUDA_CHECK(cudaStreamWaitEvent(waiter, event, 0));
  }
  bool on_side() const { return stream_ == side_stream_ && side_stream_ != nullptr; }
  // GEMMs share Matmul's one workspace, so none may run on the side stream.
  void check_not_side(const char* op) const {
    TRIDENT_CHECK(!on_side(), str("cuda backend: ", op, " runs a GEMM, which may not be queued between side_begin() and side_end()"));
  }

  int device_;
  gpu::NvmlTelemetry telemetry_;
  cudaStream_t main_stream_ = nullptr, side_stream_ = nullptr;
  cudaStream_t stream_ = nullptr;   // where ops go: main_stream_, or side_stream_ inside side_begin/end
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
  // Host transfers of the optimizer offload, on the copy engines beside the compute.
  cudaStream_t transfer_stream_ = nullptr;
  cudaEvent_t transfer_fork_ = nullptr, transfer_join_ = nullptr;
  bool side_enabled_ = true, side_used_ = false;
  std::unique_ptr<gpu::Matmul> matmul_;
  // Temporaries of one op at a time: ops are ordered on their stream, and each stream has its own.
  bool graphs_ = true;   // CudaOptions::graphs
  gpu::Scratch main_scratch_, side_scratch_;
  gpu::Scratch* scratch_ = &main_scratch_;

  // alloc()/release() may be called from several host threads; the size table is guarded.
  mutable std::mutex mutex_;
  std::unordered_map<void*, size_t> sizes_;
  size_t live_bytes_ = 0;
  size_t peak_bytes_ = 0;
  long allocations_ = 0, host_waits_ = 0;
  // copy_from_host's pinned staging for small pageable sources, two in turn.
  static constexpr size_t kStagedUploadBytes = size_t(64) << 20;
  struct Upload {
    void* host = nullptr;
    size_t bytes = 0;
    cudaEvent_t done = nullptr;
  };
  Upload uploads_[2];
  uint64_t upload_seq_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device, const CudaOptions& options) {
  return std::make_unique<CudaBackend>(device, options);
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());  // no driver or no device: not an error for the caller
    return 0;
  }
  return count;
}

size_t cuda_device_memory_bytes(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());  // reported as 0, which the caller treats as unknown
    return 0;
  }
  return prop.totalGlobalMem;
}

bool cuda_memory_in_use(size_t* used, size_t* total) {
  size_t free = 0;
  if (cudaMemGetInfo(&free, total) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return false;
  }
  *used = *total - free;
  return true;
}

}  // namespace trident
