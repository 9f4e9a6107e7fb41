// Learning-rate schedules: warm-up, cosine, linear, wsd and constant at chosen steps, a decay
// length independent of train.steps, and train.epochs / train.tokens as steps.
#include <gtest/gtest.h>

#include <cmath>

#include "run_length.hpp"   // src/apps
#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"
#include "trident/train/lr_schedule.hpp"

namespace trident {
namespace {

TrainConfig schedule(const char* name) {
  TrainConfig t;
  t.lr = 1.0;
  t.min_lr = 0.1;
  t.warmup_steps = 10;
  t.steps = 110;   // decay over 0-based steps 10..109
  t.lr_schedule = name;
  return t;
}

TEST(LrSchedule, WarmUpIsLinearFromZero) {
  for (const char* name : {"cosine", "linear", "wsd", "constant"}) {
    const TrainConfig t = schedule(name);
    EXPECT_DOUBLE_EQ(lr_at(t, 0), 0.1) << name;
    EXPECT_DOUBLE_EQ(lr_at(t, 4), 0.5) << name;
    EXPECT_DOUBLE_EQ(lr_at(t, 9), 1.0) << name;
  }
}

TEST(LrSchedule, CosineAndLinear) {
  const TrainConfig c = schedule("cosine"), l = schedule("linear");
  // Step 59 is halfway through the 99 steps from 10 to 109 (progress 49/99).
  EXPECT_DOUBLE_EQ(lr_at(c, 10), 1.0);
  EXPECT_NEAR(lr_at(c, 59), 0.1 + 0.45 * (1 + std::cos(M_PI * 49 / 99)), 1e-12);
  EXPECT_DOUBLE_EQ(lr_at(c, 109), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(c, 500), 0.1) << "min_lr after the decay";
  EXPECT_DOUBLE_EQ(lr_at(l, 10), 1.0);
  EXPECT_NEAR(lr_at(l, 59), 1.0 - 0.9 * 49 / 99, 1e-12);
  EXPECT_DOUBLE_EQ(lr_at(l, 109), 0.1);
}

TEST(LrSchedule, WarmupStableDecay) {
  TrainConfig w = schedule("wsd");
  w.lr_wsd_decay_fraction = 0.2;   // 22 of 110 steps: the decay runs from step 87 to 109
  EXPECT_DOUBLE_EQ(lr_at(w, 10), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(w, 87), 1.0) << "stable until the decay starts";
  EXPECT_NEAR(lr_at(w, 98), 1.0 - 0.9 * 11 / 22, 1e-12);
  EXPECT_DOUBLE_EQ(lr_at(w, 109), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(w, 200), 0.1);
}

TEST(LrSchedule, Constant) {
  const TrainConfig t = schedule("constant");
  EXPECT_DOUBLE_EQ(lr_at(t, 10), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(t, 1000), 1.0);
}

TEST(LrSchedule, DecayLengthIndependentOfSteps) {
  TrainConfig a = schedule("cosine"), b = schedule("cosine");
  b.steps = 400;
  b.lr_decay_steps = 110;
  for (int s : {0, 9, 10, 33, 59, 100, 109, 300}) EXPECT_DOUBLE_EQ(lr_at(a, s), lr_at(b, s)) << "step " << s;
}

TEST(LrSchedule, ResumeWithMoreStepsKeepsTheCheckpointsDecay) {
  RunConfig stored;
  stored.train = schedule("cosine");
  TrainConfig now = stored.train;
  now.steps = 400;
  const std::string note = keep_lr_decay(now, to_ini(stored), "test");
  EXPECT_NE(note.find("step 110"), std::string::npos) << note;
  EXPECT_EQ(now.lr_decay_steps, 110);
  for (int s : {50, 109, 200}) EXPECT_DOUBLE_EQ(lr_at(now, s), lr_at(stored.train, s)) << "step " << s;
  TrainConfig same = stored.train;
  EXPECT_EQ(keep_lr_decay(same, to_ini(stored), "test"), "");
  EXPECT_EQ(same.lr_decay_steps, 0);
  TrainConfig chosen = now;
  chosen.lr_decay_steps = 300;
  EXPECT_EQ(keep_lr_decay(chosen, to_ini(stored), "test"), "") << "an explicit decay length wins";
}

TEST(RunLength, EpochsAndTokensBecomeSteps) {
  TrainConfig t;
  t.global_batch_size = 8;
  t.tokens = 1000;   // 64 tokens per step at seq_len 8: 15.6 -> 16
  resolve_train_steps(t, 8, 0);
  EXPECT_EQ(t.steps, 16);
  TrainConfig e;
  e.global_batch_size = 8;
  e.epochs = 2.5;   // 2.5 * 100 sequences / 8 = 31.25 -> 32
  resolve_train_steps(e, 8, 100);
  EXPECT_EQ(e.steps, 32);
  EXPECT_NE(resolve_train_steps(e, 8, 100).find("in place of train.steps = 32"), std::string::npos);
  TrainConfig plain;
  EXPECT_EQ(resolve_train_steps(plain, 8, 100), "");
  EXPECT_EQ(plain.steps, 100);
}

TEST(RunLength, EpochsWithTokensIsRefused) {
  RunConfig both;
  both.train.epochs = 1;
  both.train.tokens = 10;
  EXPECT_THROW(validate_run_config(both, 1), InputError);
}

}  // namespace
}  // namespace trident
