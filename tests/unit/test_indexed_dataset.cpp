// Megatron indexed dataset: writer -> reader round trips, a hand-built file read byte for byte,
// and corrupt files rejected with InputError naming the file.
#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "expect_input_error.hpp"
#include "temp_dir.hpp"
#include "trident/core/error.hpp"
#include "trident/io/indexed_dataset.hpp"

namespace trident {
namespace {

namespace fs = std::filesystem;

using test::expect_input_error;
using test::TempDir;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

// The .idx Megatron writes for sequences of the given sizes, one document each: uint16 tokens
// unless another dtype code (and its width) is given.
std::string megatron_index(const std::vector<int32_t>& sizes, uint64_t version = 1, uint8_t dtype = 8,
                           int token_bytes = 2) {
  std::string idx("MMIDIDX\0\0", 9);
  put<uint64_t>(idx, version);
  put<uint8_t>(idx, dtype);
  put<uint64_t>(idx, sizes.size());
  put<uint64_t>(idx, sizes.size() + 1);
  for (int32_t s : sizes) put<int32_t>(idx, s);
  int64_t ptr = 0;
  for (int32_t s : sizes) {
    put<int64_t>(idx, ptr);
    ptr += token_bytes * s;
  }
  for (size_t d = 0; d <= sizes.size(); ++d) put<int64_t>(idx, static_cast<int64_t>(d));
  return idx;
}

std::vector<int32_t> all_tokens(const IndexedDataset& ds) {
  std::vector<int32_t> out(ds.num_tokens());
  ds.read_tokens(0, out.size(), out.data());
  return out;
}

void round_trip(int vocab_size, int expected_token_bytes, const std::vector<std::vector<int32_t>>& docs) {
  TempDir dir;
  const std::string prefix = dir / "ds";
  IndexedDatasetWriter w(prefix, vocab_size);
  for (const auto& d : docs) w.add_document(d);
  EXPECT_FALSE(fs::exists(prefix + ".bin")) << "final names must appear only in finish()";
  w.finish();
  EXPECT_FALSE(fs::exists(prefix + ".bin.tmp"));
  EXPECT_FALSE(fs::exists(prefix + ".idx.tmp"));

  const IndexedDataset ds(prefix);
  EXPECT_EQ(ds.token_bytes(), expected_token_bytes);
  ASSERT_EQ(ds.num_sequences(), docs.size());
  ASSERT_EQ(ds.num_documents(), docs.size());
  std::vector<int32_t> concat;
  for (size_t i = 0; i < docs.size(); ++i) {
    EXPECT_EQ(ds.sequence(i), docs[i]) << "sequence " << i;
    EXPECT_EQ(ds.sequence_length(i), docs[i].size());
    EXPECT_EQ(ds.document_index()[i + 1], static_cast<int64_t>(i + 1));
    concat.insert(concat.end(), docs[i].begin(), docs[i].end());
  }
  EXPECT_EQ(ds.num_tokens(), concat.size());
  EXPECT_EQ(all_tokens(ds), concat);
  // A window across a sequence boundary.
  std::vector<int32_t> window(4);
  ds.read_tokens(2, 4, window.data());
  EXPECT_EQ(window, std::vector<int32_t>(concat.begin() + 2, concat.begin() + 6));
}

TEST(IndexedDataset, RoundTripUint16) {
  round_trip(50257, 2, {{50256, 0, 1, 2}, {7}, {}, {65, 66, 67, 50256}, {40000, 3}});
}

TEST(IndexedDataset, RoundTripInt32) {
  round_trip(100000, 4, {{99999, 0, 65535, 65536}, {12}, {1, 2, 3, 4, 5, 6}});
}

TEST(IndexedDataset, WidthFollowsMegatron) {
  // Megatron's DType.optimal_dtype: uint16 below 65500, int32 from there on.
  round_trip(65499, 2, {{65498, 1, 2, 3}, {4, 5}});
  round_trip(65500, 4, {{65499, 1, 2, 3}, {4, 5}});
}

TEST(IndexedDataset, ReadsHandBuiltFileAndWritesTheSameBytes) {
  TempDir dir;
  const std::string idx = megatron_index({2, 3});
  std::string bin;
  for (uint16_t t : {7, 65535, 1, 2, 3}) put<uint16_t>(bin, t);
  write_bytes(dir / "hand.idx", idx);
  write_bytes(dir / "hand.bin", bin);

  const IndexedDataset ds(dir / "hand");
  EXPECT_EQ(ds.dtype_code(), 8);
  EXPECT_EQ(ds.num_documents(), 2u);
  EXPECT_EQ(ds.sequence(0), (std::vector<int32_t>{7, 65535}));
  EXPECT_EQ(ds.sequence(1), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(ds.document_index(), (std::vector<int64_t>{0, 1, 2}));

  IndexedDatasetWriter w(dir / "ours", 50257);
  w.add_document({7, 40000});
  w.add_document({1, 2, 3});
  w.finish();
  bin.replace(2, 2, "\x40\x9c", 2);   // 40000 = 0x9c40, little-endian
  EXPECT_EQ(read_bytes(dir / "ours.idx"), idx);
  EXPECT_EQ(read_bytes(dir / "ours.bin"), bin);
}

TEST(IndexedDataset, RejectsCorruptFiles) {
  TempDir dir;
  const std::string good_idx = megatron_index({2, 3});
  const std::string good_bin(10, '\0');
  const auto make = [&](const std::string& name, const std::string& idx, const std::string& bin) {
    write_bytes(dir / (name + ".idx"), idx);
    write_bytes(dir / (name + ".bin"), bin);
    return dir / name;
  };

  std::string bad_magic = good_idx;
  bad_magic[0] = 'X';
  const std::string p1 = make("magic", bad_magic, good_bin);
  expect_input_error([&] { IndexedDataset ds(p1); }, {p1 + ".idx", "bad magic"});

  const std::string p2 = make("truncated_bin", good_idx, good_bin.substr(0, 6));
  expect_input_error([&] { IndexedDataset ds(p2); }, {p2 + ".bin", "6 bytes", "needs 10", "truncated"});

  const std::string p3 = make("future", megatron_index({2, 3}, 2), good_bin);
  expect_input_error([&] { IndexedDataset ds(p3); }, {p3 + ".idx", "version 2"});

  const std::string p4 = make("truncated_idx", good_idx.substr(0, good_idx.size() - 8), good_bin);
  expect_input_error([&] { IndexedDataset ds(p4); }, {p4 + ".idx", "truncated"});

  const std::string p5 = make("short_header", good_idx.substr(0, 20), good_bin);
  expect_input_error([&] { IndexedDataset ds(p5); }, {p5 + ".idx", "shorter than the header"});

  std::string float_dtype = good_idx;
  float_dtype[17] = 7;
  const std::string p6 = make("float", float_dtype, good_bin);
  expect_input_error([&] { IndexedDataset ds(p6); }, {p6 + ".idx", "not an integer token type"});

  std::string gap = good_idx;
  const int64_t wrong_pointer = 6;
  std::memcpy(&gap[34 + 2 * 4 + 8], &wrong_pointer, 8);   // second sequence pointer
  const std::string p7 = make("gap", gap, good_bin);
  expect_input_error([&] { IndexedDataset ds(p7); }, {p7 + ".idx", "back to back"});

  expect_input_error([&] { IndexedDataset ds(dir / "absent"); }, {dir / "absent.idx", "cannot open"});
  write_bytes(dir / "no_bin.idx", good_idx);
  expect_input_error([&] { IndexedDataset ds(dir / "no_bin"); }, {dir / "no_bin.bin", "cannot open"});
}

constexpr int64_t kTooWide = (int64_t{1} << 32) + 7;

TEST(IndexedDataset, Int64IdsMustFitInt32) {
  TempDir dir;
  std::string bin;
  for (int64_t t : {int64_t{5}, int64_t{INT32_MAX}, int64_t{7}}) put<int64_t>(bin, t);
  write_bytes(dir / "fits.idx", megatron_index({3}, 1, 5, 8));
  write_bytes(dir / "fits.bin", bin);
  EXPECT_EQ(IndexedDataset(dir / "fits").sequence(0), (std::vector<int32_t>{5, INT32_MAX, 7}));

  // 2^32 + 7 would read as 7 if narrowed.
  bin.replace(16, 8, std::string(reinterpret_cast<const char*>(&kTooWide), 8));
  write_bytes(dir / "wide.idx", megatron_index({3}, 1, 5, 8));
  write_bytes(dir / "wide.bin", bin);
  expect_input_error([&] { IndexedDataset ds(dir / "wide"); },
                     {dir / "wide.bin", "token 2", "4294967303", "does not fit"});
}

// A .bin cut short while a run reads it: an InputError naming it, not SIGBUS.
TEST(IndexedDataset, BinTruncatedWhileOpenIsReported) {
  TempDir dir;
  {
    IndexedDatasetWriter w(dir / "ds", 257);
    w.add_document(std::vector<int32_t>(5000, 3));
    w.finish();
  }
  const IndexedDataset ds(dir / "ds");
  fs::resize_file(dir / "ds.bin", 100);
  std::vector<int32_t> out(10);
  expect_input_error([&] { ds.read_tokens(4000, out.size(), out.data()); }, {dir / "ds.bin", "shorter"});
}

TEST(IndexedDatasetWriter, AbandonedWriterLeavesNoFiles) {
  TempDir dir;
  {
    IndexedDatasetWriter w(dir / "ds", 257);
    w.add_document({1, 2, 3});
    expect_input_error([&] { w.add_document({257}); }, {"token id 257", "outside the vocabulary"});
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(IndexedDatasetWriter, ReplacesAnExistingDataset) {
  TempDir dir;
  for (int32_t token : {5, 6}) {
    IndexedDatasetWriter w(dir / "ds", 257);
    w.add_document({token});
    w.finish();
  }
  EXPECT_EQ(IndexedDataset(dir / "ds").sequence(0), std::vector<int32_t>{6});
}

}  // namespace
}  // namespace trident
