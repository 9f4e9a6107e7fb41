// RunSummary: sums and medians of a run's steps and events, printed and written as JSON at its end.
#include "run_summary.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "progress.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/parallel/host_collectives.hpp"
#include "trident/train/planner.hpp"

namespace trident {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

std::string shown(double v, const char* unit, int digits = 1) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%s", digits, v, unit);
  return buf;
}

}  // namespace

RunSummary::RunSummary(const RunConfig& cfg, Backend& be, MPI_Comm world)
    : cfg_(cfg), be_(be), world_(world), start_(std::chrono::steady_clock::now()) {}

void RunSummary::step(const StepStats& s) {
  step_ms_.push_back(s.step_ms);
  tokens_per_s_.push_back(s.tokens_per_s);
  if (std::isfinite(s.comm_wait)) wait_share_sum_ += s.comm_wait, ++wait_samples_;
}

void RunSummary::checkpoint_saved(double bytes, double seconds) {
  save_bytes_ += bytes;
  save_s_ += seconds;
  ++saves_;
}

void RunSummary::checkpoint_loaded(double bytes, double seconds) {
  load_bytes_ += bytes;
  load_s_ += seconds;
}

void RunSummary::finish(double data_s, double device_peak_bytes) {
  std::vector<double> peaks = all_gather(peak_memory_bytes(be_), world_);
  // The backend is the same on every rank, so all or none gather.
  std::vector<double> gpu_peaks;
  if (be_.is_device()) gpu_peaks = all_gather(device_peak_bytes, world_);
  if (comm_rank(world_) != 0) return;
  const int world = static_cast<int>(peaks.size());
  std::sort(peaks.begin(), peaks.end());
  // A rank whose GPU could not be read (NaN) is left out.
  gpu_peaks.erase(std::remove_if(gpu_peaks.begin(), gpu_peaks.end(), [](double v) { return !std::isfinite(v); }),
                  gpu_peaks.end());
  std::sort(gpu_peaks.begin(), gpu_peaks.end());

  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double steps_s = 0;
  for (double ms : step_ms_) steps_s += ms / 1e3;
  const double tokens = static_cast<double>(step_ms_.size()) * cfg_.train.global_batch_size * cfg_.model.seq_len;
  const double mean_tok_s = steps_s > 0 ? tokens / steps_s : std::nan("");
  const double median_tok_s = median(tokens_per_s_);
  const double mfu = be_.is_device() ? model_flops_utilisation(cfg_.model, mean_tok_s, world) : std::nan("");
  // Exposed communication: the mean share of the timed steps applied to all; the bubble: the
  // schedule's idle share of a step, (pp - 1) / (micro-batches + pp - 1) (pipeline_bubble), an estimate.
  const double comm_s = wait_samples_ ? steps_s * wait_share_sum_ / wait_samples_ : std::nan("");
  const double bubble_s =
      steps_s * pipeline_bubble(cfg_.parallel.pp, cfg_.micro_batches_per_step(), cfg_.parallel.virtual_stages);
  const double compute_s = steps_s - bubble_s - (std::isfinite(comm_s) ? comm_s : 0);
  const double other_s = std::max(0.0, wall_s - steps_s - save_s_ - eval_s_);
  const double save_gbs = save_s_ > 0 ? save_bytes_ / 1e9 / save_s_ : std::nan("");
  const double load_gbs = load_s_ > 0 ? load_bytes_ / 1e9 / load_s_ : std::nan("");

  nlohmann::json j = {
      {"steps", step_ms_.size()},
      {"wall_s", wall_s},
      {"tokens", tokens},
      {"tokens_per_s_mean", number_or_null(mean_tok_s)},
      {"tokens_per_s_median", number_or_null(median_tok_s)},
      {"mfu", number_or_null(mfu)},
      {"time_s",
       {{"steps", steps_s},
        {"compute", compute_s},
        {"exposed_comm", number_or_null(comm_s)},
        {"pipeline_bubble_estimate", bubble_s},
        {"data_loading", data_s},
        {"checkpoints", save_s_},
        {"evaluation", eval_s_},
        {"other", other_s}}},
      {"peak_mem_gib_per_rank",
       {{"min", peaks.front() / double(1 << 30)},
        {"median", median(peaks) / double(1 << 30)},
        {"max", peaks.back() / double(1 << 30)}}},
      {"checkpoint_save_gb_per_s", number_or_null(save_gbs)},
      {"checkpoint_load_gb_per_s", number_or_null(load_gbs)},
      {"checkpoints_saved", saves_}};
  std::string gpu_line;
  if (be_.is_device() && !gpu_peaks.empty()) {
    j["device_peak_gib_per_rank"] = {{"min", number_or_null(gpu_peaks.front() / double(1 << 30))},
                                     {"median", number_or_null(median(gpu_peaks) / double(1 << 30))},
                                     {"max", number_or_null(gpu_peaks.back() / double(1 << 30))}};
    gpu_line = str("  GPU-reported peak per rank (cudaMemGetInfo: CUDA context, NCCL and cuBLASLt included): min ",
                   shown(gpu_peaks.front() / double(1 << 30), " GiB", 2), ", median ",
                   shown(median(gpu_peaks) / double(1 << 30), " GiB", 2), ", max ",
                   shown(gpu_peaks.back() / double(1 << 30), " GiB", 2), "\n");
  }
  log_info(str("performance summary: ", step_ms_.size(), " steps, ", tokens, " tokens in ", shown(wall_s, " s"), "\n",
               "  tokens/s mean ", shown(mean_tok_s, "", 0), ", median ", shown(median_tok_s, "", 0), ", MFU ",
               shown(100 * mfu, "%"), "\n",
               "  time: steps ", shown(steps_s, " s", 2), " (compute ", shown(compute_s, " s", 2), ", exposed comm ",
               shown(comm_s, " s", 2), ", pipeline bubble ~", shown(bubble_s, " s", 2), "), data loading ",
               shown(data_s, " s", 2), ", checkpoints ", shown(save_s_, " s", 2), ", evaluation ",
               shown(eval_s_, " s", 2), ", other ", shown(other_s, " s", 2), "\n",
               "  peak memory per rank: min ", shown(peaks.front() / double(1 << 30), " GiB", 2), ", median ",
               shown(median(peaks) / double(1 << 30), " GiB", 2), ", max ",
               shown(peaks.back() / double(1 << 30), " GiB", 2), "\n", gpu_line,
               "  checkpoints: save ", shown(save_gbs, " GB/s", 2), " (", saves_, " saved), load ",
               shown(load_gbs, " GB/s", 2)));
  if (cfg_.log.summary.empty()) return;
  std::ofstream out(cfg_.log.summary);
  out << j.dump(2) << '\n';
  if (!out) log_warn(str("log.summary = ", cfg_.log.summary, ": could not write the summary"));
  else log_info("summary: " + cfg_.log.summary);
}

}  // namespace trident
