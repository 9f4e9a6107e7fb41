// Pipelined generation: a model saved on one rank generates, on pp = 2 and on pp = 2 x tp = 2,
// the same completions as on one pipeline stage (bit for bit on the CPU backend against the same
// tp), on every stage, greedy and sampled, on the device and on the host; for GPT-2 and a Llama.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "learnable_source.hpp"
#include "test_support.hpp"
#include "trident/backend/cpu_backend.hpp"
#include "trident/config/parse.hpp"
#include "trident/io/checkpoint.hpp"
#include "trident/model/generator.hpp"
#include "trident/train/trainer.hpp"

namespace trident {
namespace {

// The generation tests' model with 4 layers (2 per stage at pp = 2).
RunConfig config(bool llama, int tp, int pp) {
  RunConfig c = test::generation_config(llama, tp, pp);
  c.model.n_layer = 4;
  return c;
}

// Greedy, temperature sampling on the device, top-k sampling on the host.
std::vector<GenerationParams> all_params() {
  std::vector<GenerationParams> out;
  for (auto [temperature, top_k] : {std::pair{0.0, 0}, {0.9, 0}, {1.2, 5}}) {
    GenerationParams p;
    p.sampling = SamplingParams{temperature, top_k, 1.0};
    p.max_new_tokens = 12;
    p.seed = 42;
    out.push_back(p);
  }
  return out;
}

// Trained on one rank for a few steps on learnable sequences (so that sampling has structure to
// follow) and saved under dir; returns the file.
std::string train_and_save(bool llama, const std::string& dir) {
  RunConfig cfg = config(llama, 1, 1);
  ParallelGroups g = test::mpi_groups(cfg, MPI_COMM_SELF);
  std::unique_ptr<Backend> be = make_cpu_backend();
  test::LearnableSource data(32, 60, 3);
  Trainer trainer(cfg, g, *be, data);
  for (int s = 0; s < cfg.train.steps; ++s) trainer.train_step(s);
  trainer.sync_parameters();
  CheckpointInfo info;
  info.step = cfg.train.steps;
  info.config = to_ini(cfg);
  info.consumed_samples = trainer.consumed_samples(cfg.train.steps);
  CheckpointConfig c;
  c.dir = dir;
  return save_checkpoint(c, info, trainer.model(), trainer.optimizer(), g).path;
}

// Each set of params' completions of test::ragged_prompts() on a layout of `comm`, from the checkpoint.
std::vector<std::vector<Completion>> generate_on(bool llama, int tp, int pp, const std::string& file, MPI_Comm comm) {
  RunConfig cfg = config(llama, tp, pp);
  ParallelGroups g = test::mpi_groups(cfg, comm);
  std::unique_ptr<Backend> be = make_cpu_backend();
  GptStage model(cfg.model, g, *be, 1, 0, size_t(1) << 20, false);
  load_checkpoint(file, model, nullptr, g);
  Generator gen(model, 3, 24);
  std::vector<std::vector<Completion>> out;
  for (const GenerationParams& p : all_params()) out.push_back(gen.generate(test::ragged_prompts(), p));
  return out;
}

void expect_same(const std::vector<std::vector<Completion>>& got, const std::vector<std::vector<Completion>>& want,
                 float logprob_tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    SCOPED_TRACE(str("params ", k));
    test::expect_same_completions(got[k], want[k], logprob_tol);
  }
}

class PipelineGeneration : public ::testing::TestWithParam<bool> {};   // llama or gpt2

TEST_P(PipelineGeneration, StagesGenerateWhatOneStageDoes) {
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  ASSERT_EQ(world, 4) << "needs 4 ranks";
  const bool llama = GetParam();
  int pid = getpid();
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  const std::string dir = std::filesystem::temp_directory_path() / str("trident_pp_generation_", pid);
  if (rank == 0) std::filesystem::create_directories(dir);
  std::string file;
  if (rank == 0) file = train_and_save(llama, dir);
  int n = static_cast<int>(file.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  file.resize(n);
  MPI_Bcast(file.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);

  // References on every rank: one rank alone, and tp = 2 on ranks {0, 1} and {2, 3}.
  const auto one = generate_on(llama, 1, 1, file, MPI_COMM_SELF);
  MPI_Comm pair;
  MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &pair);
  const auto tp2 = generate_on(llama, 2, 1, file, pair);

  // pp = 2 on ranks {0, 1} (and {2, 3}): every stage holds what one stage generates, bit for bit.
  SCOPED_TRACE(llama ? "llama" : "gpt2");
  {
    SCOPED_TRACE(str("pp 2, stage ", rank % 2));
    expect_same(generate_on(llama, 1, 2, file, pair), one, 0);
  }
  // pp = 2 x tp = 2: what tp = 2 generates on one stage, bit for bit, and one rank's within the
  // tolerance of a TP sum's order.
  {
    SCOPED_TRACE(str("pp 2 x tp 2, rank ", rank));
    const auto got = generate_on(llama, 2, 2, file, MPI_COMM_WORLD);
    expect_same(got, tp2, 0);
    expect_same(got, one, 1e-5f);
  }
  MPI_Comm_free(&pair);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Arch, PipelineGeneration, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "llama" : "gpt2"; });

}  // namespace
}  // namespace trident
