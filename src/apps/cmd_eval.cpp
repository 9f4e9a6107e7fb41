// `trident eval`: validation loss and perplexity of a checkpoint on the validation data
// (data.val, or the documents data.split holds out; the training data when there is neither).
#include <boost/program_options.hpp>
#include <cmath>

#include "checkpoint_config.hpp"
#include "commands.hpp"
#include "runtime.hpp"
#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/io/data_sources.hpp"
#include "trident/parallel/collective_error.hpp"
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
             "Evaluates train.eval_steps global batches; the model comes from the checkpoint.\n\n" +
             run_options_help(&extra, {"backend", "parallel.", "train.micro_batch_size", "train.global_batch_size",
                                       "train.eval_steps", "train.seed", "data.", "cuda."}));
    return 0;
  }
  if (checkpoint.empty()) throw InputError("--checkpoint is required (a step_<n>.h5 file)");
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  CheckpointInfo info;
  RunConfig cfg = config_for_checkpoint(checkpoint, parsed.cfg, &info);
  validate_run_config(cfg, world);

  DataSources data;
  collective_check(MPI_COMM_WORLD, [&] { data = open_data(cfg.data, cfg.model.seq_len, cfg.model.vocab_size, cfg.train.seed); });
  BatchSource& source = data.val ? *data.val : *data.train;
  Runtime rt = make_runtime(cfg, MPI_COMM_WORLD);
  // Forward only: no gradients, optimizer state or random initialisation (the checkpoint fills
  // the parameters).
  Trainer trainer(cfg, rt.groups, *rt.backend, *data.train, Trainer::Mode::Evaluate);
  collective_check(MPI_COMM_WORLD, [&] { load_checkpoint(checkpoint, trainer.model(), nullptr, rt.groups); });
  double loss = 0;
  abort_job_on_error("eval", [&] {
    loss = trainer.evaluate(source, cfg.train.eval_steps);
    return 0;
  });
  log_info(str("eval ", checkpoint, " (step ", info.step, ") on ", data.val ? "validation" : "training",
               " data, ", cfg.train.eval_steps, " batches of ", cfg.train.global_batch_size, " x ", cfg.model.seq_len,
               " tokens: loss ", loss, ", perplexity ", std::exp(loss)));
  return 0;
}

}  // namespace trident
