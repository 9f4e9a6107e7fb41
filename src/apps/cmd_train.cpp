// `trident train`: parse and validate the configuration, build the runtime, resume, train, log,
// checkpoint (every N steps, at the end, and on SIGTERM/SIGUSR1: save and exit 0).
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <cstdio>

#include "auto_layout.hpp"
#include "commands.hpp"
#include "runtime.hpp"
#include "trident/config/blend_spec.hpp"
#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/io/checkpoint.hpp"
#include "trident/io/metrics.hpp"
#include "trident/io/data_sources.hpp"
#include "trident/parallel/collective_error.hpp"
#include "trident/parallel/host_collectives.hpp"
#include "trident/train/trainer.hpp"

namespace trident {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int sig) { g_stop_signal = sig; }

std::string format_step(const StepStats& s, int steps) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "step %5d/%d | loss %.4f | lr %.3e | grad norm %.4f | %.0f tok/s | %.1f ms",
                s.step + 1, steps, s.loss, s.lr, s.grad_norm, s.tokens_per_s, s.step_ms);
  return buf;
}

std::string layout_string(const RunConfig& c) {
  return str("dp=", c.parallel.dp, " tp=", c.parallel.tp, " pp=", c.parallel.pp, " zero=", c.parallel.zero,
             " schedule=", c.parallel.schedule, " micro_batch_size=", c.train.micro_batch_size);
}

// A signal may reach some ranks only, or at different steps: all ranks stop at the same step.
bool any_rank_stopping(ControlComm& control) {
  return control.max(g_stop_signal != 0, "stop-signal check") != 0;
}

// A data spec as comparable text: each dataset's reduced weight and its prefix made absolute
// and normal (a relative prefix against the current directory, as the run opens it), so that
// "1 data/x" and "/repo/data/./x" compare equal. A spec that does not parse compares as written.
std::string comparable_data_spec(const std::string& spec) {
  try {
    std::string out;
    for (const BlendPart& p : parse_blend_spec("data", spec))
      out += str(out.empty() ? "" : " ", p.weight, " ", std::filesystem::weakly_canonical(p.prefix).string());
    return out;
  } catch (const std::exception&) {
    return spec;
  }
}

// The settings that decide which samples a resumed run reads next (the data position is a
// count of global samples) where they differ from the checkpoint's stored configuration, as
// "key = now (checkpoint: then)"; empty when none does. Changing them may be intended (a new
// data mix), so the caller notes it rather than refusing.
std::string data_changes(const RunConfig& now, const std::string& stored_ini, const std::string& origin) {
  RunConfig then;
  try {
    then = parse_config_text(stored_ini, origin);
  } catch (const InputError&) {
    return "";   // a stored configuration this version cannot read: nothing to compare
  }
  std::string out;
  auto compare = [&](const char* key, const std::string& a, const std::string& b, bool same) {
    if (!same) out += str(out.empty() ? "" : "; ", key, " = ", a.empty() ? "(none)" : a, " (checkpoint: ",
                          b.empty() ? "(none)" : b, ")");
  };
  auto compare_text = [&](const char* key, const std::string& a, const std::string& b) { compare(key, a, b, a == b); };
  auto compare_data = [&](const char* key, const std::string& a, const std::string& b) {
    compare(key, a, b, a == b || comparable_data_spec(a) == comparable_data_spec(b));
  };
  compare_data("data.train", now.data.train, then.data.train);
  compare_data("data.val", now.data.val, then.data.val);
  compare_text("data.split", str(now.data.split), str(then.data.split));
  compare_text("train.seed", str(now.train.seed), str(then.train.seed));
  return out;
}

void save(const RunConfig& cfg, Trainer& trainer, const ParallelGroups& g, int64_t steps_done) {
  CheckpointInfo info;
  info.step = steps_done;
  info.consumed_samples = trainer.consumed_samples(steps_done);
  info.seed = cfg.train.seed;
  info.config = to_ini(cfg);
  info.layout = layout_string(cfg);
  trainer.sync_parameters();
  SaveResult r = save_checkpoint(cfg.checkpoint, info, trainer.model(), trainer.optimizer(), g);
  log_info(str("checkpoint: saved ", r.path, " (", r.bytes / 1e9, " GB in ", r.seconds, " s, ",
               r.bytes / 1e9 / r.seconds, " GB/s)"));
}

// Resumes and trains; errors here are one rank's (see abort_job_on_error).
int train(const RunConfig& cfg, Runtime& rt, const DataSources& data, MetricsWriter& metrics,
          const ResumePlan& resume) {
  Trainer trainer(cfg, rt.groups, *rt.backend, *data.train);
  int first_step = 0;
  if (!resume.file.empty()) {
    CheckpointInfo info;
    auto t0 = std::chrono::steady_clock::now();
    collective_check(MPI_COMM_WORLD, [&] {
      info = load_checkpoint(resume.file, trainer.model(), &trainer.optimizer(), rt.groups);
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double gb = static_cast<double>(std::filesystem::file_size(resume.file)) / 1e9;
    log_info(str("checkpoint: loaded ", resume.file, " (", gb, " GB in ", seconds, " s, ", gb / seconds, " GB/s)"));
    first_step = static_cast<int>(info.step);
    trainer.set_position(info.step, info.consumed_samples);
    log_info(str("resumed from ", resume.file, " at step ", info.step, " (", info.consumed_samples,
                 " samples consumed; saved with ", info.layout, ")"));
    const std::string changed = data_changes(cfg, info.config, resume.file + " (stored config)");
    if (!changed.empty())
      log_info("note: resuming with data settings other than the checkpoint's (the data position continues at sample " +
               str(info.consumed_samples) + "): " + changed);
  }

  const bool checkpoints = !cfg.checkpoint.dir.empty();
  const auto evaluates = [&](int step) { return cfg.train.eval_every > 0 && (step + 1) % cfg.train.eval_every == 0; };
  const auto saves_after = [&](int step) {
    return checkpoints && cfg.checkpoint.every > 0 && (step + 1) % cfg.checkpoint.every == 0;
  };
  bool stopping = false;
  // Reports a finished step and checks for a stop signal (every rank, in step order).
  const auto report = [&](StepStats s) {
    if (evaluates(s.step)) {
      s.val_loss = trainer.evaluate(*data.val, cfg.train.eval_steps);
      log_info(str("eval  ", s.step + 1, " | val loss ", s.val_loss, " | val ppl ", std::exp(s.val_loss)));
    }
    metrics.write(s);
    if ((s.step + 1) % cfg.log.every == 0 || s.step == first_step || s.step + 1 == cfg.train.steps)
      log_info(format_step(s, cfg.train.steps));
    stopping = any_rank_stopping(*rt.groups.control) || stopping;
  };
  // Each step is queued before the previous one is reported, so the device need not wait for the
  // host between steps; a step after which the model is read (evaluation, checkpoint, the last
  // step, a stop signal) is finished at once, so that nothing else is queued behind it.
  for (int step = first_step; step < cfg.train.steps; ++step) {
    trainer.queue_step(step);
    if (trainer.queued_steps() > 1) report(trainer.finish_step());
    const bool last = step + 1 == cfg.train.steps;
    if (!(evaluates(step) || saves_after(step) || last || stopping)) continue;
    while (trainer.queued_steps() > 0) report(trainer.finish_step());
    if (checkpoints && (saves_after(step) || stopping || last)) save(cfg, trainer, rt.groups, step + 1);
    if (stopping) {
      log_info(str("stop signal received: ", checkpoints ? "checkpoint saved, " : "no checkpoint.dir, ",
                   "exiting after step ", step + 1));
      return 0;
    }
  }
  if (!cfg.log.metrics.empty()) log_info("metrics: " + cfg.log.metrics);
  return 0;
}

}  // namespace

int cmd_train(const Args& args) {
  ParsedArgs parsed = parse_args(args);
  if (parsed.help) {
    log_info("usage: trident train [--config FILE]... [--section.key VALUE]...\n\n" + run_options_help());
    return 0;
  }
  // From here on a stop signal is a request to save at the next step boundary: one that arrives
  // while the run starts up or resumes must not end the rank (their default action).
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGUSR1, on_stop_signal);
  RunConfig cfg = parsed.cfg;
  const int world = comm_size(MPI_COMM_WORLD), rank = comm_rank(MPI_COMM_WORLD);
  apply_auto_layout(cfg, MPI_COMM_WORLD);
  validate_run_config(cfg, world);
  check_memory_fits(cfg, MPI_COMM_WORLD, true);

  // Inputs are checked on every rank before anything is allocated.
  DataSources data;
  std::unique_ptr<MetricsWriter> metrics;
  ResumePlan resume;
  collective_check(MPI_COMM_WORLD, [&] {
    data = open_data(cfg.data, cfg.model.seq_len, cfg.model.vocab_size, cfg.train.seed);
    if (cfg.train.eval_every > 0 && !data.val)
      throw InputError(str("train.eval_every = ", cfg.train.eval_every,
                           " but there is no validation data: set data.val, or data.split below 1"));
    metrics = std::make_unique<MetricsWriter>(rank == 0 ? cfg.log.metrics : std::string());
    prepare_checkpoint_dir(cfg.checkpoint.dir);
    resume = resolve_resume(cfg.checkpoint);
  });

  Runtime rt = make_runtime(cfg, MPI_COMM_WORLD);
  log_info("trident train: resolved configuration\n" + to_ini(cfg));
  log_info(str("layout ", layout_string(cfg), ": ", cfg.micro_batches_per_step(), " micro-batches per step, backend ",
               rt.backend->name(), " on ", world, " ranks"));
  if (cfg.parallel.zero == 1 && cfg.parallel.dp == 1)
    log_info("note: parallel.zero = 1 with dp = 1 shards nothing (one data-parallel rank)");
  log_info("data:\n" + data.description);
  if (!resume.note.empty()) log_info(resume.note);

  return abort_job_on_error("train", [&] { return train(cfg, rt, data, *metrics, resume); });
}

}  // namespace trident
