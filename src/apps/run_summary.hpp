// RunSummary: the end-of-run performance summary of `trident train` (wall time, tokens, tokens/s,
// MFU, where the time went, peak memory per rank, checkpoint rates), printed and as JSON.
#pragma once

#include <mpi.h>

#include <chrono>
#include <string>
#include <vector>

#include "trident/backend/backend.hpp"
#include "trident/config/run_config.hpp"
#include "trident/train/trainer.hpp"

namespace trident {

class RunSummary {
 public:
  RunSummary(const RunConfig& cfg, Backend& be, MPI_Comm world);
  void step(const StepStats& s);   // every finished step, after Progress::complete
  void evaluation(double seconds) { eval_s_ += seconds; }
  void checkpoint_saved(double bytes, double seconds);
  void checkpoint_loaded(double bytes, double seconds);
  // Collective over `world`: gathers every rank's peak memory; rank 0 prints the summary and, with
  // log.summary, writes it as JSON there. `data_s`: the host's time reading training batches;
  // `device_peak_bytes`: this rank's GPU-reported peak (Progress::device_peak_bytes, NaN on CPU
  // ranks, where the summary has no such field).
  void finish(double data_s, double device_peak_bytes);

 private:
  const RunConfig& cfg_;
  Backend& be_;
  MPI_Comm world_;
  std::chrono::steady_clock::time_point start_;
  std::vector<double> step_ms_, tokens_per_s_;
  double wait_share_sum_ = 0;   // comm_wait of the steps that measured it
  int wait_samples_ = 0;
  double eval_s_ = 0, save_s_ = 0, save_bytes_ = 0, load_s_ = 0, load_bytes_ = 0;
  int saves_ = 0;
};

}  // namespace trident
