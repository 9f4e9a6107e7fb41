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

void MetricsWriter::write(const StepStats& s) {
  if (!out_.is_open()) return;
  nlohmann::json j = {{"step", s.step},       {"loss", s.loss},       {"lr", s.lr},
                      {"grad_norm", s.grad_norm}, {"tokens_per_s", s.tokens_per_s}, {"step_ms", s.step_ms}};
  if (std::isfinite(s.val_loss)) {
    j["val_loss"] = s.val_loss;
    j["val_ppl"] = std::exp(s.val_loss);
  }
  out_ << j.dump() << '\n';
  out_.flush();
}

}  // namespace trident
