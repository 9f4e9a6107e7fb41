// JSON Lines metrics through nlohmann::json.
#include "trident/io/metrics.hpp"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "trident/core/error.hpp"

namespace trident {

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  if (path.empty()) return;
  // Like checkpoint.dir, the file's directory is created when missing.
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec)
    throw InputError(str("log.metrics = ", path, ": cannot create the directory ", parent.string(), " (", ec.message(), ")"));
  out_.open(path, std::ios::app);
  if (!out_) throw InputError(str("log.metrics = ", path, ": cannot open for appending (a directory, or not writable?)"));
}

void check_writable(const char* option, const std::string& path) {
  if (path.empty()) return;
  std::ofstream probe(path, std::ios::app);   // appends nothing: an existing file is left as it is
  if (!probe) throw InputError(str(option, " = ", path, ": cannot open for writing (check the directory exists)"));
}

namespace {

// A value not measured (NaN) is written as null, so that every row has the same keys.
nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// One value per rank, or null on steps the memory monitor did not sample.
nlohmann::json gib_per_rank(const std::vector<double>& bytes) {
  if (bytes.empty()) return nullptr;
  nlohmann::json a = nlohmann::json::array();
  for (double b : bytes) a.push_back(b / double(1 << 30));
  return a;
}

}  // namespace

void MetricsWriter::write(const StepStats& s) {
  if (!out_.is_open()) return;
  nlohmann::json j = {{"step", s.step},
                      {"loss", s.loss},
                      {"lr", s.lr},
                      {"grad_norm", s.grad_norm},
                      {"tokens_per_s", s.tokens_per_s},
                      {"step_ms", s.step_ms},
                      {"mfu", number_or_null(s.mfu)},
                      {"peak_mem_gib", number_or_null(s.peak_mem_bytes / double(1 << 30))},
                      {"comm_wait", number_or_null(s.comm_wait)},
                      {"elapsed_s", number_or_null(s.elapsed_s)},
                      {"eta_s", number_or_null(s.eta_s)},
                      {"mem_used_gib", gib_per_rank(s.mem_used_bytes)},
                      {"mem_total_gib", gib_per_rank(s.mem_total_bytes)},
                      {"skipped", !s.skipped.empty()},
                      {"skipped_steps", s.skipped_steps}};
  if (!s.skipped.empty()) j["skip_reason"] = s.skipped;
  // GPU runs only: a CPU rank has no device whose memory it could report.
  if (std::isfinite(s.device_peak_bytes)) j["device_peak_gib"] = s.device_peak_bytes / double(1 << 30);
  if (std::isfinite(s.accuracy)) {   // a preference task's pair metrics
    j["accuracy"] = s.accuracy;
    j["margin"] = s.margin;
  }
  if (std::isfinite(s.chosen_reward)) {   // dpo's implicit rewards
    j["chosen_reward"] = s.chosen_reward;
    j["rejected_reward"] = s.rejected_reward;
  }
  if (std::isfinite(s.reward)) {   // online RL (tasks grpo and ppo)
    j["reward"] = s.reward;
    j["reward_std"] = s.reward_std;
    j["kl"] = number_or_null(s.kl);
    j["clip_fraction"] = s.clip_fraction;
    j["entropy"] = s.entropy;
    j["answer_tokens"] = s.answer_tokens;
    j["answers_stopped"] = s.answers_stopped;
    j["generation_s"] = s.generation_s;
  }
  if (std::isfinite(s.value_loss)) {   // task ppo's value model and KL control
    j["value_loss"] = s.value_loss;
    j["value_clip_fraction"] = s.value_clip_fraction;
    j["value_mean"] = number_or_null(s.value_mean);
    j["explained_variance"] = number_or_null(s.explained_variance);
    j["kl_coef"] = s.kl_coef;
  }
  if (std::isfinite(s.val_accuracy)) j["val_accuracy"] = s.val_accuracy;
  if (std::isfinite(s.val_loss)) {
    j["val_loss"] = s.val_loss;
    if (!std::isfinite(s.val_accuracy)) j["val_ppl"] = std::exp(s.val_loss);   // token losses only
  }
  out_ << j.dump() << '\n';
  out_.flush();
}

}  // namespace trident
