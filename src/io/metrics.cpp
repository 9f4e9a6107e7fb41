// JSON Lines metrics through nlohmann::json.
#include "trident/io/metrics.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "trident/core/error.hpp"

namespace trident {

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  if (path.empty()) return;
  out_.open(path, std::ios::app);
  if (!out_) throw InputError(str("log.metrics = ", path, ": cannot open for appending (check the directory exists)"));
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
