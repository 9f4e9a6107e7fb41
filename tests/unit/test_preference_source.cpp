// Preference pairs as samples: rows 2i and 2i + 1 are one record's chosen and rejected sides with
// their shifted masks, every epoch visits each pair once, any sample range reads the same rows, and
// open_preference_data's split, counts and refusals (a chat dataset, a blend).
#include <gtest/gtest.h>

#include <set>

#include "expect_input_error.hpp"
#include "temp_dir.hpp"
#include "trident/io/data_sources.hpp"
#include "trident/io/preference_source.hpp"

namespace trident {
namespace {

using test::expect_input_error;
using test::TempDir;
using Ids = std::vector<int32_t>;
using Mask = std::vector<uint8_t>;

constexpr int kSeqLen = 5;   // T: rows of T + 1 = 6 tokens

// Record r: chosen = 10r+1, 10r+2, 10r+3 (prompt 10r+1 untrained), rejected = 10r+1, 10r+5 (short).
// Record 0's chosen side is 8 tokens long, cut at T + 1.
void write_pairs(const std::string& prefix, int records) {
  MaskedDatasetWriter w(prefix, 300);
  for (int r = 0; r < records; ++r) {
    const int b = 10 * r;
    if (r == 0)
      w.add_sequence({{b + 1, b + 2, b + 3, b + 4, b + 5, b + 6, b + 7, b + 8}, {0, 1, 1, 1, 1, 1, 1, 1}});
    else
      w.add_sequence({{b + 1, b + 2, b + 3}, {0, 1, 1}});
    w.add_sequence({{b + 1, b + 5}, {0, 1}});
    w.end_document();
  }
  w.finish();
}

Ids row(const Ids& all, int k) { return Ids(all.begin() + k * (kSeqLen + 1), all.begin() + (k + 1) * (kSeqLen + 1)); }
Mask mask_row(const Mask& all, int k) { return Mask(all.begin() + k * kSeqLen, all.begin() + (k + 1) * kSeqLen); }

TEST(PreferenceSource, PairsAreConsecutiveChosenThenRejectedWithShiftedMasks) {
  TempDir dir;
  write_pairs(dir / "pref", 3);
  auto ds = std::make_shared<const MaskedDataset>(dir / "pref", 2);
  PreferenceSource src(ds, 0, 3, kSeqLen, 300, 7);
  EXPECT_EQ(src.records(), 3u);
  EXPECT_EQ(src.cut_sequences(), 1u);
  const int pairs = 6;   // two epochs
  Ids tokens(2 * pairs * (kSeqLen + 1));
  Mask mask(2 * pairs * kSeqLen);
  src.samples(0, 2 * pairs, tokens.data());
  src.target_mask(0, 2 * pairs, mask.data());
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::set<int> seen;
    for (int i = 3 * epoch; i < 3 * epoch + 3; ++i) {
      const Ids chosen = row(tokens, 2 * i), rejected = row(tokens, 2 * i + 1);
      const int b = chosen[0] - 1;
      seen.insert(b / 10);
      EXPECT_EQ(rejected, (Ids{b + 1, b + 5, 0, 0, 0, 0}));
      EXPECT_EQ(mask_row(mask, 2 * i + 1), (Mask{1, 0, 0, 0, 0}));   // target b+5 trained, then padding
      if (b == 0) {
        EXPECT_EQ(chosen, (Ids{1, 2, 3, 4, 5, 6}));
        EXPECT_EQ(mask_row(mask, 2 * i), (Mask{1, 1, 1, 1, 1}));
      } else {
        EXPECT_EQ(chosen, (Ids{b + 1, b + 2, b + 3, 0, 0, 0}));
        EXPECT_EQ(mask_row(mask, 2 * i), (Mask{1, 1, 0, 0, 0}));
      }
    }
    EXPECT_EQ(seen, (std::set<int>{0, 1, 2})) << "epoch " << epoch;
  }
  // Any range of samples (a DP rank's share, a resumed run) reads the same rows as the whole read.
  Ids part(4 * (kSeqLen + 1));
  Mask part_mask(4 * kSeqLen);
  src.samples(6, 4, part.data());
  src.target_mask(6, 4, part_mask.data());
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(row(part, k), row(tokens, 6 + k));
    EXPECT_EQ(mask_row(part_mask, k), mask_row(mask, 6 + k));
  }
  // Record 1 alone: its chosen side (11, 12, 13) fits a vocabulary of 15, its rejected side (11, 15) does not.
  PreferenceSource small_vocab(ds, 1, 2, kSeqLen, 15, 7);
  expect_input_error([&] { small_vocab.samples(0, 2, tokens.data()); },
                     {"pref.bin", "token id 15", "record 1, rejected side", "model.vocab_size = 15"});
}

TEST(OpenPreferenceData, SplitCountsAndRefusals) {
  TempDir dir;
  write_pairs(dir / "pref", 4);
  DataConfig cfg;
  cfg.train = dir / "pref";
  cfg.split = 0.75;
  DataSources d = open_preference_data(cfg, kSeqLen, 300, 1);
  EXPECT_EQ(d.train_sequences, 6u);   // 3 training pairs, two sequences each
  ASSERT_TRUE(d.val);
  EXPECT_NE(d.description.find("records [0, 3) of 4"), std::string::npos) << d.description;
  EXPECT_NE(d.description.find("records [3, 4) of 4"), std::string::npos) << d.description;
  // The held-out pair is record 3 in both of its sides.
  Ids val(2 * (kSeqLen + 1));
  d.val->samples(0, 2, val.data());
  EXPECT_EQ(row(val, 0), (Ids{31, 32, 33, 0, 0, 0}));
  EXPECT_EQ(row(val, 1), (Ids{31, 35, 0, 0, 0, 0}));

  {
    MaskedDatasetWriter w(dir / "chat", 300);
    w.add_sequence({{1, 2, 3}, {0, 1, 1}});
    w.end_document();
    w.finish();
  }
  cfg.split = 1;
  cfg.train = dir / "chat";
  expect_input_error([&] { open_preference_data(cfg, kSeqLen, 300, 1); },
                     {"chat.idx", "holds 1 sequences, expected 2", "preference dataset"});
  cfg.train = "1 " + (dir / "pref") + " 1 " + (dir / "pref");
  expect_input_error([&] { open_preference_data(cfg, kSeqLen, 300, 1); },
                     {"data.train", "read one preference dataset", "not a blend of 2"});
  cfg.train = "";
  expect_input_error([&] { open_preference_data(cfg, kSeqLen, 300, 1); }, {"data.train is empty", "--format preference"});
}

}  // namespace
}  // namespace trident
