// StepGuard: non-finite losses and norms are refused; with spike_zscore a loss far above the
// recent mean is refused and does not join the history; without it nothing finite is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "trident/train/step_guard.hpp"

namespace trident {
namespace {

TEST(StepGuard, RefusesNonFiniteLossAndNorm) {
  StepGuard g(0);
  EXPECT_EQ(g.check(3.0, 1.0), "");
  EXPECT_NE(g.check(std::nan(""), 1.0).find("non-finite loss"), std::string::npos);
  EXPECT_NE(g.check(3.0, std::numeric_limits<double>::infinity()).find("non-finite gradient norm"), std::string::npos);
  EXPECT_EQ(g.check(1e6, 1.0), "") << "spike detection is off";
}

TEST(StepGuard, RefusesLossSpikes) {
  StepGuard g(4.0);
  for (size_t i = 0; i < StepGuard::kMinHistory; ++i) {
    EXPECT_EQ(g.check(10.0 - 0.1 * static_cast<double>(i % 3), 1.0), "") << "step " << i;
  }
  // History 10.0, 9.9, 9.8 repeated: mean ~9.9, standard deviation ~0.084.
  EXPECT_EQ(g.check(10.1, 1.0), "") << "2.4 standard deviations: applied";
  EXPECT_NE(g.check(12.0, 1.0).find("loss spike"), std::string::npos);
  EXPECT_NE(g.check(12.0, 1.0).find("loss spike"), std::string::npos) << "a refused spike must not join the history";
}

TEST(StepGuard, NoSpikeVerdictBeforeEnoughHistory) {
  StepGuard g(1.0);
  EXPECT_EQ(g.check(1.0, 1.0), "");
  EXPECT_EQ(g.check(100.0, 1.0), "") << "one earlier loss is no baseline";
}

}  // namespace
}  // namespace trident
