// Progress: MFU, peak memory, communication wait, elapsed time and ETA of each finished step.
#include "progress.hpp"

#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "runtime.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/parallel/host_collectives.hpp"
#include "trident/train/planner.hpp"

namespace trident {

namespace {

// "42s", "3m07s", "2h05m" for the console.
std::string duration(double seconds) {
  const long s = std::lround(seconds);
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%lds", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s / 60 % 60);
  return buf;
}

std::string percent_or_dash(double fraction) {
  return std::isfinite(fraction) ? str(std::lround(1000 * fraction) / 10.0, "%") : "-";
}

}  // namespace

double model_flops_utilisation(const ModelConfig& m, double tokens_per_s, int ranks) {
  return flops_per_token(m) * tokens_per_s / (kPeakBf16TFlops * 1e12 * ranks);
}

double peak_memory_bytes(const Backend& be) {
  if (be.is_device()) return static_cast<double>(be.peak_bytes());
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024;   // Linux reports KiB
}

Progress::Progress(const RunConfig& cfg, Backend& be, MPI_Comm world, int first_step)
    : cfg_(cfg), be_(be), world_(world), first_step_(first_step), start_(std::chrono::steady_clock::now()) {
  world_size_ = comm_size(world);
}

bool Progress::printed(int step) const {
  return step % cfg_.log.every == 0 || step == first_step_ + 1 || step == cfg_.train.steps;
}

void Progress::before_queue(int step) {
  if (!be_.is_device() || !printed(step)) return;
  be_.set_profiling(true);
  profiled_step_ = step;
}

void Progress::after_queue(int step) {
  if (step == profiled_step_) be_.set_profiling(false);
}

void Progress::complete(StepStats& s) {
  double wait = std::nan("");
  if (s.step == profiled_step_) {
    double wait_ms = 0;
    for (const OpTime& t : be_.take_profile())
      if (t.name.rfind("wait ", 0) == 0) wait_ms += t.ms;
    wait = wait_ms / s.step_ms;
    profiled_step_ = -1;
  }
  s.peak_mem_bytes = all_reduce(peak_memory_bytes(be_), HostReduce::Max, world_);
  if (be_.is_device()) {   // the same on every rank, so all or none take part
    device_peak_.sample(be_);
    const double mine = device_peak_.bytes();
    const double most = all_reduce(std::isfinite(mine) ? mine : -1.0, HostReduce::Max, world_);
    s.device_peak_bytes = most >= 0 ? most : std::nan("");
  }
  // Waits are timed only on the printed steps of a device run (before_queue), the same steps on
  // every rank, so only those reduce them. Ranks that did not time theirs send -1, so the
  // maximum is a measurement where any has one.
  if (be_.is_device() && printed(s.step)) {
    const double most_wait = all_reduce(std::isfinite(wait) ? wait : -1.0, HostReduce::Max, world_);
    s.comm_wait = most_wait >= 0 ? most_wait : std::nan("");
  }
  s.mfu = be_.is_device() ? model_flops_utilisation(cfg_.model, s.tokens_per_s, world_size_) : std::nan("");
  s.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const int done = s.step - first_step_;
  s.eta_s = done > 0 ? s.elapsed_s / done * (cfg_.train.steps - s.step) : std::nan("");
  if (printed(s.step)) sample_memory(s);
}

void Progress::sample_memory(StepStats& s) {
  const MemoryUse m = memory_use(be_);
  const bool high = m.total > 0 && m.used > cfg_.log.memory_warning * m.total;
  if (high && !memory_high_)
    log_warn(str("warning: memory at step ", s.step, ": ", m.used / double(1 << 30), " of ", m.total / double(1 << 30),
                 " GiB in use (over log.memory_warning = ",
                 cfg_.log.memory_warning, ")"));
  memory_high_ = high;
  const std::vector<MemoryUse> all = all_gather(m, world_);
  if (comm_rank(world_) != 0) return;   // rank 0 writes the metrics
  for (const MemoryUse& r : all) {
    s.mem_used_bytes.push_back(r.used);
    s.mem_total_bytes.push_back(r.total);
  }
}

std::string Progress::line(const StepStats& s) const {
  char pairs[224] = "";   // a preference task's pair metrics, dpo's implicit rewards, online RL's
  if (std::isfinite(s.chosen_reward))
    std::snprintf(pairs, sizeof pairs, " | accuracy %.3f | margin %.4f | chosen %.4f | rejected %.4f", s.accuracy,
                  s.margin, s.chosen_reward, s.rejected_reward);
  else if (std::isfinite(s.accuracy))
    std::snprintf(pairs, sizeof pairs, " | accuracy %.3f | margin %.4f", s.accuracy, s.margin);
  else if (std::isfinite(s.reward)) {   // online RL: the answers' reward, KL, clipping, entropy, length, generation time
    char kl[24] = "-";   // no reference model: no KL
    if (std::isfinite(s.kl)) std::snprintf(kl, sizeof kl, "%.3g", s.kl);
    std::snprintf(pairs, sizeof pairs,
                  " | reward %.3f (sd %.3f) | kl %s | clip %.3f | entropy %.3f | answer %.1f tok | gen %.1f s",
                  s.reward, s.reward_std, kl, s.clip_fraction, s.entropy, s.answer_tokens, s.generation_s);
    if (std::isfinite(s.value_loss)) {   // ppo: the value model and the KL coefficient
      const size_t used = std::strlen(pairs);
      std::snprintf(pairs + used, sizeof pairs - used, " | value loss %.4f (clip %.3f, ev %.3f) | kl coef %.3g",
                    s.value_loss, s.value_clip_fraction, s.explained_variance, s.kl_coef);
    }
  }
  char gpu[32] = "";   // the GPU-reported peak beside the allocator's, on GPUs
  if (std::isfinite(s.device_peak_bytes))
    std::snprintf(gpu, sizeof gpu, " (GPU %.2f GiB)", s.device_peak_bytes / double(1 << 30));
  char buf[576];
  std::snprintf(buf, sizeof buf,
                "step %5d/%d | loss %.4f%s | lr %.3e | grad norm %.4f | %.0f tok/s | MFU %s | mem %.2f GiB%s | "
                "comm wait %s | %.1f ms | elapsed %s | ETA %s",
                s.step, cfg_.train.steps, s.loss, pairs, s.lr, s.grad_norm, s.tokens_per_s,
                percent_or_dash(s.mfu).c_str(), s.peak_mem_bytes / double(1 << 30), gpu,
                percent_or_dash(s.comm_wait).c_str(), s.step_ms, duration(s.elapsed_s).c_str(),
                std::isfinite(s.eta_s) ? duration(s.eta_s).c_str() : "-");
  return buf;
}

}  // namespace trident
