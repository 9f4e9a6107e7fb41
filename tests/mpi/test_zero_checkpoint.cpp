// Checkpoints across ZeRO stages on two ranks: a run saved at step 5 under one of parallel.zero =
// 0, 1, 2, 3 and resumed under another continues exactly as the uninterrupted run (one micro-batch
// per step and dp = 2, where every stage computes the same bits: each sum has two terms), and
// every stage's file holds the same values as ZeRO-0's (ZeRO-3 writes the model from its parameter
// shards); ZeRO-2 and 3 runs with gradient accumulation resume with identical bits in their own
// layout. A run with the optimizer offloaded to the host (parallel.offload_optimizer) saves and
// loads the same state: its checkpoint resumes without offload and the other way round, bit for bit.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <tuple>

#include "test_support.hpp"
#include "trident/backend/cpu_backend.hpp"
#include "trident/config/parse.hpp"
#include "trident/io/checkpoint.hpp"
#include "trident/io/random_tokens.hpp"
#include "trident/train/gather.hpp"
#include "trident/train/trainer.hpp"

namespace trident {
namespace {

namespace fs = std::filesystem;
constexpr int kSaveAt = 5, kSteps = 10;

RunConfig config(int zero, int micro_batches, bool offload = false) {
  RunConfig c = test::tiny_config();
  c.parallel.offload_optimizer = offload;
  c.model.n_layer = 6;
  c.train.steps = kSteps;
  c.train.global_batch_size = c.train.micro_batch_size * 2 * micro_batches;
  c.parallel.zero = zero;
  c.parallel.bucket_mb = 0.01;   // a bucket per block: ZeRO-2 stages most of them
  return c;
}

struct RunResult {
  std::vector<double> losses;
  GatheredParams params;
};

// Trains steps [from, kSteps) under cfg, first loading `load` (if any); saves into save_dir at
// kSaveAt (if given).
RunResult train(RunConfig cfg, const std::string& load, const std::string& save_dir, int from) {
  ParallelGroups g = test::mpi_groups(cfg, MPI_COMM_WORLD);
  std::unique_ptr<Backend> be = make_cpu_backend();
  RandomTokens data(cfg.model.seq_len, cfg.model.vocab_size, 7);
  Trainer trainer(cfg, g, *be, data);
  if (!load.empty()) {
    CheckpointInfo info = load_checkpoint(load, trainer.model(), &trainer.optimizer(), g);
    trainer.set_position(info.step, info.consumed_samples);
  }
  RunResult r;
  for (int s = from; s < kSteps; ++s) {
    r.losses.push_back(trainer.train_step(s).loss);
    if (s + 1 != kSaveAt || save_dir.empty()) continue;
    CheckpointInfo info;
    info.step = kSaveAt;
    info.consumed_samples = trainer.consumed_samples(kSaveAt);
    info.config = to_ini(cfg);
    info.layout = str("dp2 zero", cfg.parallel.zero);
    CheckpointConfig c;
    c.dir = save_dir;
    c.keep = 1;
    trainer.sync_parameters();
    save_checkpoint(c, info, trainer.model(), trainer.optimizer(), g);
  }
  trainer.sync_parameters();
  r.params = gather_params(trainer.model(), g);
  return r;
}

// A fresh directory that rank 0 names (from its process id) for every rank.
std::string shared_dir(const std::string& name) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string dir;
  if (rank == 0) dir = (fs::temp_directory_path() / str("trident_zero_ckpt_", ::getpid(), "_", name)).string();
  int n = static_cast<int>(dir.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  dir.resize(n);
  MPI_Bcast(dir.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

void expect_same(const RunResult& got, const RunResult& want, int from, const std::string& what) {
  ASSERT_EQ(got.losses.size() + from, want.losses.size()) << what;
  for (size_t i = 0; i < got.losses.size(); ++i)
    EXPECT_EQ(got.losses[i], want.losses[from + i]) << what << ", step " << from + i + 1;
  for (const auto& [name, v] : want.params.tensors) EXPECT_EQ(got.params.tensors.at(name), v) << what << ": " << name;
}

// Every dataset of a checkpoint's model and optimizer groups, by path.
std::map<std::string, std::vector<float>> datasets_of(const std::string& file) {
  std::map<std::string, std::vector<float>> out;
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(f, 0) << file;
  for (const char* group : {"model", "optim/master", "optim/exp_avg", "optim/exp_avg_sq"}) {
    const hid_t g = H5Gopen2(f, group, H5P_DEFAULT);
    H5G_info_t info;
    H5Gget_info(g, &info);
    for (hsize_t i = 0; i < info.nlinks; ++i) {
      char name[256];
      H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT);
      const hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
      const hid_t space = H5Dget_space(d);
      std::vector<float>& v = out[str(group, "/", name)];
      v.resize(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
      H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
      H5Sclose(space);
      H5Dclose(d);
    }
    H5Gclose(g);
  }
  H5Fclose(f);
  return out;
}

TEST(ZeroCheckpoint, EveryStageLoadsEveryOtherStagesCheckpointBitForBit) {
  int world = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ASSERT_EQ(world, 2) << "run with 2 ranks";
  const RunResult reference = train(config(0, 1), "", "", 0);
  std::map<std::string, std::vector<float>> zero0_file;
  for (int saved = 0; saved <= 3; ++saved) {
    const std::string dir = shared_dir(str("zero", saved));
    const RunResult first = train(config(saved, 1), "", dir, 0);
    if (rank == 0) {
      expect_same(first, reference, 0, str("zero", saved, " uninterrupted"));
      const std::map<std::string, std::vector<float>> file = datasets_of(dir + "/step_5.h5");
      if (saved == 0) zero0_file = file;
      EXPECT_GT(file.size(), 4u);
      EXPECT_TRUE(file == zero0_file) << "zero" << saved << "'s checkpoint holds other values than zero0's";
    }
    for (int loaded = 0; loaded <= 3; ++loaded) {
      if (loaded == saved) continue;
      const RunResult resumed = train(config(loaded, 1), dir + "/step_5.h5", "", kSaveAt);
      if (rank == 0) expect_same(resumed, reference, kSaveAt, str("saved zero", saved, ", loaded zero", loaded));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) fs::remove_all(dir);
  }
}

TEST(ZeroCheckpoint, Zero2And3WithAccumulationResumeWithIdenticalBits) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (const int zero : {2, 3}) {
    const std::string dir = shared_dir(str("accumulation", zero));
    const RunResult whole = train(config(zero, 3), "", dir, 0);
    const RunResult resumed = train(config(zero, 3), dir + "/step_5.h5", "", kSaveAt);
    if (rank == 0) expect_same(resumed, whole, kSaveAt, str("zero", zero, ", 3 micro-batches"));
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) fs::remove_all(dir);
  }
}

TEST(ZeroCheckpoint, OffloadedAndDeviceStatesLoadEachOthersCheckpointsBitForBit) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const RunResult reference = train(config(0, 1), "", "", 0);
  // (saved zero, saved with offload, loaded zero, loaded with offload)
  const std::tuple<int, bool, int, bool> pairs[] = {
      {1, true, 2, false}, {0, false, 1, true}, {2, true, 2, true}, {3, true, 0, false}, {1, false, 3, true}};
  for (const auto& [saved, saved_offload, loaded, loaded_offload] : pairs) {
    const std::string what = str("saved zero", saved, saved_offload ? " offload" : "", ", loaded zero", loaded,
                                 loaded_offload ? " offload" : "");
    const std::string dir = shared_dir(str("offload", saved, saved_offload, loaded, loaded_offload));
    const RunResult first = train(config(saved, 1, saved_offload), "", dir, 0);
    if (rank == 0) expect_same(first, reference, 0, what + ", uninterrupted");
    const RunResult resumed = train(config(loaded, 1, loaded_offload), dir + "/step_5.h5", "", kSaveAt);
    if (rank == 0) expect_same(resumed, reference, kSaveAt, what);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace trident
