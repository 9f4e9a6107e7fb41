// TraceRange placement: with recording hooks installed (as the CUDA backend installs NVTX ones),
// a training step, an evaluation and a checkpoint save open the named ranges a profiler timeline
// shows: forward, backward, optimizer, each collective and pipeline transfer by axis, evaluation,
// checkpoint save; every range is closed.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "trident/backend/cpu_backend.hpp"
#include "trident/config/parse.hpp"
#include "trident/core/trace.hpp"
#include "trident/io/checkpoint.hpp"
#include "trident/io/random_tokens.hpp"
#include "trident/train/trainer.hpp"

namespace trident {
namespace {

std::map<std::string, int> g_opened;
int g_depth = 0;

RunConfig config(int dp, int pp) {
  RunConfig c = test::tiny_config();
  c.model.n_head = 2;
  c.model.n_embd = 16;
  c.model.vocab_size = 64;
  c.model.seq_len = 8;
  c.train.micro_batch_size = 1;
  c.train.global_batch_size = 4;
  c.parallel.dp = dp;
  c.parallel.pp = pp;
  return c;
}

std::map<std::string, int> ranges_of_a_run(int dp, int pp, const std::string& dir) {
  RunConfig cfg = config(dp, pp);
  ParallelGroups g = test::mpi_groups(cfg, MPI_COMM_WORLD);
  std::unique_ptr<Backend> be = make_cpu_backend();
  RandomTokens data(cfg.model.seq_len, cfg.model.vocab_size, 3);
  Trainer trainer(cfg, g, *be, data);
  g_opened.clear();
  set_trace_hooks(TraceHooks{[](const char* name) { ++g_opened[name], ++g_depth; }, [] { --g_depth; }});
  trainer.train_step(0);
  trainer.evaluate(data, 1);
  CheckpointInfo info;
  info.step = 1;
  info.config = to_ini(cfg);
  info.consumed_samples = trainer.consumed_samples(1);
  CheckpointConfig c;
  c.dir = dir;
  c.keep = 1;
  trainer.sync_parameters();
  save_checkpoint(c, info, trainer.model(), trainer.optimizer(), g);
  set_trace_hooks(TraceHooks{});
  EXPECT_EQ(g_depth, 0) << "a range was left open";
  return g_opened;
}

// One directory for all ranks (a checkpoint is written together), named by rank 0's process.
std::string run_dir(const char* name) {
  int pid = getpid();
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  const std::string dir = std::filesystem::temp_directory_path() / str("trident_trace_", name, "_", pid);
  std::filesystem::create_directories(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

// Removed by rank 0 once every rank is done with it.
void remove_dir(const std::string& dir) {
  MPI_Barrier(MPI_COMM_WORLD);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) std::filesystem::remove_all(dir);
}

TEST(TraceRanges, PipelineStep) {
  const std::string dir = run_dir("pp");
  std::map<std::string, int> r = ranges_of_a_run(1, 2, dir);
  for (const char* name : {"forward", "backward", "optimizer", "pp send/recv", "world all-reduce", "evaluation",
                           "checkpoint save"})
    EXPECT_GT(r[name], 0) << "no '" << name << "' range";
  EXPECT_EQ(r["forward"], 4 + 4) << "4 micro-batches trained and 4 evaluated";
  EXPECT_EQ(r["backward"], 4);
  remove_dir(dir);
}

// zero_bubble's weight-gradient passes run while the exchange group posted before them is in
// flight: on every stage some backward_weight range opens after a group's post ("pp send/recv")
// and before its wait ("wait pp send/recv"), as the plan simulator times them. An executor that
// completed each group right after posting it would open none that way.
TEST(TraceRanges, ZeroBubbleWeightPassesRunBesideTransfers) {
  RunConfig cfg = config(1, 2);
  cfg.parallel.schedule = "zero_bubble";
  ParallelGroups g = test::mpi_groups(cfg, MPI_COMM_WORLD);
  std::unique_ptr<Backend> be = make_cpu_backend();
  RandomTokens data(cfg.model.seq_len, cfg.model.vocab_size, 3);
  Trainer trainer(cfg, g, *be, data);
  static std::vector<std::string> order;
  order.clear();
  set_trace_hooks(TraceHooks{[](const char* name) { order.emplace_back(name); }, [] {}});
  trainer.train_step(0);
  set_trace_hooks(TraceHooks{});
  int weight_passes = 0, beside = 0;
  bool in_flight = false;
  for (const std::string& name : order) {
    if (name == "pp send/recv") in_flight = true;
    if (name == "wait pp send/recv") in_flight = false;
    if (name == "backward_weight") {
      ++weight_passes;
      beside += in_flight ? 1 : 0;
    }
  }
  EXPECT_EQ(weight_passes, 4) << "one weight pass per micro-batch";
  EXPECT_GT(beside, 0) << "no weight pass ran while an exchange group was in flight";
}

TEST(TraceRanges, DataParallelStep) {
  const std::string dir = run_dir("dp");
  std::map<std::string, int> r = ranges_of_a_run(2, 1, dir);
  EXPECT_GT(r["dp all-reduce"], 0) << "no 'dp all-reduce' range";
  EXPECT_EQ(r["optimizer"], 1);
  remove_dir(dir);
}

}  // namespace
}  // namespace trident
