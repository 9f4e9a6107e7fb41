// Checkpoints: saved in dp2 x tp2 x pp2 at step 5, resumed in other layouts, schedules (and one
// rank), the next steps match the uninterrupted run within 1e-5 (same layout: identical bits); corrupt,
// mismatched or crafted checkpoints (a dataset the model does not read, an impossible step) are
// rejected with one line naming the file, and nothing is modified.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "test_support.hpp"
#include "trident/io/random_tokens.hpp"
#include "trident/backend/cpu_backend.hpp"
#include "trident/config/parse.hpp"
#include "trident/io/checkpoint.hpp"
#include "trident/parallel/collective_error.hpp"
#include "trident/train/trainer.hpp"

namespace trident {
namespace {

namespace fs = std::filesystem;
constexpr int kSaveAt = 5, kSteps = 10;

RunConfig config(int dp, int tp, int pp, int zero) {
  RunConfig c = test::tiny_config();
  c.model.n_layer = 8;
  c.model.n_head = 8;
  c.model.n_embd = 32;
  c.train.steps = kSteps;
  c.train.global_batch_size = 16;
  c.train.eps = 1e-5;   // see test_equivalence.cpp: keeps the key bias's rounding noise out of Adam
  c.parallel.dp = dp;
  c.parallel.tp = tp;
  c.parallel.pp = pp;
  c.parallel.zero = zero;
  c.parallel.bucket_mb = 0.01;
  return c;
}

std::string shared_dir() {
  // Rank 0 names the directory; everyone uses it.
  std::string dir;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) dir = fs::temp_directory_path() / ("trident_ckpt_test_" + std::to_string(::getpid()));
  int n = static_cast<int>(dir.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  dir.resize(n);
  MPI_Bcast(dir.data(), n, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0) fs::create_directories(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

struct TrainRun {
  RunConfig cfg;
  ParallelGroups g;
  std::unique_ptr<Backend> be = make_cpu_backend();
  RandomTokens data{16, 100, 5};
  std::unique_ptr<Trainer> trainer;
  TrainRun(RunConfig c, MPI_Comm comm) : cfg(std::move(c)), g(test::mpi_groups(cfg, comm)) {
    trainer = std::make_unique<Trainer>(cfg, g, *be, data);
  }
  std::vector<double> steps(int from, int to) {
    std::vector<double> l;
    for (int s = from; s < to; ++s) l.push_back(trainer->train_step(s).loss);
    return l;
  }
  void save(const std::string& dir, int step) {
    CheckpointInfo info;
    info.step = step;
    info.consumed_samples = trainer->consumed_samples(step);
    info.config = to_ini(cfg);
    info.layout = "dp2 tp2 pp2";
    CheckpointConfig c;
    c.dir = dir;
    c.keep = 2;
    trainer->sync_parameters();
    save_checkpoint(c, info, trainer->model(), trainer->optimizer(), g);
  }
  void load(const std::string& file) {
    trainer->sync_parameters();
    CheckpointInfo info = load_checkpoint(file, trainer->model(), &trainer->optimizer(), g);
    trainer->set_position(info.step, info.consumed_samples);
  }
};

class Checkpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    int world = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    ASSERT_EQ(world, 8) << "run with 8 ranks";
    dir_ = shared_dir();
    TrainRun full(config(2, 2, 2, 1), MPI_COMM_WORLD);
    reference_ = full.steps(0, kSteps);
    TrainRun first(config(2, 2, 2, 1), MPI_COMM_WORLD);
    first.steps(0, kSaveAt);
    first.save(dir_, kSaveAt);
    file_ = dir_ + "/step_" + std::to_string(kSaveAt) + ".h5";
  }
  static void TearDownTestSuite() {
    MPI_Barrier(MPI_COMM_WORLD);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) fs::remove_all(dir_);
  }
  static std::string dir_, file_;
  static std::vector<double> reference_;
};
std::string Checkpoint::dir_, Checkpoint::file_;
std::vector<double> Checkpoint::reference_;

void expect_continuation(const std::vector<double>& got, const std::vector<double>& want, bool exact) {
  ASSERT_EQ(got.size(), static_cast<size_t>(kSteps - kSaveAt));
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want[kSaveAt + i];
    if (exact) EXPECT_EQ(got[i], w) << "step " << kSaveAt + i + 1;
    else EXPECT_LE(std::fabs(got[i] - w) / std::fabs(w), 1e-5) << "step " << kSaveAt + i + 1;
  }
}

// Trains `cfg` to step kSaveAt and saves its checkpoint in directory `sub` of `dir`; returns the file.
std::string checkpoint_of(const RunConfig& cfg, const std::string& dir, const std::string& sub) {
  const std::string into = dir + "/" + sub;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) fs::create_directories(into);
  MPI_Barrier(MPI_COMM_WORLD);
  TrainRun first(cfg, MPI_COMM_WORLD);
  first.steps(0, kSaveAt);
  first.save(into, kSaveAt);
  return into + "/step_" + std::to_string(kSaveAt) + ".h5";
}

TEST_F(Checkpoint, SameLayoutResumesWithIdenticalBits) {
  TrainRun r(config(2, 2, 2, 1), MPI_COMM_WORLD);
  r.load(file_);
  expect_continuation(r.steps(kSaveAt, kSteps), reference_, true);
}

TEST_F(Checkpoint, ReshardsIntoOtherLayouts) {
  struct L { int dp, tp, pp, zero; };
  for (L l : {L{1, 4, 2, 0}, L{4, 1, 2, 1}, L{2, 1, 4, 0}, L{8, 1, 1, 1}, L{8, 1, 1, 0}}) {
    SCOPED_TRACE(str("dp", l.dp, " tp", l.tp, " pp", l.pp, " zero", l.zero));
    TrainRun r(config(l.dp, l.tp, l.pp, l.zero), MPI_COMM_WORLD);
    r.load(file_);
    expect_continuation(r.steps(kSaveAt, kSteps), reference_, false);
  }
}

// A Llama (grouped-query attention with 2 key/value heads, q/k/v biases, untied head) saved by
// dp2 tp2 pp2 ZeRO-1 continues in layouts that split its key/value heads differently (tp 4
// replicates each over two ranks) or not at all.
TEST_F(Checkpoint, LlamaReshardsIntoOtherLayouts) {
  auto llama = [](int dp, int tp, int pp, int zero) {
    RunConfig c = config(dp, tp, pp, zero);
    c.model.arch = "llama";
    c.model.n_kv_head = 2;
    c.model.ffn_hidden_size = 48;
    c.model.qkv_bias = true;
    return c;
  };
  TrainRun full(llama(2, 2, 2, 1), MPI_COMM_WORLD);
  const std::vector<double> reference = full.steps(0, kSteps);
  const std::string file = checkpoint_of(llama(2, 2, 2, 1), dir_, "llama");
  struct L { int dp, tp, pp, zero; };
  for (L l : {L{1, 4, 2, 0}, L{8, 1, 1, 1}, L{2, 2, 2, 1}}) {
    SCOPED_TRACE(str("llama dp", l.dp, " tp", l.tp, " pp", l.pp, " zero", l.zero));
    TrainRun r(llama(l.dp, l.tp, l.pp, l.zero), MPI_COMM_WORLD);
    r.load(file);
    expect_continuation(r.steps(kSaveAt, kSteps), reference, l.dp == 2 && l.tp == 2);
  }
}

RunConfig interleaved(int dp, int tp, int pp, int zero) {
  RunConfig c = config(dp, tp, pp, zero);
  c.parallel.schedule = "interleaved";
  c.parallel.virtual_stages = 2;
  return c;
}

// Checkpoints are keyed by global layer, whatever chunks hold the layers: interleaved runs (two
// model chunks per rank) resume the 1F1B run's checkpoint, and an interleaved run's checkpoint
// resumes under 1F1B and on one rank; every continuation is the uninterrupted run's within 1e-5.
TEST_F(Checkpoint, InterleavedAndOtherSchedulesLoadEachOthersCheckpoints) {
  struct L { int dp, tp, pp, zero; };
  for (L l : {L{2, 2, 2, 1}, L{1, 2, 4, 0}}) {
    SCOPED_TRACE(str("interleaved dp", l.dp, " tp", l.tp, " pp", l.pp, " zero", l.zero));
    TrainRun r(interleaved(l.dp, l.tp, l.pp, l.zero), MPI_COMM_WORLD);
    r.load(file_);
    expect_continuation(r.steps(kSaveAt, kSteps), reference_, false);
  }
  const std::string file = checkpoint_of(interleaved(1, 2, 4, 1), dir_, "interleaved");
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  {
    SCOPED_TRACE("1f1b dp2 tp1 pp4 from interleaved dp1 tp2 pp4");
    TrainRun r(config(2, 1, 4, 1), MPI_COMM_WORLD);
    r.load(file);
    expect_continuation(r.steps(kSaveAt, kSteps), reference_, false);
  }
  MPI_Comm one;
  MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : MPI_UNDEFINED, 0, &one);
  if (rank == 0) {
    SCOPED_TRACE("one rank from interleaved dp1 tp2 pp4");
    TrainRun r(config(1, 1, 1, 0), one);
    r.load(file);
    expect_continuation(r.steps(kSaveAt, kSteps), reference_, false);
    MPI_Comm_free(&one);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

RunConfig zero_bubble(int dp, int tp, int pp, int zero) {
  RunConfig c = config(dp, tp, pp, zero);
  c.parallel.schedule = "zero_bubble";
  return c;
}

// zero_bubble computes 1F1B's gradients bit for bit (the weight passes accumulate in the same
// micro-batch order), and its checkpoints hold the same state: in the saving layout a
// zero_bubble run resumes the 1F1B run's checkpoint, and a 1F1B run a zero_bubble run's, each
// continuing the uninterrupted 1F1B run with identical bits.
TEST_F(Checkpoint, ZeroBubbleAndOneFOneBLoadEachOthersCheckpoints) {
  {
    SCOPED_TRACE("zero_bubble dp2 tp2 pp2 from 1f1b");
    TrainRun r(zero_bubble(2, 2, 2, 1), MPI_COMM_WORLD);
    r.load(file_);
    expect_continuation(r.steps(kSaveAt, kSteps), reference_, true);
  }
  const std::string file = checkpoint_of(zero_bubble(2, 2, 2, 1), dir_, "zero_bubble");
  SCOPED_TRACE("1f1b dp2 tp2 pp2 from zero_bubble");
  TrainRun r(config(2, 2, 2, 1), MPI_COMM_WORLD);
  r.load(file);
  expect_continuation(r.steps(kSaveAt, kSteps), reference_, true);
}

TEST_F(Checkpoint, ResumesOnOneRank) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm one;
  MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : MPI_UNDEFINED, 0, &one);
  if (rank == 0) {
    TrainRun r(config(1, 1, 1, 0), one);
    r.load(file_);
    expect_continuation(r.steps(kSaveAt, kSteps), reference_, false);
    MPI_Comm_free(&one);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Helpers that damage copies of the checkpoint in a scratch directory.
void copy_truncated(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(to, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
}

void flip_byte_in(const std::string& file, const char* dataset) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, dataset, H5P_DEFAULT);
  haddr_t off = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
  io.seekg(static_cast<std::streamoff>(off) + 101);
  char c = 0;
  io.read(&c, 1);
  c ^= 0x10;
  io.seekp(static_cast<std::streamoff>(off) + 101);
  io.write(&c, 1);
}

void delete_dataset(const std::string& file, const char* dataset) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  H5Ldelete(f, dataset, H5P_DEFAULT);
  H5Fclose(f);
}

void set_attr(const std::string& file, const char* name, int64_t v) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t a = H5Aopen(f, name, H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_INT64, &v);
  H5Aclose(a);
  H5Fclose(f);
}

// An object the model does not read: a dataset, or a link to another file.
void add_dataset(const std::string& file, const char* dataset) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hsize_t n = 4;
  hid_t space = H5Screate_simple(1, &n, nullptr);
  H5Dclose(H5Dcreate2(f, dataset, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  H5Sclose(space);
  H5Fclose(f);
}

void add_external_link(const std::string& file, const char* link, const std::string& target) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  H5Lcreate_external(target.c_str(), "/model/wte", f, link, H5P_DEFAULT, H5P_DEFAULT);
  H5Fclose(f);
}

// Every file under dir with its size and modification time. (Directory times are left out: the
// MPI-IO layer may create and remove lock files next to a file it opens.)
std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> listing(const std::string& dir) {
  std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> m;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) m[e.path().string()] = {e.file_size(), e.last_write_time()};
  return m;
}

TEST_F(Checkpoint, RejectsBadFilesWithOneLineAndTouchesNothing) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string bad = dir_ + "/bad";
  if (rank == 0) {
    fs::create_directories(bad);
    copy_truncated(file_, bad + "/truncated.h5");
    fs::copy_file(file_, bad + "/flipped.h5");
    flip_byte_in(bad + "/flipped.h5", "/optim/master/blocks.3.mlp.fc.weight");
    fs::copy_file(file_, bad + "/missing.h5");
    delete_dataset(bad + "/missing.h5", "/model/blocks.2.ln2.bias");
    fs::copy_file(file_, bad + "/future.h5");
    set_attr(bad + "/future.h5", "format_version", 99);
    fs::copy_file(file_, bad + "/negative_step.h5");
    set_attr(bad + "/negative_step.h5", "step", -3);
    fs::copy_file(file_, bad + "/few_samples.h5");
    set_attr(bad + "/few_samples.h5", "consumed_samples", 2);
    fs::copy_file(file_, bad + "/step_9.h5");
    fs::copy_file(file_, bad + "/extra.h5");
    add_dataset(bad + "/extra.h5", "/optim/master/unknown");
    fs::copy_file(file_, bad + "/link.h5");
    add_external_link(bad + "/link.h5", "/model/elsewhere", file_);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const auto before = listing(dir_);
  struct Case { std::string file, fragment; RunConfig cfg; };
  RunConfig wider = config(2, 2, 2, 1), shallower = config(2, 2, 2, 1);
  wider.model.n_embd = 64;
  shallower.model.n_layer = 4;
  std::vector<Case> cases = {
      {bad + "/truncated.h5", "truncated", config(2, 2, 2, 1)},
      {bad + "/flipped.h5", "/optim/master/blocks.3.mlp.fc.weight does not match its checksum", config(2, 2, 2, 1)},
      {bad + "/missing.h5", "/model/blocks.2.ln2.bias is missing", config(2, 2, 2, 1)},
      {bad + "/future.h5", "format version 99 is newer", config(2, 2, 2, 1)},
      {file_, "the [model] settings must match the checkpoint", wider},
      {file_, "is not part of the configured model", shallower},
      {bad + "/negative_step.h5", "step = -3 is not a count of optimizer steps", config(2, 2, 2, 1)},
      {bad + "/few_samples.h5", "consumed_samples = 2 does not fit step = 5", config(2, 2, 2, 1)},
      {bad + "/step_9.h5", "its name says step_9.h5 but its step attribute is 5", config(2, 2, 2, 1)},
      {bad + "/extra.h5", "dataset /optim/master/unknown is not part of the configured model", config(2, 2, 2, 1)},
      {bad + "/link.h5", "link /model/elsewhere is not part of the configured model", config(2, 2, 2, 1)},
      {dir_, "not a regular file", config(2, 2, 2, 1)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    TrainRun r(c.cfg, MPI_COMM_WORLD);
    try {
      collective_check(MPI_COMM_WORLD, [&] { r.load(c.file); });
      ADD_FAILURE() << "loaded without error";
    } catch (const InputError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(c.file), std::string::npos) << msg;
      EXPECT_NE(msg.find(c.fragment), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
  EXPECT_EQ(listing(dir_), before);
}

}  // namespace
}  // namespace trident
