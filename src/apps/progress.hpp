// Progress: what a finished training step adds to its StepStats for the log and the metrics
// (MFU, peak memory and communication wait over all ranks, elapsed time and ETA), and its line.
#pragma once

#include <mpi.h>

#include <chrono>
#include <string>

#include "trident/backend/backend.hpp"
#include "trident/config/run_config.hpp"
#include "runtime.hpp"
#include "trident/train/trainer.hpp"

namespace trident {

// Dense bf16 peak of an H100/H200 SXM GPU, the usual MFU denominator.
constexpr double kPeakBf16TFlops = 989.0;

// Model FLOPs utilisation: (6N + 12*L*C*T) FLOPs per token at `tokens_per_s` over `ranks` GPUs
// of kPeakBf16TFlops each.
double model_flops_utilisation(const ModelConfig& m, double tokens_per_s, int ranks);

// The peak memory a rank reports: the backend's allocator high-water mark on a device, the
// process's peak resident set on the CPU backend (its tensors are ordinary host memory).
double peak_memory_bytes(const Backend& be);

class Progress {
 public:
  // Training runs steps first_step+1 .. cfg.train.steps (1-based) from now.
  Progress(const RunConfig& cfg, Backend& be, MPI_Comm world, int first_step);
  // On a device, the communicator waits of each step printed are timed (CUDA events around every
  // op of that step): call before and after queue_step of the step that completes update `step`.
  void before_queue(int step);
  void after_queue(int step);
  // Every rank, for every finished step in order: fills s's MFU, peak memory and, on GPUs, the
  // GPU-reported peak (each the max over ranks),
  // comm wait (max over ranks, where timed), elapsed time and ETA; on printed steps, each rank's
  // memory in use and capacity (at rank 0), with a warning from a rank that passes
  // log.memory_warning of its memory.
  void complete(StepStats& s);
  bool printed(int step) const;   // the step's line goes to the console, its memory is sampled
  std::string line(const StepStats& s) const;
  // This rank's GPU-reported peak over the steps completed so far (DevicePeak; NaN on CPU ranks).
  double device_peak_bytes() const { return device_peak_.bytes(); }

 private:
  void sample_memory(StepStats& s);
  const RunConfig& cfg_;
  Backend& be_;
  MPI_Comm world_;
  int world_size_ = 1, first_step_ = 0;
  std::chrono::steady_clock::time_point start_;
  int profiled_step_ = -1;   // the step whose ops are being timed (-1: none)
  bool memory_high_ = false;  // above log.memory_warning at the last sample (warn once per crossing)
  DevicePeak device_peak_;
};

}  // namespace trident
