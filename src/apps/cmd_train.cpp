// `trident train`: parse and validate the configuration, build the runtime, train, log.
#include <cstdio>

#include "commands.hpp"
#include "runtime.hpp"
#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/io/metrics.hpp"
#include "trident/io/token_source.hpp"
#include "trident/parallel/collective_error.hpp"
#include "trident/train/trainer.hpp"

namespace trident {

namespace {

std::string format_step(const StepStats& s, int steps) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "step %5d/%d | loss %.4f | lr %.3e | grad norm %.4f | %.0f tok/s | %.1f ms",
                s.step + 1, steps, s.loss, s.lr, s.grad_norm, s.tokens_per_s, s.step_ms);
  return buf;
}

}  // namespace

int cmd_train(const Args& args) {
  ParsedArgs parsed = parse_args(args);
  if (parsed.help) {
    log_info("usage: trident train [--config FILE]... [--section.key VALUE]...\n\n" + run_options_help());
    return 0;
  }
  if (!parsed.positional.empty())
    throw InputError(str("unexpected argument '", parsed.positional[0], "' (options are --section.key value)"));
  RunConfig cfg = parsed.cfg;
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  validate_run_config(cfg, world);

  // Inputs are checked on every rank before anything is allocated.
  std::unique_ptr<TokenSource> data;
  std::unique_ptr<MetricsWriter> metrics;
  collective_check(MPI_COMM_WORLD, [&] {
    data = std::make_unique<TokenSource>(cfg.data.train, cfg.model.seq_len, cfg.model.vocab_size, cfg.train.seed);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    metrics = std::make_unique<MetricsWriter>(rank == 0 ? cfg.log.metrics : std::string());
  });

  Runtime rt = make_runtime(cfg, MPI_COMM_WORLD);
  log_info("trident train: resolved configuration" + to_ini(cfg));
  log_info(str("layout dp=", cfg.parallel.dp, " tp=", cfg.parallel.tp, " pp=", cfg.parallel.pp, " (",
               cfg.parallel.schedule, ", zero=", cfg.parallel.zero, "), ", cfg.micro_batches_per_step(),
               " micro-batches of ", cfg.train.micro_batch_size, " per step, backend ", rt.backend->name(), " on ",
               world, " ranks"));
  if (cfg.parallel.zero == 1 && cfg.parallel.dp == 1)
    log_info("note: parallel.zero = 1 with dp = 1 shards nothing (one data-parallel rank)");
  log_info(str("data: ", cfg.data.train, " (", data->dataset().num_tokens(), " tokens, ", data->windows(),
               " sequences of ", cfg.model.seq_len, ")"));

  Trainer trainer(cfg, rt.groups, *rt.backend, *data);
  for (int step = 0; step < cfg.train.steps; ++step) {
    StepStats s = trainer.train_step(step);
    metrics->write(s);
    if ((step + 1) % cfg.log.every == 0 || step == 0 || step + 1 == cfg.train.steps)
      log_info(format_step(s, cfg.train.steps));
  }
  if (!cfg.log.metrics.empty()) log_info("metrics: " + cfg.log.metrics);
  return 0;
}

}  // namespace trident
