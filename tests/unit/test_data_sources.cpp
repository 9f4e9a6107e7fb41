// Data sources: the sampler's per-epoch permutations, windows read back exactly, blend proportions
// and purity, train/validation splits by documents, DP and resume invariance, and bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "expect_input_error.hpp"
#include "temp_dir.hpp"
#include "trident/config/blend_spec.hpp"
#include "trident/config/parse.hpp"
#include "trident/core/rng.hpp"
#include "trident/io/blend_schedule.hpp"
#include "trident/io/data_sources.hpp"
#include "trident/io/document_windows.hpp"
#include "trident/io/sampler.hpp"

namespace trident {
namespace {

using test::expect_input_error;
using test::TempDir;

constexpr int kVocab = 50000;
constexpr int kT = 8;                  // seq_len of most tests
constexpr int32_t kPerDataset = 10000; // a token is kPerDataset * dataset + its position in the stream
constexpr uint64_t kSeed = 1234;

using Row = std::vector<int32_t>;

// Dataset `d` of the tests: `n_docs` documents of 5 to 17 tokens whose token at stream position p
// is kPerDataset * d + p, so every token says where it came from.
std::string write_dataset(const TempDir& dir, int d, int n_docs) {
  const std::string prefix = dir / ("ds" + std::to_string(d));
  IndexedDatasetWriter w(prefix, kVocab);
  int32_t pos = 0;
  for (int j = 0; j < n_docs; ++j) {
    Row doc(5 + (j * 7) % 13);
    for (int32_t& t : doc) t = kPerDataset * d + pos++;
    w.add_document(doc);
  }
  w.finish();
  return prefix;
}

Row read(BatchSource& s, int64_t first, int count, int T = kT) {
  Row out(static_cast<size_t>(count) * (T + 1));
  s.samples(first, count, out.data());
  return out;
}

int dataset_of(const Row& row) { return row[0] / kPerDataset; }
int32_t position_of(const Row& row) { return row[0] % kPerDataset; }

DataConfig data_config(const std::string& train, double split = 1.0, const std::string& val = "") {
  DataConfig c;
  c.train = train;
  c.split = split;
  c.val = val;
  return c;
}

// Rows [first, first + count) of a source, one per sample.
std::vector<Row> rows(BatchSource& s, int64_t first, int count, int T = kT) {
  Row all = read(s, first, count, T);
  std::vector<Row> out;
  for (int k = 0; k < count; ++k) out.emplace_back(all.begin() + k * (T + 1), all.begin() + (k + 1) * (T + 1));
  return out;
}

// (a) Every epoch visits each window exactly once, in an order that changes with the epoch.
TEST(SequenceSampler, EveryEpochIsAPermutation) {
  for (uint64_t n : {1, 2, 3, 5, 7, 16, 17, 100, 255, 1000, 4097}) {
    SequenceSampler s(n, kSeed);
    std::vector<uint64_t> first_epoch;
    for (uint64_t epoch = 0; epoch < 3; ++epoch) {
      std::vector<uint64_t> order;
      for (uint64_t x = 0; x < n; ++x) order.push_back(s.window(epoch * n + x));
      if (epoch == 0) first_epoch = order;
      else if (n >= 100) EXPECT_NE(order, first_epoch) << "n " << n << " epoch " << epoch;
      std::sort(order.begin(), order.end());
      for (uint64_t x = 0; x < n; ++x) ASSERT_EQ(order[x], x) << "n " << n << " epoch " << epoch;
    }
  }
}

// (b) Sample k of a document range is window sampler(k) of the range's stream, seq_len + 1 tokens.
TEST(DocumentWindows, ReadBackTheExpectedTokens) {
  TempDir dir;
  auto ds = std::make_shared<const IndexedDataset>(write_dataset(dir, 1, 40));
  for (auto [first_doc, end_doc] : std::vector<std::pair<size_t, size_t>>{{0, 40}, {0, 30}, {30, 40}, {7, 8}}) {
    const size_t first_tok = ds->document_offset(first_doc), n_tok = ds->document_offset(end_doc) - first_tok;
    const uint64_t n = DocumentWindows::count(*ds, first_doc, end_doc, kT);
    ASSERT_EQ(n, n_tok > kT ? (n_tok - 1) / kT : 0);
    if (n == 0) continue;
    DocumentWindows w(ds, first_doc, end_doc, kT, kVocab, kSeed);
    const SequenceSampler sampler(n, kSeed);
    for (uint64_t k = 0; k < 2 * n; ++k) {
      Row row(kT + 1);
      w.sample(k, row.data());
      const int32_t start = static_cast<int32_t>(first_tok + sampler.window(k) * kT);
      for (int i = 0; i <= kT; ++i) ASSERT_EQ(row[i], kPerDataset + start + i) << "sample " << k;
      EXPECT_LE(static_cast<size_t>(row[kT] - kPerDataset), first_tok + n_tok - 1) << "window past the range";
    }
  }
}

// (b) One prefix reads exactly what the single-dataset source always read: window sampler(i).
TEST(OpenData, OnePrefixKeepsTheSingleDatasetOrder) {
  TempDir dir;
  const std::string prefix = write_dataset(dir, 0, 40);
  DataSources src = open_data(data_config(prefix), kT, kVocab, kSeed);
  EXPECT_EQ(src.val, nullptr);
  const IndexedDataset ds(prefix);
  const SequenceSampler sampler((ds.num_tokens() - 1) / kT, kSeed);
  std::vector<Row> got = rows(*src.train, 0, 200);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(position_of(got[i]), sampler.window(i) * kT) << i;
}

TEST(BlendSpec, ParsesPrefixesAndExactWeights) {
  auto weights = [](const std::string& spec) {
    std::vector<uint64_t> w;
    for (const BlendPart& p : parse_blend_spec("data.train", spec)) w.push_back(p.weight);
    return w;
  };
  EXPECT_TRUE(parse_blend_spec("data.train", "").empty());
  const std::vector<BlendPart> one = parse_blend_spec("data.train", "data/x");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].prefix, "data/x");
  EXPECT_EQ(one[0].weight, 1u);
  const std::vector<BlendPart> two = parse_blend_spec("data.train", " 0.3  data/a\t0.7 data/b ");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].prefix, "data/b");
  EXPECT_EQ(weights("0.3 a 0.7 b"), (std::vector<uint64_t>{3, 7}));
  EXPECT_EQ(weights("1 a 2 b 3 c"), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(weights("0.25 a 0.125 b"), (std::vector<uint64_t>{2, 1}));
  EXPECT_EQ(weights("2.50 a .5 b 10 c"), (std::vector<uint64_t>{5, 1, 20}));
  EXPECT_EQ(weights("0.000001 a 0.000002 b"), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(weights("1000000 a 2000000 b"), (std::vector<uint64_t>{1, 2}));
}

// Over three periods and then some: dataset d's count among the first n samples is within 1 of
// w_d * n for every n, and each dataset's own sample numbers run 0, 1, 2, ... in order.
void check_schedule(const std::vector<uint64_t>& weights) {
  const BlendSchedule s(weights);
  uint64_t period = 0;
  for (uint64_t w : weights) period += w;
  ASSERT_EQ(s.period(), period);
  std::vector<uint64_t> count(weights.size(), 0);
  const uint64_t n_max = 3 * period + 17;
  for (uint64_t i = 0; i < n_max; ++i) {
    const BlendSlot slot = s.slot(i);
    ASSERT_LT(slot.dataset, weights.size());
    ASSERT_EQ(slot.index, count[slot.dataset]) << "sample " << i;
    ++count[slot.dataset];
    for (size_t d = 0; d < weights.size(); ++d) {
      const double expected = static_cast<double>(weights[d]) * (i + 1) / period;
      ASSERT_LT(std::fabs(count[d] - expected), 1.0) << "dataset " << d << " after " << i + 1 << " samples";
    }
  }
}

// (c) Counts stay within 1 of w_d * n for every n, also for weights where Megatron's "most behind
// first" greedy rule drifts by more than one sample ({741, 936, 2, 32, 2, 7, 1, 1} by 1.5).
TEST(BlendSchedule, CountsStayWithinOneOfTheWeights) {
  for (const std::vector<uint64_t>& w : std::vector<std::vector<uint64_t>>{
           {1}, {1, 1}, {3, 7}, {1, 2, 3, 4, 5}, {1, 1000}, {741, 936, 2, 32, 2, 7, 1, 1},
           {808, 2, 30, 444, 3, 273, 10}, {97, 3, 1, 398, 7, 3, 7, 383}})
    check_schedule(w);
  uint64_t state = kSeed;
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<uint64_t> w(1 + trial % 9);
    for (uint64_t& x : w) x = 1 + (state = splitmix64(state)) % (trial % 2 ? 50 : 500);
    check_schedule(w);
  }
}

// (c) Over the first N samples of a blend each dataset's share is within 1 of w_d * N, every dataset
// walks through its own windows as a permutation, and sample i is a pure function of i.
TEST(OpenData, BlendProportionsAndPurity) {
  TempDir dir;
  const std::string spec =
      "0.2 " + write_dataset(dir, 0, 40) + " 0.5 " + write_dataset(dir, 1, 25) + " 0.3 " + write_dataset(dir, 2, 60);
  const double weight[3] = {0.2, 0.5, 0.3};
  DataSources a = open_data(data_config(spec), kT, kVocab, kSeed);
  const int n = 1000;
  std::vector<Row> forward = rows(*a.train, 0, n);

  std::map<int, std::vector<int32_t>> seen;   // dataset -> window starts in sample order
  for (int i = 0; i < n; ++i) {
    seen[dataset_of(forward[i])].push_back(position_of(forward[i]));
    for (int d = 0; d < 3; ++d)
      ASSERT_LT(std::fabs(static_cast<double>(seen[d].size()) - weight[d] * (i + 1)), 1.0) << d << " at " << i;
  }
  for (int d = 0; d < 3; ++d) {
    const IndexedDataset ds(dir / ("ds" + std::to_string(d)));
    const size_t windows = (ds.num_tokens() - 1) / kT;
    ASSERT_GE(seen[d].size(), windows);
    std::set<int32_t> epoch(seen[d].begin(), seen[d].begin() + windows);
    EXPECT_EQ(epoch.size(), windows) << "dataset " << d << ": first epoch is not a permutation";
    EXPECT_EQ(*epoch.rbegin(), static_cast<int32_t>((windows - 1) * kT));
  }

  // A second source, read backwards one sample at a time and in scattered chunks, agrees.
  DataSources b = open_data(data_config(spec), kT, kVocab, kSeed);
  for (int i = n - 1; i >= 0; i -= 7) EXPECT_EQ(rows(*b.train, i, 1)[0], forward[i]) << i;
  for (int first : {513, 0, 998, 250}) {
    std::vector<Row> chunk = rows(*b.train, first, 2);
    EXPECT_EQ(chunk[0], forward[first]);
    EXPECT_EQ(chunk[1], forward[first + 1]);
  }
}

// (d) A split trains on the first round(split * D) documents of each dataset and validates on the
// rest; no window crosses the cut.
TEST(OpenData, SplitKeepsTrainingAndValidationDocumentsApart) {
  TempDir dir;
  const std::string p0 = write_dataset(dir, 0, 40), p1 = write_dataset(dir, 1, 60);
  DataSources src = open_data(data_config("1 " + p0 + " 3 " + p1, 0.75), kT, kVocab, kSeed);
  ASSERT_NE(src.val, nullptr);
  const int32_t cut[2] = {static_cast<int32_t>(IndexedDataset(p0).document_offset(30)),
                          static_cast<int32_t>(IndexedDataset(p1).document_offset(45))};
  std::set<int> train_sets, val_sets;
  for (const Row& r : rows(*src.train, 0, 400)) {
    train_sets.insert(dataset_of(r));
    for (int32_t t : r) ASSERT_LT(t % kPerDataset, cut[t / kPerDataset]) << "training token past the cut";
  }
  for (const Row& r : rows(*src.val, 0, 400)) {
    val_sets.insert(dataset_of(r));
    for (int32_t t : r) ASSERT_GE(t % kPerDataset, cut[t / kPerDataset]) << "validation token before the cut";
  }
  EXPECT_EQ(train_sets, (std::set<int>{0, 1}));
  EXPECT_EQ(val_sets, (std::set<int>{0, 1}));
  EXPECT_NE(src.description.find("documents [30, 40) of 40"), std::string::npos) << src.description;
  EXPECT_NE(src.description.find("documents [0, 45) of 60"), std::string::npos) << src.description;

  // data.val names the validation data instead; training then reads every document.
  const std::string p2 = write_dataset(dir, 2, 20);
  DataSources own = open_data(data_config(p0, 1.0, p2), kT, kVocab, kSeed);
  for (const Row& r : rows(*own.val, 0, 50)) EXPECT_EQ(dataset_of(r), 2);
  for (const Row& r : rows(*own.train, 0, 50)) EXPECT_EQ(dataset_of(r), 0);
}

// What each DP rank reads in one step, with Trainer::load_micro's arithmetic:
// sample = consumed + dp_rank * (G / dp) + micro * B + b.
std::vector<std::map<int64_t, Row>> read_step(BatchSource& s, int64_t consumed, int G, int B, int dp) {
  std::vector<std::map<int64_t, Row>> ranks(dp);
  for (int r = 0; r < dp; ++r)
    for (int micro = 0; micro < G / dp / B; ++micro) {
      const int64_t first = consumed + static_cast<int64_t>(r) * (G / dp) + static_cast<int64_t>(micro) * B;
      std::vector<Row> got = rows(s, first, B);
      for (int b = 0; b < B; ++b) ranks[r][first + b] = got[b];
    }
  return ranks;
}

// The samples of one step over all ranks, after checking that no two ranks read the same sample.
std::map<int64_t, Row> step_union(const std::vector<std::map<int64_t, Row>>& ranks) {
  std::map<int64_t, Row> all;
  for (const auto& rank : ranks)
    for (const auto& [i, row] : rank) EXPECT_TRUE(all.emplace(i, row).second) << "sample " << i << " read twice";
  return all;
}

std::string blend_of_three(const TempDir& dir) {
  return "0.2 " + write_dataset(dir, 0, 40) + " 0.5 " + write_dataset(dir, 1, 25) + " 0.3 " + write_dataset(dir, 2, 60);
}

// (e) For dp in {1, 2, 4} the ranks of a step read disjoint samples whose union is the same.
TEST(OpenData, DataParallelRanksSplitTheSameStep) {
  TempDir dir;
  DataSources src = open_data(data_config(blend_of_three(dir)), kT, kVocab, kSeed);
  const int G = 16, B = 2;
  for (int64_t step = 0; step < 5; ++step) {
    const std::map<int64_t, Row> one = step_union(read_step(*src.train, step * G, G, B, 1));
    ASSERT_EQ(one.size(), static_cast<size_t>(G));
    EXPECT_EQ(one.begin()->first, step * G);
    for (int dp : {2, 4}) EXPECT_EQ(step_union(read_step(*src.train, step * G, G, B, dp)), one) << "dp " << dp;
  }
}

// (f) A run stopped after k steps and resumed from consumed_samples = k * G with another DP size on
// freshly opened data reads exactly what an uninterrupted run reads.
TEST(OpenData, ResumeWithAnotherDataParallelSizeContinuesExactly) {
  TempDir dir;
  const std::string spec = blend_of_three(dir);
  const int G = 8, B = 2, steps = 12, stop = 5;
  DataSources whole = open_data(data_config(spec), kT, kVocab, kSeed);
  DataSources resumed = open_data(data_config(spec), kT, kVocab, kSeed);
  for (int step = 0; step < steps; ++step) {
    const std::map<int64_t, Row> expected = step_union(read_step(*whole.train, int64_t(step) * G, G, B, 2));
    if (step >= stop) EXPECT_EQ(step_union(read_step(*resumed.train, int64_t(step) * G, G, B, 4)), expected);
  }
}

TEST(OpenData, SeedChangesTheOrder) {
  TempDir dir;
  const std::string spec = blend_of_three(dir);
  DataSources a = open_data(data_config(spec), kT, kVocab, kSeed);
  DataSources b = open_data(data_config(spec), kT, kVocab, kSeed + 1);
  EXPECT_NE(read(*a.train, 0, 64), read(*b.train, 0, 64));
}

// Validation of the [data] options, through the same path `trident train` takes.
void expect_config_error(const std::vector<std::string>& args, const std::vector<std::string>& parts) {
  expect_input_error(
      [&] {
        RunConfig c = parse_args(args).cfg;
        validate_run_config(c, 1);
      },
      parts);
}

// (g) Bad specs, splits and files fail with one line naming the option or the file.
TEST(OpenData, BadInputsNameTheOptionOrFile) {
  expect_config_error({"--data.train", "0.5 a 0.5"}, {"data.train", "3 words", "W1 PREFIX1 W2 PREFIX2"});
  expect_config_error({"--data.train", "-1 a 1 b"}, {"data.train", "'-1'", "positive decimal"});
  expect_config_error({"--data.train", "0 a 1 b"}, {"data.train", "'0'"});
  expect_config_error({"--data.train", "x a 1 b"}, {"data.train", "'x'"});
  expect_config_error({"--data.train", "1e3 a 1 b"}, {"data.train", "'1e3'"});
  expect_config_error({"--data.train", "0.1234567 a 1 b"}, {"data.train", "fewer significant digits"});
  expect_config_error({"--data.val", "1 a b"}, {"data.val"});
  expect_config_error({"--data.split", "0"}, {"data.split", "(0, 1]"});
  expect_config_error({"--data.split", "1.5"}, {"data.split", "(0, 1]"});
  expect_config_error({"--data.split", "0.9", "--data.val", "v"}, {"data.split", "data.val"});

  TempDir dir;
  const std::string p0 = write_dataset(dir, 0, 40);
  auto open = [&](const DataConfig& c, int seq_len = kT, int vocab = kVocab) { open_data(c, seq_len, vocab, kSeed); };
  expect_input_error([&] { open(data_config("")); }, {"data.train is empty"});
  expect_input_error([&] { open(data_config("0.5 a 0.5")); }, {"data.train"});
  expect_input_error([&] { open(data_config("1 " + p0 + " 1 " + dir / "missing")); }, {dir / "missing.idx"});
  expect_input_error([&] { open(data_config(p0, 1.0, dir / "nope")); }, {dir / "nope.idx"});
  expect_input_error([&] { open(data_config(p0), 1000); }, {p0, "model.seq_len + 1 = 1001"});
  // 40 documents: 0.99 keeps all 40 for training, 0.01 none.
  expect_input_error([&] { open(data_config(p0, 0.99)); }, {"data.split = 0.99", p0, "validation", "lower data.split"});
  expect_input_error([&] { open(data_config(p0, 0.01)); }, {"data.split = 0.01", p0, "training", "raise data.split"});
  // The last document alone (5 tokens) holds one window of seq_len 4 but none of seq_len 5.
  expect_input_error([&] { open(data_config(p0, 39.0 / 40), 5); }, {"1 of the 40 documents", "validation"});
  open(data_config(p0, 39.0 / 40), 4);

  // Token ids are checked as samples are read; opening does not scan the data.
  DataSources small_vocab = open_data(data_config(p0), kT, 100, kSeed);
  expect_input_error([&] { read(*small_vocab.train, 0, 64); }, {p0, "model.vocab_size = 100"});
}

}  // namespace
}  // namespace trident
