// Checkpoint directory handling without MPI: the 'latest' pointer written through a checked
// temporary file (a short write, as on a full disk, fails and leaves the old pointer; a link
// placed at latest.tmp is not followed), pruning that never removes the file just written, and
// the refusal of a directory holding checkpoints this run did not resume from.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "trident/core/error.hpp"
#include "trident/io/checkpoint.hpp"

namespace trident {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

void write_file(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

class CheckpointDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trident_ckpt_dir_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const CheckpointFile& f : list_checkpoints(dir_.string())) out.push_back(f.name);
    return out;
  }
  fs::path dir_;
};

TEST_F(CheckpointDir, LatestWriteThatFallsShortFailsAndKeepsTheOldPointer) {
  ASSERT_EQ(write_latest(dir_.string(), "step_1.h5"), "");
  ASSERT_EQ(read_file(dir_ / "latest"), "step_1.h5\n");
  // A file size limit of 4 bytes makes the write stop part-way, as a full disk does.
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 4;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string error = write_latest(dir_.string(), "step_2.h5");
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(error.find("writing"), std::string::npos) << error;
  EXPECT_EQ(read_file(dir_ / "latest"), "step_1.h5\n");
  EXPECT_FALSE(fs::exists(dir_ / "latest.tmp"));
}

TEST_F(CheckpointDir, LatestTmpLinkIsNotFollowed) {
  const fs::path target = dir_ / "precious";
  write_file(target, "keep me");
  fs::create_symlink(target, dir_ / "latest.tmp");
  ASSERT_EQ(write_latest(dir_.string(), "step_3.h5"), "");
  EXPECT_EQ(read_file(target), "keep me");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir_ / "latest")));
  EXPECT_EQ(read_file(dir_ / "latest"), "step_3.h5\n");
}

TEST_F(CheckpointDir, ListsCompleteCheckpointsNewestFirst) {
  for (const char* n : {"step_2.h5", "step_10.h5", "step_4.h5.tmp", "step_x.h5", "best.h5", "step_.h5"})
    write_file(dir_ / n, "");
  fs::create_directories(dir_ / "step_7.h5");
  EXPECT_EQ(names(), (std::vector<std::string>{"step_10.h5", "step_2.h5"}));
}

TEST_F(CheckpointDir, PruningKeepsTheFileJustWrittenBelowLaterSteps) {
  for (const char* n : {"step_1.h5", "step_4.h5", "step_6.h5", "step_6.h5.tmp"}) write_file(dir_ / n, "");
  CheckpointConfig c;
  c.dir = dir_.string();
  c.keep = 1;
  // Later steps belong to another run: left alone unless checkpoint.overwrite.
  prune_checkpoints(c, 1);
  EXPECT_EQ(names(), (std::vector<std::string>{"step_6.h5", "step_4.h5", "step_1.h5"}));
  EXPECT_FALSE(fs::exists(dir_ / "step_6.h5.tmp"));
  c.overwrite = true;
  prune_checkpoints(c, 1);
  EXPECT_EQ(names(), (std::vector<std::string>{"step_1.h5"}));
  write_file(dir_ / "step_2.h5", "");
  write_file(dir_ / "step_3.h5", "");
  c.keep = 2;
  prune_checkpoints(c, 3);
  EXPECT_EQ(names(), (std::vector<std::string>{"step_3.h5", "step_2.h5"}));
}

// resolve_resume's InputError message; "" (and a test failure) when it accepts the directory.
std::string refusal(const CheckpointConfig& c) {
  try {
    resolve_resume(c);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

TEST_F(CheckpointDir, FreshRunRefusesAnotherRunsCheckpointsUnlessOverwrite) {
  write_file(dir_ / "step_4.h5", "");
  CheckpointConfig c;
  c.dir = dir_.string();
  c.resume = "none";
  const std::string msg = refusal(c);
  EXPECT_NE(msg.find("step_4.h5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("checkpoint.overwrite = true"), std::string::npos) << msg;
  c.overwrite = true;
  EXPECT_EQ(resolve_resume(c).file, "");
}

TEST_F(CheckpointDir, LatestMustNameAPlainFile) {
  CheckpointConfig c;
  c.dir = dir_.string();
  for (const char* bad : {"../elsewhere/step_2.h5", "..", "sub/step_2.h5", "step_2.h5 step_4.h5"}) {
    SCOPED_TRACE(bad);
    write_file(dir_ / "latest", std::string(bad) + "\n");
    const std::string msg = refusal(c);
    EXPECT_NE(msg.find("not the file name of a checkpoint"), std::string::npos) << msg;
  }
}

TEST_F(CheckpointDir, MissingLatestChoosesTheNewestStepFile) {
  // Not HDF5: the choice is named in the error, so the user sees why that file was read.
  write_file(dir_ / "step_2.h5", "");
  write_file(dir_ / "step_6.h5", "");
  CheckpointConfig c;
  c.dir = dir_.string();
  const std::string msg = refusal(c);
  EXPECT_NE(msg.find("step_6.h5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("newest checkpoint"), std::string::npos) << msg;
}

}  // namespace
}  // namespace trident
