// Configuration: INI + flag precedence, help text, and the bad-input cases (each a one-line
// InputError naming the option or file:line).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"
#include "trident/train/trainer.hpp"

namespace trident {
namespace {

std::string write_file(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

RunConfig parse(const std::vector<std::string>& args, int world = 1) {
  RunConfig c = parse_args(args).cfg;
  validate_run_config(c, world);
  return c;
}

// Expects an InputError whose message contains every fragment and is a single line.
void expect_error(const std::vector<std::string>& args, int world, const std::vector<std::string>& fragments) {
  try {
    parse(args, world);
    FAIL() << "no error for " << ::testing::PrintToString(args);
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const std::string& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
  }
}

TEST(Config, LaterFilesAndFlagsWin) {
  std::string a = write_file("a.cfg", "backend = cpu\n[model]\nn_layer = 3\nn_head = 2\nn_embd = 8\n# comment\n");
  std::string b = write_file("b.cfg", "[model]\nn_layer = 6\n[train]\nlr = 1e-3\n");
  RunConfig c = parse({"--config", a, "--config", b, "--train.lr", "2e-3"});
  EXPECT_EQ(c.model.n_layer, 6);        // later file
  EXPECT_EQ(c.model.n_head, 2);         // only in the first file
  EXPECT_DOUBLE_EQ(c.train.lr, 2e-3);   // flag beats files
  EXPECT_EQ(c.backend, "cpu");
  EXPECT_EQ(c.config_files.size(), 2u);
}

TEST(Config, ResolvesDataParallelSizeFromWorld) {
  RunConfig c = parse({"--parallel.tp", "2", "--model.n_head", "4", "--model.n_embd", "32",
                       "--train.global_batch_size", "16", "--train.micro_batch_size", "2"}, 8);
  EXPECT_EQ(c.parallel.dp, 4);
  EXPECT_EQ(c.micro_batches_per_step(), 2);
}

// n_layer 12 by default; with pp 2 the step has global_batch_size / 4 micro-batches.
TEST(Config, PipelineSchedulesAndVirtualStages) {
  const std::vector<std::string> pp2 = {"--parallel.pp", "2", "--train.micro_batch_size", "4"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), pp2.begin(), pp2.end());
    return extra;
  };
  RunConfig c = parse(with({"--parallel.schedule", "interleaved", "--parallel.virtual_stages", "3",
                            "--train.global_batch_size", "8"}), 2);
  EXPECT_EQ(c.parallel.virtual_stages, 3);
  EXPECT_EQ(parse(with({"--parallel.schedule", "zero_bubble", "--train.global_batch_size", "8"}), 2).parallel.schedule,
            "zero_bubble");
  expect_error(with({"--parallel.virtual_stages", "2", "--train.global_batch_size", "8"}), 2,
               {"parallel.virtual_stages = 2", "interleaved only"});
  expect_error(with({"--parallel.schedule", "interleaved", "--parallel.virtual_stages", "0"}), 2,
               {"parallel.virtual_stages = 0", "at least 1"});
  expect_error(with({"--parallel.schedule", "interleaved", "--train.global_batch_size", "8"}), 2,
               {"parallel.virtual_stages = 1", "at least 2"});
  expect_error({"--parallel.schedule", "interleaved", "--parallel.virtual_stages", "2"}, 1,
               {"parallel.schedule = interleaved", "parallel.pp >= 2"});
  expect_error(with({"--parallel.schedule", "interleaved", "--parallel.virtual_stages", "4"}), 2,
               {"parallel.virtual_stages = 4", "parallel.pp = 2", "model.n_layer = 12"});
  expect_error(with({"--parallel.schedule", "interleaved", "--parallel.virtual_stages", "2",
                     "--train.global_batch_size", "12"}), 2,
               {"train.global_batch_size = 12", "3 micro-batches", "multiple of pp = 2", "multiple of 8"});
  expect_error({"--parallel.pp", "4", "--parallel.schedule", "zero_bubble", "--train.global_batch_size", "8",
                "--train.micro_batch_size", "4"}, 4,
               {"zero_bubble with pp = 4", "needs at least 4"});
  // zero_bubble runs ZeRO-2, not ZeRO-3 (dp 2 x pp 2).
  EXPECT_EQ(parse(with({"--parallel.schedule", "zero_bubble", "--train.global_batch_size", "16", "--parallel.zero",
                        "2"}), 4).parallel.zero, 2);
  expect_error(with({"--parallel.schedule", "zero_bubble", "--train.global_batch_size", "16", "--parallel.zero", "3"}),
               4, {"parallel.zero = 3", "not zero_bubble"});
}

TEST(Config, TpOverlapNeedsAnEvenMicroBatchOnlyWithTensorParallelism) {
  // tp = 1: the option has no effect, so an odd micro-batch is fine (parallel.auto may pick one).
  RunConfig c = parse({"--parallel.tp_overlap", "true", "--train.micro_batch_size", "3", "--train.global_batch_size", "3"});
  EXPECT_TRUE(c.parallel.tp_overlap);
  EXPECT_NO_THROW(parse({"--parallel.tp", "2", "--parallel.tp_overlap", "true", "--train.micro_batch_size", "4",
                         "--train.global_batch_size", "4"}, 2));
}

// Task grpo's options, and the layouts its generation needs: pp 1, each DP rank's sequences whole
// groups of answers.
TEST(Config, GrpoOptionsAndLayout) {
  const std::vector<std::string> base = {"--task", "grpo", "--rl.prompts", "p.jsonl", "--train.micro_batch_size", "4",
                                         "--train.global_batch_size", "16"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const RunConfig c = parse(with({"--rl.kl_beta", "0.1", "--rl.ppo_epochs", "2", "--rl.loss_norm", "token"}), 1);
  EXPECT_EQ(c.rl.group, 8);
  EXPECT_EQ(c.rl.ppo_epochs, 2);
  EXPECT_TRUE(c.has_reference());
  EXPECT_FALSE(parse(with({"--rl.kl_beta", "0"})).has_reference());
  expect_error({"--task", "grpo"}, 1, {"rl.prompts", "JSON Lines"});
  expect_error(with({"--rl.group", "1"}), 1, {"rl.group = 1", "at least 2"});
  expect_error(with({"--rl.group", "3"}), 1, {"rl.group = 3", "must divide the 16 sequences"});
  expect_error({"--task", "grpo", "--rl.prompts", "p.jsonl", "--train.micro_batch_size", "2",
                "--train.global_batch_size", "16", "--rl.group", "8"},
               4, {"rl.group = 8", "must divide the 4 sequences"});
  // The answers are generated on any pipeline layout; a reward model scores them on one stage.
  EXPECT_EQ(parse(with({"--parallel.pp", "2", "--model.n_layer", "2"}), 2).parallel.pp, 2);
  expect_error(with({"--parallel.pp", "2", "--model.n_layer", "2", "--rl.reward", "model", "--rl.reward_model", "rm.h5"}),
               2, {"parallel.pp = 2", "rl.reward = model"});
  expect_error(with({"--rl.max_new_tokens", "1024"}), 1, {"rl.max_new_tokens = 1024", "model.seq_len"});
  expect_error(with({"--rl.loss_norm", "pairs"}), 1, {"rl.loss_norm = pairs", "sequence or token"});
  expect_error(with({"--rl.reward", "judge"}), 1, {"rl.reward = judge", "exact_match or model"});
  expect_error(with({"--rl.reward", "model"}), 1, {"rl.reward_model", "needs a reward model's checkpoint"});
  expect_error(with({"--rl.clip_eps", "0"}), 1, {"rl.clip_eps = 0", "(0, 1)"});
  expect_error(with({"--rl.temperature", "0"}), 1, {"rl.temperature = 0", "> 0"});
  expect_error(with({"--rl.generation_batch", "0"}), 1, {"rl.generation_batch = 0", "at least 1"});
  expect_error(with({"--rl.prefill_tokens", "0"}), 1, {"rl.prefill_tokens = 0", "at least 1"});
}

// Task ppo's options: grpo's plus GAE, the value model and the KL control; a group of 1 is fine
// (no group normalisation), and the KL control's options belong to ppo alone.
TEST(Config, PpoOptions) {
  const std::vector<std::string> base = {"--task", "ppo", "--rl.prompts", "p.jsonl", "--train.micro_batch_size", "4",
                                         "--train.global_batch_size", "16"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const RunConfig c = parse(with({"--rl.group", "1", "--rl.gamma", "0.99", "--rl.lambda", "0.9", "--rl.value_clip",
                                  "0.5", "--rl.kl_target", "6", "--rl.value_lr", "1e-5"}),
                            1);
  EXPECT_TRUE(c.online_rl());
  EXPECT_TRUE(c.has_reference());
  EXPECT_EQ(c.rl.group, 1);
  EXPECT_DOUBLE_EQ(c.rl.gamma, 0.99);
  EXPECT_DOUBLE_EQ(c.rl.lambda, 0.9);
  EXPECT_DOUBLE_EQ(c.rl.value_clip, 0.5);
  EXPECT_DOUBLE_EQ(c.rl.kl_target, 6);
  const RunConfig v = value_config(c);
  EXPECT_TRUE(v.model.score_head);
  EXPECT_DOUBLE_EQ(v.train.lr, 1e-5);
  EXPECT_DOUBLE_EQ(v.train.min_lr, c.train.min_lr * 1e-5 / c.train.lr);
  EXPECT_EQ(value_config(parse(with({"--rl.value_from", "rm.h5"}), 1)).init.from, "rm.h5");
  expect_error(with({"--rl.group", "0"}), 1, {"rl.group = 0", "at least 1"});
  expect_error(with({"--rl.gamma", "0"}), 1, {"rl.gamma = 0", "(0, 1]"});
  expect_error(with({"--rl.lambda", "1.5"}), 1, {"rl.lambda = 1.5", "[0, 1]"});
  expect_error(with({"--rl.value_clip", "-1"}), 1, {"rl.value_clip = -1", "> 0"});
  expect_error(with({"--rl.value_lr", "-1"}), 1, {"rl.value_lr = -1", ">= 0"});
  expect_error(with({"--rl.kl_horizon", "0"}), 1, {"rl.kl_horizon = 0", "> 0"});
  expect_error(with({"--rl.kl_target", "1", "--rl.kl_beta", "0"}), 1, {"rl.kl_target = 1", "rl.kl_beta > 0"});
  EXPECT_EQ(parse(with({"--parallel.pp", "2", "--model.n_layer", "2"}), 2).parallel.pp, 2);
  const std::vector<std::string> grpo = {"--task", "grpo", "--rl.prompts", "p.jsonl", "--train.micro_batch_size", "4",
                                         "--train.global_batch_size", "16"};
  auto grpo_with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = grpo;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  expect_error(grpo_with({"--rl.kl_target", "1"}), 1, {"rl.kl_target = 1", "task ppo"});
  expect_error(grpo_with({"--rl.value_from", "rm.h5"}), 1, {"rl.value_from = rm.h5", "task ppo"});
}

TEST(Config, DpoOptionsAndEvenMicroBatches) {
  const RunConfig c = parse({"--task", "dpo", "--dpo.beta", "0.2", "--dpo.label_smoothing", "0.1",
                             "--train.micro_batch_size", "2", "--train.global_batch_size", "8"});
  EXPECT_EQ(c.task, "dpo");
  EXPECT_DOUBLE_EQ(c.dpo.beta, 0.2);
  EXPECT_DOUBLE_EQ(c.dpo.label_smoothing, 0.1);
  EXPECT_TRUE(c.preference_task());
  expect_error({"--task", "dpo", "--train.micro_batch_size", "3", "--train.global_batch_size", "3"}, 1,
               {"train.micro_batch_size = 3", "must be even for task dpo", "preference pairs"});
  expect_error({"--task", "dpo", "--dpo.beta", "0", "--train.micro_batch_size", "2"}, 1, {"dpo.beta = 0", "> 0"});
  expect_error({"--task", "dpo", "--dpo.label_smoothing", "0.5", "--train.micro_batch_size", "2"}, 1,
               {"dpo.label_smoothing = 0.5", "[0, 0.5)"});
  expect_error({"--task", "rlhf"}, 1, {"task = rlhf", "pretrain, sft, dpo, reward, grpo or ppo"});
  EXPECT_EQ(parse({"--task", "dpo", "--dpo.loss", "ipo", "--train.micro_batch_size", "2"}, 1).dpo.loss, "ipo");
  expect_error({"--task", "dpo", "--dpo.loss", "hinge", "--train.micro_batch_size", "2"}, 1,
               {"dpo.loss = hinge", "sigmoid or ipo"});
  expect_error({"--task", "dpo", "--dpo.loss", "ipo", "--dpo.label_smoothing", "0.1", "--train.micro_batch_size", "2"},
               1, {"dpo.label_smoothing = 0.1", "dpo.loss = ipo"});
  expect_error({"--task", "dpo", "--dpo.reference", "file", "--train.micro_batch_size", "2"}, 1,
               {"dpo.reference = file", "model or precomputed"});
}

TEST(Config, HelpListsEveryOptionWithDefaults) {
  std::string help = run_options_help();
  for (const char* key : {"model.n_layer", "model.n_head", "model.n_embd", "model.vocab_size", "model.seq_len",
                          "parallel.tp", "parallel.pp", "parallel.dp", "parallel.schedule", "parallel.zero",
                          "train.steps", "train.micro_batch_size", "train.global_batch_size", "train.lr",
                          "train.min_lr", "train.warmup_steps", "train.weight_decay", "train.beta1", "train.beta2",
                          "train.grad_clip", "train.seed", "data.train", "log.metrics", "log.every", "backend"})
    EXPECT_NE(help.find(key), std::string::npos) << key;
  EXPECT_NE(help.find("(=12)"), std::string::npos);
  EXPECT_NE(help.find("[parallel]"), std::string::npos);
}

TEST(Config, CudaSwitchesAreOptions) {
  RunConfig c = parse({"--cuda.attention_kernels", "mma", "--cuda.side_stream", "false", "--cuda.gemm_autotune",
                       "false", "--cuda.gemm_log", "true", "--cuda.sync_launches", "true"});
  EXPECT_EQ(c.cuda.attention_kernels, "mma");
  EXPECT_FALSE(c.cuda.side_stream);
  EXPECT_FALSE(c.cuda.gemm_autotune);
  EXPECT_TRUE(c.cuda.gemm_log);
  EXPECT_TRUE(c.cuda.sync_launches);
  const std::string help = run_options_help();
  EXPECT_NE(help.find("[cuda]"), std::string::npos);
  for (const char* key : {"cuda.attention_kernels", "cuda.side_stream", "cuda.gemm_autotune", "cuda.gemm_log",
                          "cuda.sync_launches"})
    EXPECT_NE(help.find(key), std::string::npos) << key;
}

TEST(Config, HelpOfAFewOptionsListsOnlyThoseAndTheirSections) {
  const std::string help = run_options_help(nullptr, {"backend", "train.seed", "data."});
  for (const char* key : {"--help", "--config", "backend", "train.seed", "data.train", "data.val", "data.split",
                          "Training [train]", "Data [data]"})
    EXPECT_NE(help.find(key), std::string::npos) << key;
  for (const char* key : {"train.lr", "train.steps", "model.", "parallel.", "checkpoint.", "log.", "cuda.",
                          "[model]", "[cuda]"})
    EXPECT_EQ(help.find(key), std::string::npos) << key;
}

TEST(Config, ToIniRoundTrips) {
  RunConfig c = parse({"--model.n_layer", "7", "--train.lr", "0.00025", "--data.train", "0.3 x 0.7 y"});
  std::string path = write_file("roundtrip.cfg", to_ini(c));
  RunConfig d = parse({"--config", path});
  EXPECT_EQ(to_ini(c), to_ini(d));
  EXPECT_EQ(d.model.n_layer, 7);
  EXPECT_EQ(d.data.train, "0.3 x 0.7 y");
}

// A removed option names itself, why and the fix, on the command line and in a file (any value);
// a config stored in an older checkpoint, which lists every option, still reads.
TEST(Config, RemovedOptions) {
  const std::vector<std::string> why = {"parallel.dp_copy_engine was removed", "docs/PERFORMANCE.md"};
  for (const char* value : {"true", "false"}) {
    std::vector<std::string> fragments = why;
    fragments.push_back("drop --parallel.dp_copy_engine");
    expect_error({"--parallel.dp_copy_engine", value}, 1, fragments);
    expect_error({std::string("--parallel.dp_copy_engine=") + value}, 1, fragments);
    const std::string file =
        write_file("removed.cfg", std::string("[parallel]\nzero = 1\ndp_copy_engine = ") + value + "\n");
    fragments = why;
    fragments.push_back("removed.cfg:3");
    fragments.push_back("delete the line");
    expect_error({"--config", file}, 1, fragments);
  }
  const RunConfig stored = parse_config_text("[parallel]\nzero = 1\ndp_copy_engine = true\n", "stored config");
  EXPECT_EQ(stored.parallel.zero, 1);
}

TEST(Config, BadInputCases) {
  std::string malformed = write_file("malformed.cfg", "[model]\nn_layer = 2\nthis line is wrong\n");
  std::string badsec = write_file("badsec.cfg", "[model\nn_layer = 2\n");
  std::string unknown = write_file("unknown.cfg", "[model]\nn_layers = 2\n");
  std::string badval = write_file("badval.cfg", "[train]\nlr = fast\n");
  const int w = 1;
  expect_error({"--model.n_embd", "100", "--model.n_head", "12"}, w, {"model.n_embd", "100", "n_head"});
  expect_error({"--model.n_positions", "1024", "--model.seq_len", "2048"}, w, {"model.seq_len", "2048", "n_positions = 1024"});
  expect_error({"--data.pack", "true"}, w, {"data.pack", "task = sft"});
  expect_error({"--train.global_batch_size", "10", "--train.micro_batch_size", "4"}, w,
               {"train.global_batch_size", "10", "micro_batch_size*dp"});
  expect_error({"--bogus.option", "1"}, w, {"bogus.option"});
  expect_error({"--config", malformed}, w, {"malformed.cfg:3", "this line is wrong"});
  expect_error({"--config", badsec}, w, {"badsec.cfg:1", "section"});
  expect_error({"--config", unknown}, w, {"unknown.cfg:2", "model.n_layers"});
  expect_error({"--config", badval}, w, {"badval.cfg:2", "fast", "train.lr"});
  expect_error({"--config", "/nonexistent/x.cfg"}, w, {"/nonexistent/x.cfg"});
  expect_error({"--model.n_layer", "0"}, w, {"model.n_layer", "0"});
  expect_error({"--parallel.tp", "5"}, 5, {"parallel.tp", "n_head"});
  expect_error({"--parallel.pp", "5"}, 5, {"parallel.pp", "n_layer"});
  expect_error({"--parallel.tp", "2"}, 3, {"does not divide the world size 3"});
  expect_error({"--parallel.dp", "2"}, 4, {"parallel.dp*tp*pp", "number of ranks 4"});
  expect_error({"--parallel.schedule", "zigzag"}, w,
               {"parallel.schedule", "zigzag", "gpipe, 1f1b, interleaved or zero_bubble"});
  expect_error({"--parallel.zero", "4"}, w, {"parallel.zero = 4", "must be 0, 1, 2 or 3"});
  EXPECT_EQ(parse({"--parallel.zero", "3"}, 2).parallel.zero, 3);
  expect_error({"--parallel.zero", "3", "--parallel.pp", "2", "--parallel.schedule", "interleaved",
                "--parallel.virtual_stages", "2", "--train.global_batch_size", "16"},
               4, {"parallel.zero = 3", "gpipe and 1f1b", "interleaved"});
  expect_error({"--parallel.zero", "3", "--task", "dpo", "--train.micro_batch_size", "2"}, 2,
               {"parallel.zero = 3", "dpo.reference = model", "precomputed"});
  expect_error({"--parallel.pp", "4", "--train.global_batch_size", "8", "--train.micro_batch_size", "4"}, 4,
               {"1f1b", "needs at least 4", "global_batch_size >= 16"});
  expect_error({"--parallel.tp", "2", "--parallel.tp_overlap", "true", "--train.micro_batch_size", "3",
                "--train.global_batch_size", "3"},
               2, {"train.micro_batch_size", "3", "even", "parallel.tp_overlap"});
  expect_error({"--parallel.tp", "2", "--parallel.sequence_parallel", "true", "--parallel.tp_overlap", "true",
                "--train.micro_batch_size", "2", "--train.global_batch_size", "2"},
               2, {"train.micro_batch_size = 2", "2 x parallel.tp = 4", "parallel.tp_overlap", "sequence_parallel"});
  expect_error({"--parallel.tp", "4", "--parallel.sequence_parallel", "true", "--model.seq_len", "3",
                "--train.micro_batch_size", "2", "--train.global_batch_size", "2"},
               4, {"parallel.sequence_parallel", "6 rows", "tp = 4"});
  expect_error({"--parallel.tp", "4", "--parallel.tp_fused_sum", "true"}, 4,
               {"parallel.tp_fused_sum", "parallel.sequence_parallel = true", "tp = 4"});
  EXPECT_NO_THROW(parse({"--parallel.tp", "4", "--parallel.tp_fused_sum", "true", "--parallel.sequence_parallel", "true"},
                        4));
  expect_error({"--parallel.tp", "16", "--parallel.tp_fused_sum", "true", "--parallel.sequence_parallel", "true",
                "--model.n_head", "16", "--model.n_embd", "256"},
               16, {"parallel.tp_fused_sum", "tp <= 8", "tp = 16"});
  expect_error({"--parallel.tp", "4", "--parallel.tp_fused_sum", "true", "--parallel.sequence_parallel", "true",
                "--parallel.tp_split_layernorm_bwd", "true"},
               4, {"parallel.tp_split_layernorm_bwd", "needs tp = 2", "tp = 4"});
  expect_error({"--parallel.tp", "2", "--parallel.tp_split_layernorm_bwd", "true"}, 2,
               {"parallel.tp_split_layernorm_bwd", "parallel.tp_fused_sum"});
  expect_error({"--parallel.tp", "2", "--parallel.tp_fused_sum", "true", "--parallel.tp_split_layernorm_bwd", "true",
                "--model.seq_len", "3", "--train.micro_batch_size", "1", "--train.global_batch_size", "1"},
               2, {"parallel.tp_split_layernorm_bwd", "3 rows", "even"});
  expect_error({"--parallel.tp_sm_margin", "65"}, w, {"parallel.tp_sm_margin", "65", "between 0 and 64"});
  expect_error({"--parallel.tp_comm_ctas", "-1"}, w, {"parallel.tp_comm_ctas", "-1", "between 0 and 64"});
  expect_error({"--parallel.dp_comm_ctas", "100"}, w, {"parallel.dp_comm_ctas", "100", "between 0 and 64"});
  expect_error({"--parallel.gpus_per_node", "-1"}, w, {"parallel.gpus_per_node", "-1", "at least 1"});
  expect_error({"--parallel.gpus_per_node", "3", "--train.global_batch_size", "4"}, 4,
               {"parallel.gpus_per_node", "3", "must divide the number of ranks 4"});
  expect_error({"--train.lr", "-1"}, w, {"train.lr"});
  expect_error({"--train.min_lr", "1", "--train.lr", "0.1"}, w, {"train.min_lr"});
  expect_error({"--train.beta2", "1.0"}, w, {"train.beta2"});
  expect_error({"--train.grad_clip", "-0.5"}, w, {"train.grad_clip"});
  expect_error({"--backend", "tpu"}, w, {"backend", "tpu"});
  expect_error({"--cuda.attention_kernels", "flash"}, w, {"cuda.attention_kernels", "flash", "auto, wgmma or mma"});
  expect_error({"--log.every", "0"}, w, {"log.every"});
  expect_error({"--model.n_layer", "two"}, w, {"model.n_layer"});
  // Llama: key/value heads over TP (split, or replicated when tp is a multiple), its MLP width,
  // options gpt2 has no place for, and the fused TP sums.
  // Each call's options over these (an option may be given once).
  auto with = [](std::map<std::string, std::string> extra) {
    std::map<std::string, std::string> o = {{"--model.arch", "llama"}, {"--model.n_head", "6"},
                                            {"--model.n_embd", "96"}, {"--model.n_kv_head", "2"},
                                            {"--model.ffn_hidden_size", "96"}};
    for (const auto& [k, v] : extra) o[k] = v;
    std::vector<std::string> a;
    for (const auto& [k, v] : o) a.insert(a.end(), {k, v});
    return a;
  };
  expect_error(with({{"--model.n_kv_head", "4"}}), w, {"model.n_kv_head = 4", "must divide model.n_head = 6"});
  expect_error(with({{"--parallel.tp", "3"}}), 3, {"parallel.tp = 3", "model.n_kv_head = 2", "replicated"});
  EXPECT_NO_THROW(parse(with({{"--parallel.tp", "6"}}), 6));   // 3 ranks per key/value head
  expect_error(with({{"--parallel.tp", "2"}, {"--model.ffn_hidden_size", "97"}}), 2,
               {"parallel.tp = 2", "model.ffn_hidden_size = 97"});
  expect_error(with({{"--model.n_embd", "90"}}), w,
               {"model.n_embd", "15", "even"});
  // The fused TP sums (RMSNorm kernels add the partials), alone and with the split backward, on
  // tp 2, beyond it with sequence parallelism only, as for gpt2.
  EXPECT_NO_THROW(parse(with({{"--parallel.tp", "2"}, {"--parallel.tp_fused_sum", "true"},
                              {"--parallel.tp_split_layernorm_bwd", "true"}, {"--parallel.tp_overlap", "true"},
                              {"--train.micro_batch_size", "2"}}),
                        2));
  expect_error(with({{"--parallel.tp", "6"}, {"--parallel.tp_fused_sum", "true"}}), 6,
               {"parallel.tp_fused_sum", "sequence_parallel", "tp = 6"});
  expect_error({"--model.ffn_hidden_size", "100"}, w, {"model.ffn_hidden_size = 100", "needs model.arch = llama"});
  expect_error({"--model.tie_embeddings", "false"}, w, {"model.tie_embeddings", "needs model.arch = llama"});
  expect_error({"--model.tie_embeddings", "maybe"}, w, {"model.tie_embeddings", "true, false or auto"});
  expect_error({"--model.qkv_bias", "true"}, w, {"model.qkv_bias", "needs model.arch = llama"});
  expect_error(with({{"--model.rope_theta", "0.5"}}), w, {"model.rope_theta", "> 1"});
  expect_error({"--parallel.recompute", "some"}, w, {"parallel.recompute = some", "none, selective or full"});
  expect_error({"--parallel.recompute", "selective", "--parallel.tp", "2", "--parallel.tp_overlap", "true"}, 2,
               {"parallel.recompute = selective", "tp_overlap"});
  expect_error({"--parallel.recompute", "full", "--parallel.tp", "2", "--parallel.tp_fused_sum", "true"}, 2,
               {"parallel.recompute = full", "tp_fused_sum without sequence_parallel"});
  expect_error({"--parallel.recompute_layers", "13"}, w, {"parallel.recompute_layers = 13", "model.n_layer = 12"});
}

// Layout and batch sizes whose products overflow an int: one line, never SIGFPE or a wrapped product.
TEST(Config, LayoutProductsAreCheckedIn64Bits) {
  expect_error({"--parallel.tp", "65536", "--parallel.pp", "65536"}, 1,
               {"parallel.tp*parallel.pp = 4294967296", "exceeds the number of ranks 1"});
  expect_error({"--parallel.tp", "46341", "--parallel.pp", "46341"}, 4, {"parallel.tp*parallel.pp = 2147488281"});
  expect_error({"--train.micro_batch_size", "1073741824"}, 4, {"train.global_batch_size", "4294967296"});
  expect_error({"--train.micro_batch_size", "4194304", "--train.global_batch_size", "4194304"}, 1,
               {"train.micro_batch_size", "4294967296 rows"});
  expect_error({"--model.n_layer", "1000000000"}, 1, {"model.n_layer = 1000000000", "between 1 and 4096"});
  expect_error({"--model.n_embd", "1073741824", "--model.n_head", "1"}, 1, {"model.n_embd", "between 1 and"});
  expect_error({"--model.seq_len", "1073741824"}, 1, {"model.seq_len", "between 1 and"});
  expect_error({"--train.global_batch_size", "2147483647", "--train.micro_batch_size", "1"}, 1,
               {"train.global_batch_size", "2147483647 micro-batches per step"});
}

TEST(Config, ConfigFileMustBeAFileWithEachKeyOnce) {
  expect_error({"--config", ::testing::TempDir()}, 1, {"is a directory"});
  const std::string dup = write_file("dup.cfg", "[model]\nn_layer = 5\n[train]\nlr = 1\n[model]\nn_layer = 6\n");
  expect_error({"--config", dup}, 1, {"dup.cfg:6", "model.n_layer", "line 2"});
}

// Binary bytes and huge values are quoted, escaped and cut: the message stays one short line.
TEST(Config, ErrorsQuoteAndCutWhatTheyEcho) {
  const std::string binary = write_file("binary.cfg", std::string("\x01\x7f\xff\0garbage line\n", 17));
  try {
    parse({"--config", binary});
    FAIL() << "binary config accepted";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'\\x01\\x7f\\xff\\x00garbage line'"), std::string::npos) << msg;
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--model.n_layer", std::string(100000, '7') + "\x01"},
        std::vector<std::string>{"--" + std::string(100000, 'x'), "1"}}) {
    try {
      parse(args);
      FAIL() << "huge value accepted";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_LT(msg.size(), 400u) << msg.substr(0, 400);
      EXPECT_NE(msg.find(" bytes)"), std::string::npos) << msg.substr(0, 400);
    }
  }
}

}  // namespace
}  // namespace trident
