// `trident train`: parse and validate the configuration, build the runtime, resume, train, log,
// checkpoint (every N steps, at the end, and on SIGTERM/SIGUSR1: save and exit 0).
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <cstdio>
#include <map>

#include "auto_layout.hpp"
#include "commands.hpp"
#include "progress.hpp"
#include "run_length.hpp"
#include "run_summary.hpp"
#include "runtime.hpp"
#include "trident/config/blend_spec.hpp"
#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/io/checkpoint.hpp"
#include "trident/io/hf_convert.hpp"
#include "trident/io/metrics.hpp"
#include "trident/io/preference_source.hpp"
#include "trident/io/reference_nll.hpp"
#include "trident/io/rollouts.hpp"
#include "trident/io/tensorboard.hpp"
#include "trident/io/data_sources.hpp"
#include "trident/parallel/collective_error.hpp"
#include "trident/parallel/host_collectives.hpp"
#include "trident/train/schedule.hpp"
#include "trident/train/trainer.hpp"

namespace trident {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int sig) { g_stop_signal = sig; }

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

// Initial weights (`option` names where they come from: init.from, rl.value_from) must be of the
// configured model: their stored [model] section (a trident checkpoint) or config.json (a Hugging
// Face directory) against the run's.
void check_weights_match(const char* option, const std::string& from, const ModelConfig& model) {
  ModelConfig weights;
  try {
    weights = std::filesystem::is_directory(from)
                  ? read_hf_config(from)
                  : parse_config_text(read_checkpoint_info(from).config, from + " (stored config)").model;
  } catch (const InputError& e) {
    throw InputError(str(option, ": ", e.what()));
  }
  const std::string difference = model_difference(model, weights);
  if (!difference.empty()) throw InputError(str(option, " ", from, ": ", difference));
}

void check_init_from(const RunConfig& cfg) { check_weights_match("init.from", cfg.init.from, cfg.model); }

// The reference model of task dpo (and of grpo's KL penalty) is the initial weights, frozen: a
// new run and a resumed one alike need init.from.
void require_reference_weights(const RunConfig& cfg) {
  if (cfg.has_reference() && cfg.init.from.empty())
    throw InputError(str("init.from is empty: task ", cfg.task, " starts from given weights, which are also its frozen "
                         "reference model; pass --init.from CHECKPOINT.h5 (e.g. an sft run's) or a Hugging Face model "
                         "directory", cfg.online_rl() ? " (or rl.kl_beta = 0: no reference)" : ""));
}

// Online RL's tokenizer (rl.tokenizer; auto: the run's, which its checkpoints keep).
std::unique_ptr<Tokenizer> rl_tokenizer(const RunConfig& cfg, const TokenizerFiles& run_tokenizer) {
  const std::string& kind = cfg.rl.tokenizer;
  std::unique_ptr<Tokenizer> t;
  if (kind == "auto") {
    if (run_tokenizer.empty())
      throw InputError("rl.tokenizer = auto: the run has no tokenizer (data.tokenizer, the resumed checkpoint's or "
                       "init.from's); pass rl.tokenizer byte or a tokenizer.json");
    t = make_tokenizer(run_tokenizer, "the run's tokenizer");
  } else {
    try {
      t = make_tokenizer(kind, "", "");
    } catch (const InputError& e) {
      throw InputError(str("rl.tokenizer: ", e.what()));
    }
  }
  if (t->vocab_size() > cfg.model.vocab_size)
    throw InputError(str("rl.tokenizer ", kind, " has ", t->vocab_size(), " tokens, more than model.vocab_size = ",
                         cfg.model.vocab_size));
  return t;
}

// init.from's weights for this rank: a trident checkpoint's parameters, or a Hugging Face
// directory converted in memory (each rank reads its shards). A reward model from a language
// model's weights takes their transformer, and its score head starts from train.seed's
// initialisation, as in a run from scratch.
std::vector<float> read_init_weights(const RunConfig& cfg, Trainer& trainer, const ParallelGroups& g) {
  const std::string& from = cfg.init.from;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<float> weights;
  const bool hf = std::filesystem::is_directory(from);
  bool score_unread = false;
  const ParamLayout& layout = trainer.model().layout();
  collective_check(MPI_COMM_WORLD, [&] {
    if (hf)
      weights = HfImport(from).local_params(layout, &score_unread);
    else
      read_checkpoint_params(from, trainer.model(), g, weights, &score_unread);
  });
  const ParamInfo* score = layout.find("score.weight");
  if (score_unread && score) init_param_values(*score, cfg.train.seed, weights.data() + score->offset);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log_info(str("init: weights from ", from, hf ? " (Hugging Face, converted in memory)" : "", " in ", seconds, " s",
               score_unread ? "; a language model's transformer: score.weight initialised from train.seed" : ""));
  return weights;
}

// The tokenizer the run's checkpoints keep, and where it came from: data.tokenizer, else the one
// kept by the checkpoint the run resumes from, else init.from's (kept in its checkpoint, or the
// tokenizer.json of its Hugging Face directory); checked against the model's vocabulary. None
// where none is known.
struct RunTokenizer {
  TokenizerFiles files;
  std::string source;
  std::string note;   // a carried tokenizer trident cannot read (kept all the same)
};

RunTokenizer run_tokenizer(const RunConfig& cfg, const std::string& resume_file) {
  RunTokenizer t;
  const std::string& from = cfg.init.from;
  if (!cfg.data.tokenizer.empty()) {
    t.source = "data.tokenizer " + cfg.data.tokenizer;
    try {
      t.files = read_tokenizer_files(cfg.data.tokenizer);
    } catch (const InputError& e) {
      throw InputError(str("data.tokenizer: ", e.what()));
    }
  } else if (!resume_file.empty() && !(t.files = read_checkpoint_tokenizer(resume_file)).empty()) {
    t.source = "the checkpoint " + resume_file;
  } else if (!from.empty() && (resume_file.empty() || std::filesystem::exists(from))) {
    // A fresh run's init.from, or a resumed one's whose checkpoint keeps none (saved before
    // checkpoints kept tokenizers) while init.from is still there.
    if (!std::filesystem::is_directory(from))
      t = {read_checkpoint_tokenizer(from), "init.from " + from, ""};
    else if (std::filesystem::exists(std::filesystem::path(from) / "tokenizer.json"))
      t = {read_tokenizer_files(from), "init.from " + from, ""};
  }
  if (t.files.empty()) return t;
  if (!cfg.data.tokenizer.empty())
    hf_tokenizer_ids(t.files, t.source, cfg.model.vocab_size);   // named by the user: it must load
  else
    carried_tokenizer_ids(t.files, t.source, cfg.model.vocab_size, t.note);
  return t;
}

// dpo.reference = precomputed: each preference dataset's reference NLLs (the training data's, and
// data.val's when that is another dataset) from PREFIX_dpo_ref.bin beside it. Where that file is
// missing, the policy takes init.from's weights (the reference) and computes them over every
// record of the dataset before the first step, or before a resumed run loads its checkpoint over
// them; rank 0 writes the file. Returns whether the policy now holds init.from's weights.
bool attach_precomputed_reference(const RunConfig& cfg, Trainer& trainer, const DataSources& data,
                                  const ParallelGroups& g) {
  bool weights_set = false;
  std::map<std::string, std::shared_ptr<const std::vector<float>>> tables;   // by dataset prefix
  for (BatchSource* source : {data.train.get(), data.val.get()}) {
    if (!source) continue;
    auto& pairs = dynamic_cast<PreferenceSource&>(*source);
    const std::string prefix = pairs.dataset().tokens().prefix(), path = reference_nll_path(prefix);
    std::shared_ptr<const std::vector<float>>& table = tables[prefix];
    if (!table) {
      ReferenceNllKey key;
      bool exists = false;
      collective_check(MPI_COMM_WORLD, [&] {
        key = reference_nll_key(pairs.dataset(), cfg.model.seq_len, cfg.init.from);
        exists = std::filesystem::exists(path);
        if (exists) table = std::make_shared<const std::vector<float>>(read_reference_nll(path, key));
      });
      if (exists) {
        log_info(str("dpo: reference log-probabilities of ", key.records, " pairs read from ", path));
      } else {
        if (!weights_set) trainer.set_initial_weights(read_init_weights(cfg, trainer, g));
        weights_set = true;
        const auto t0 = std::chrono::steady_clock::now();
        PreferenceSource all(std::make_shared<const MaskedDataset>(prefix, 2), 0, key.records, cfg.model.seq_len,
                             cfg.model.vocab_size, cfg.train.seed);
        std::vector<float> by_record = reference_nll_by_record(all, trainer.sequence_nll(all, 2 * key.records));
        collective_check(MPI_COMM_WORLD, [&] {
          if (comm_rank(MPI_COMM_WORLD) == 0) write_reference_nll(path, key, by_record);
        });
        log_info(str("dpo: reference log-probabilities of ", key.records, " pairs computed from init.from in ",
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), " s, written to ",
                     path));
        table = std::make_shared<const std::vector<float>>(std::move(by_record));
      }
    }
    pairs.set_reference_nll(table);
  }
  return weights_set;
}

SaveResult save(const RunConfig& cfg, Trainer& trainer, const ParallelGroups& g, int64_t steps_done,
                const TokenizerFiles& tokenizer) {
  CheckpointInfo info;
  info.step = steps_done;
  info.consumed_samples = trainer.consumed_samples(steps_done);
  info.seed = cfg.train.seed;
  info.config = to_ini(cfg);
  info.layout = layout_string(cfg);
  info.tokenizer = tokenizer;
  trainer.sync_parameters();
  ValueState value;
  if (Trainer* v = trainer.value_model()) {
    value = {&v->model(), &v->optimizer()};
    info.kl_coef = trainer.kl_coef();
  }
  SaveResult r = save_checkpoint(cfg.checkpoint, info, trainer.model(), trainer.optimizer(), g, value);
  log_info(str("checkpoint: saved ", r.path, " (", r.bytes / 1e9, " GB in ", r.seconds, " s, ",
               r.bytes / 1e9 / r.seconds, " GB/s)"));
  return r;
}

// What a run writes besides the checkpoints: rank 0's metrics and TensorBoard files.
struct RunOutputs {
  std::unique_ptr<MetricsWriter> metrics;
  std::unique_ptr<TensorBoardWriter> tensorboard;
};

// Resumes and trains; errors here are one rank's (see abort_job_on_error).
int train(const RunConfig& cfg, Runtime& rt, const DataSources& data, RunOutputs& outputs,
          const ResumePlan& resume, const TokenizerFiles& tokenizer) {
  Trainer trainer(cfg, rt.groups, *rt.backend, *data.train);
  RunSummary summary(cfg, *rt.backend, MPI_COMM_WORLD);
  const bool precomputed = cfg.task == "dpo" && cfg.dpo.reference == "precomputed";
  const bool init_weights_set = precomputed && attach_precomputed_reference(cfg, trainer, data, rt.groups);
  int first_step = 0;
  if (!resume.file.empty()) {
    CheckpointInfo info;
    auto t0 = std::chrono::steady_clock::now();
    collective_check(MPI_COMM_WORLD, [&] {
      info = load_checkpoint(resume.file, trainer.model(), &trainer.optimizer(), rt.groups);
      if (Trainer* v = trainer.value_model()) load_checkpoint(resume.file, v->model(), &v->optimizer(), rt.groups, true);
    });
    if (trainer.value_model()) {
      if (std::isnan(info.kl_coef))
        throw InputError(str("checkpoint ", resume.file, ": no kl_coef attribute: it was not saved by a task ppo run"));
      trainer.set_kl_coef(info.kl_coef);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double gb = static_cast<double>(std::filesystem::file_size(resume.file)) / 1e9;
    summary.checkpoint_loaded(gb * 1e9, seconds);
    log_info(str("checkpoint: loaded ", resume.file, " (", gb, " GB in ", seconds, " s, ", gb / seconds, " GB/s)"));
    first_step = static_cast<int>(info.step);
    trainer.set_position(info.step, info.consumed_samples);
    log_info(str("resumed from ", resume.file, " at step ", info.step, " (", info.consumed_samples,
                 " samples consumed; saved with ", info.layout, ")"));
    const std::string changed = data_changes(cfg, info.config, resume.file + " (stored config)");
    if (!changed.empty())
      log_info("note: resuming with data settings other than the checkpoint's (the data position continues at sample " +
               str(info.consumed_samples) + "): " + changed);
    if (cfg.has_reference() && !precomputed)
      trainer.set_reference_weights(read_init_weights(cfg, trainer, rt.groups));   // the reference stays frozen
    else if (cfg.task != "dpo" && !cfg.init.from.empty())
      log_info("note: init.from is not used: the run continues from its checkpoint");
  } else {
    if (!cfg.init.from.empty()) {
      if (!init_weights_set) trainer.set_initial_weights(read_init_weights(cfg, trainer, rt.groups));
      log_info(
          str("init: fresh optimizer, step 0", cfg.has_reference() ? "; the weights are also the reference model" : ""));
    }
    // Task ppo's value model: rl.value_from's weights, or init.from's transformer with a fresh head.
    if (Trainer* v = trainer.value_model(); v && !v->config().init.from.empty())
      v->set_initial_weights(read_init_weights(v->config(), *v, rt.groups));
  }

  const bool checkpoints = !cfg.checkpoint.dir.empty();
  // Steps are numbered by the optimizer updates done: step n is the n-th update, its checkpoint
  // step_<n>.h5, in the log, the metrics and the checkpoint names alike.
  const auto evaluates = [&](int n) { return cfg.train.eval_every > 0 && n % cfg.train.eval_every == 0; };
  const auto saves_after = [&](int n) { return checkpoints && cfg.checkpoint.every > 0 && n % cfg.checkpoint.every == 0; };
  Progress progress(cfg, *rt.backend, MPI_COMM_WORLD, first_step);
  const auto save_and_count = [&](int done) {
    const SaveResult r = save(cfg, trainer, rt.groups, done, tokenizer);
    summary.checkpoint_saved(r.bytes, r.seconds);
  };
  // A fresh run of train.steps = 0 keeps its starting weights (the initialisation, or init.from's)
  // as step_0.h5: the baseline a trained model is measured against.
  if (checkpoints && cfg.train.steps == 0 && resume.file.empty()) save_and_count(0);
  bool stopping = false;
  int skipped_in_row = 0;   // consecutive skipped updates: train.max_skipped of them stop the run
  // Reports a finished step and checks for a stop signal (every rank, in step order).
  const auto report = [&](StepStats s) {
    if (!s.skipped.empty()) log_info(str("step ", s.step, ": update skipped: ", s.skipped));
    skipped_in_row = s.skipped.empty() ? 0 : skipped_in_row + 1;
    if (evaluates(s.step)) {
      const auto t0 = std::chrono::steady_clock::now();
      const EvalResult r = trainer.evaluate(*data.val, cfg.train.eval_steps);
      s.val_loss = r.loss;
      s.val_accuracy = r.accuracy;
      summary.evaluation(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      log_info(cfg.preference_task()
                   ? str("eval  ", s.step, " | val ", cfg.task, " loss ", r.loss, " | val accuracy ", r.accuracy,
                         " | val margin ", r.margin)
                   : str("eval  ", s.step, " | val loss ", s.val_loss, " | val ppl ", std::exp(s.val_loss)));
    }
    progress.complete(s);
    summary.step(s);
    outputs.metrics->write(s);
    outputs.tensorboard->write(s);
    if (progress.printed(s.step)) log_info(progress.line(s));
    stopping = any_rank_stopping(*rt.groups.control) || stopping;
  };
  // Each step is queued before the previous one is reported, so the device need not wait for the
  // host between steps; a step after which the model is read (evaluation, checkpoint, the last
  // step, a stop signal) is finished at once, so that nothing else is queued behind it.
  for (int step = first_step; step < cfg.train.steps; ++step) {
    progress.before_queue(step + 1);
    trainer.queue_step(step);
    progress.after_queue(step + 1);
    if (trainer.queued_steps() > 1) report(trainer.finish_step());
    const int done = step + 1;
    const bool last = done == cfg.train.steps;
    if (!(evaluates(done) || saves_after(done) || last || stopping || skipped_in_row > 0)) continue;
    while (trainer.queued_steps() > 0) report(trainer.finish_step());
    if (skipped_in_row >= cfg.train.max_skipped) {
      // The skipped updates left the parameters and the optimizer state as the last applied step
      // made them; the checkpoint keeps them with the data position after the skipped batches.
      if (checkpoints) save_and_count(done);
      log_info(str("stopping: ", skipped_in_row, " updates in a row were skipped (train.max_skipped = ",
                    cfg.train.max_skipped, "); ", checkpoints ? str("the last good state is saved as step ", done)
                                                               : std::string("no checkpoint.dir, nothing saved"),
                    ". Lower train.lr, raise train.warmup_steps or check the data before resuming"));
      summary.finish(trainer.data_seconds(), progress.device_peak_bytes());
      return 1;
    }
    if (checkpoints && (saves_after(done) || stopping || last)) save_and_count(done);
    if (stopping) {
      log_info(str("stop signal received: ", checkpoints ? "checkpoint saved, " : "no checkpoint.dir, ",
                   "exiting after step ", done));
      summary.finish(trainer.data_seconds(), progress.device_peak_bytes());
      return 0;
    }
  }
  summary.finish(trainer.data_seconds(), progress.device_peak_bytes());
  if (!cfg.log.metrics.empty()) log_info("metrics: " + cfg.log.metrics);
  if (!outputs.tensorboard->path().empty()) log_info("tensorboard: " + outputs.tensorboard->path());
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
  require_reference_weights(cfg);
  check_memory_fits(cfg, MPI_COMM_WORLD, true);

  // Inputs are checked on every rank before anything is allocated.
  DataSources data;
  std::unique_ptr<Tokenizer> rl_tok;   // task grpo: its prompts' and answers' tokenizer
  RlPrompts rl_prompts;
  std::optional<ModelConfig> reward_model;   // task grpo with rl.reward = model
  RunOutputs outputs;
  ResumePlan resume;
  RunTokenizer tokenizer;
  std::string length_note, lr_note;
  collective_check(MPI_COMM_WORLD, [&] {
    if (!cfg.online_rl())
      data = (cfg.preference_task() ? open_preference_data
              : cfg.task == "sft"   ? open_sft_data
                                    : open_data)(cfg.data, cfg.model.seq_len, cfg.model.vocab_size, cfg.train.seed);
    if (cfg.train.eval_every > 0 && !data.val)
      throw InputError(str("train.eval_every = ", cfg.train.eval_every,
                           " but there is no validation data: set data.val, or data.split below 1"));
    outputs.metrics = std::make_unique<MetricsWriter>(rank == 0 ? cfg.log.metrics : std::string());
    outputs.tensorboard = std::make_unique<TensorBoardWriter>(rank == 0 ? cfg.log.tensorboard : std::string());
    if (rank == 0) check_writable("log.summary", cfg.log.summary);
    prepare_checkpoint_dir(cfg.checkpoint.dir);
    resume = resolve_resume(cfg.checkpoint);
    if ((resume.file.empty() || cfg.has_reference()) && !cfg.init.from.empty()) check_init_from(cfg);
    if (cfg.task == "ppo" && resume.file.empty() && !cfg.rl.value_from.empty())
      check_weights_match("rl.value_from", cfg.rl.value_from, value_config(cfg).model);
    tokenizer = run_tokenizer(cfg, resume.file);
    if (cfg.online_rl()) {
      rl_tok = rl_tokenizer(cfg, tokenizer.files);
      rl_prompts = read_rl_prompts(cfg, *rl_tok);
      if (cfg.rl.reward == "model") reward_model = reward_model_config(cfg, world);
      data.train_sequences = rl_prompts.prompts.size() * static_cast<uint64_t>(cfg.rl.group);
      data.description = str("  rl.prompts ", cfg.rl.prompts, ": ", rl_prompts.prompts.size(), " prompts (", rl_tok->name(),
                             " tokenizer, ", cfg.rl.chat_template, " template), ", cfg.rl.group, " answers to each of ",
                             cfg.train.global_batch_size / cfg.rl.group, " prompts per step");
    }
    length_note = resolve_train_steps(cfg.train, cfg.model.seq_len, data.train_sequences);
    if (!resume.file.empty())
      lr_note = keep_lr_decay(cfg.train, read_checkpoint_info(resume.file).config, resume.file);
  });

  Runtime rt = make_runtime(cfg, MPI_COMM_WORLD);
  if (cfg.online_rl())
    data.train = std::make_unique<PromptRollouts>(cfg, rt.groups, std::move(rl_tok), std::move(rl_prompts), reward_model);
  log_info("trident train: resolved configuration\n" + to_ini(cfg));
  log_info(str("layout ", layout_string(cfg), ": ", cfg.micro_batches_per_step(), " micro-batches per step, backend ",
               rt.backend->name(), " on ", world, " ranks"));
  log_info(describe_nodes(cfg, MPI_COMM_WORLD));
  if (cfg.parallel.zero >= 1 && cfg.parallel.dp == 1)
    log_info(str("note: parallel.zero = ", cfg.parallel.zero, " with dp = 1 shards nothing (one data-parallel rank)"));
  log_info("data:\n" + data.description);
  for (const std::string& note : {resume.note, length_note, lr_note})
    if (!note.empty()) log_info(note);
  if (!tokenizer.files.empty()) log_info("tokenizer: " + tokenizer.source + " (the checkpoints keep it)");
  if (!tokenizer.note.empty()) log_info(tokenizer.note);

  return abort_job_on_error("train", [&] { return train(cfg, rt, data, outputs, resume, tokenizer.files); });
}

}  // namespace trident
