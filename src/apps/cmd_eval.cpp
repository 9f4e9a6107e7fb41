// `trident eval`: validation loss and perplexity of a checkpoint on the validation data
// (data.val, or the documents data.split holds out; the training data when there is neither),
// by default the data of the checkpoint's stored configuration.
#include <boost/program_options.hpp>
#include <cmath>

#include "auto_layout.hpp"
#include "checkpoint_config.hpp"
#include "commands.hpp"
#include "runtime.hpp"
#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/io/data_sources.hpp"
#include "trident/parallel/collective_error.hpp"
#include "trident/parallel/host_collectives.hpp"
#include "trident/train/trainer.hpp"

namespace po = boost::program_options;

namespace trident {

int cmd_eval(const Args& args) {
  std::string checkpoint;
  po::options_description extra("Evaluation");
  extra.add_options()("checkpoint", po::value(&checkpoint), "checkpoint file (.h5) to evaluate");
  ParsedArgs parsed = parse_args(args, &extra);
  if (parsed.help) {
    log_info("usage: trident eval --checkpoint FILE [--config FILE]... [--data.val SPEC | --data.split F]\n"
             "Evaluates train.eval_steps global batches; the model comes from the checkpoint, and so do the\n"
             "data settings unless data.train, data.val or data.split is given (then only those are used).\n\n" +
             run_options_help(&extra, {"backend", "task", "parallel.", "train.micro_batch_size", "train.global_batch_size",
                                       "train.eval_steps", "train.seed", "data.", "cuda."}));
    return 0;
  }
  if (checkpoint.empty()) throw InputError("--checkpoint is required (a step_<n>.h5 file)");
  const int world = comm_size(MPI_COMM_WORLD);
  CheckpointInfo info;
  RunConfig cfg = config_for_checkpoint(checkpoint, parsed.cfg, &info);
  // No data on the command line: the data the checkpoint was trained with, whose validation part
  // is what eval reads by default.
  const DataConfig& cli = parsed.cfg.data;
  const bool data_from_checkpoint = cli.train.empty() && cli.val.empty() && cli.split == 1;
  if (data_from_checkpoint) {
    const RunConfig stored = parse_config_text(info.config, checkpoint + " (stored config)");
    cfg.data = stored.data;
    cfg.task = stored.task;
  }
  const bool sft = cfg.task == "sft";
  validate_run_config(cfg, world);
  if (cfg.task == "dpo")
    throw InputError("task = dpo: trident eval reports token loss and perplexity, which DPO's pair loss against its "
                     "reference model is not; evaluate a DPO run with train.eval_every, or pass --task sft with a chat "
                     "dataset to measure the token loss");
  check_memory_fits(cfg, MPI_COMM_WORLD, false);

  std::unique_ptr<BatchSource> source;
  bool on_validation = true;
  collective_check(MPI_COMM_WORLD, [&] {
    source = open_validation_data(cfg.data, cfg.model.seq_len, cfg.model.vocab_size, cfg.train.seed, cfg.task);
    if (source) return;
    if (cfg.data.train.empty())
      throw InputError(str("no data to evaluate on: ", data_from_checkpoint ? "the stored config of " + checkpoint +
                           " has neither data.val nor data.split < 1" : "no data.val given",
                           "; pass --data.val PREFIX"));
    source = (cfg.preference_task() ? open_preference_data : sft ? open_sft_data : open_data)(
                 cfg.data, cfg.model.seq_len, cfg.model.vocab_size, cfg.train.seed)
                 .train;
    on_validation = false;
  });
  Runtime rt = make_runtime(cfg, MPI_COMM_WORLD);
  // Forward only: no gradients, optimizer state or random initialisation (the checkpoint fills
  // the parameters).
  Trainer trainer(cfg, rt.groups, *rt.backend, *source, Trainer::Mode::Evaluate);
  collective_check(MPI_COMM_WORLD, [&] { load_checkpoint(checkpoint, trainer.model(), nullptr, rt.groups); });
  EvalResult r;
  abort_job_on_error("eval", [&] {
    r = trainer.evaluate(*source, cfg.train.eval_steps);
    return 0;
  });
  log_info(str("eval ", checkpoint, " (step ", info.step, ") on ", on_validation ? "validation" : "training",
               " data, ", cfg.train.eval_steps, " batches of ", cfg.train.global_batch_size, " x ", cfg.model.seq_len,
               " tokens: loss ", r.loss,
               cfg.model.score_head ? str(", pair accuracy ", r.accuracy, ", mean margin ", r.margin)
                                    : str(", perplexity ", std::exp(r.loss))));
  return 0;
}

}  // namespace trident
