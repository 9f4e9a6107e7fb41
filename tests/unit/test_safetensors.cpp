// safetensors: writer -> reader round trips per dtype, fp16/bf16 rounding, row-range reads,
// sharded models and their index, atomic writes, and every kind of corrupt file refused with
// InputError naming the file and the tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "expect_input_error.hpp"
#include "temp_dir.hpp"
#include "trident/core/dtype.hpp"
#include "trident/io/safetensors.hpp"

namespace trident {
namespace {

namespace fs = std::filesystem;
using test::expect_input_error;
using test::TempDir;
using Dtype = SafetensorsDtype;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A file as any writer could lay it out: header length, the header text as given, the data.
std::string st_bytes(const std::string& header, const std::string& data) {
  const uint64_t n = header.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + header + data;
}

float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::vector<float> ramp(size_t n, float scale = 0.37f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * scale) * (1.0f + static_cast<float>(i));
  return v;
}

// What a value becomes when stored as `dtype` and read back.
float stored(Dtype dtype, float f) {
  if (dtype == Dtype::BF16) return bf16_to_float(float_to_bf16(f));
  if (dtype == Dtype::F16) return f16_to_float(float_to_f16(f));
  return f;
}

void round_trip(Dtype dtype) {
  TempDir dir;
  const std::string path = dir / "m.safetensors";
  const std::vector<float> a = ramp(24), b = ramp(7, 1.3f), c = {3.25f};
  SafetensorsWriter w;
  w.add({"z.weight", dtype, {2, 3, 4}, a.data()});
  w.add({"a.bias", dtype, {7}, b.data()});
  w.add({"scalar", dtype, {}, c.data()});
  w.add({"empty", dtype, {0, 5}, nullptr});
  w.set_metadata("format", "pt");
  w.write(path);
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  // The data section starts 8-aligned, the header padded with spaces.
  const std::string bytes = read_bytes(path);
  uint64_t header_bytes;
  std::memcpy(&header_bytes, bytes.data(), 8);
  EXPECT_EQ((8 + header_bytes) % 8, 0u);
  const std::string header = bytes.substr(8, header_bytes);
  const size_t close = header.rfind('}');
  EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos);
  EXPECT_LT(header.size() - close - 1, 8u);
  EXPECT_EQ(bytes.size(), 8 + header_bytes + w.data_bytes());

  const SafetensorsFile f(path);
  EXPECT_EQ(f.tensors(), (std::vector<std::string>{"z.weight", "a.bias", "scalar", "empty"}));  // insertion order
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  const SafetensorsTensor& t = f.info("z.weight");
  EXPECT_EQ(t.dtype, dtype);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(t.begin, 0u);
  EXPECT_EQ(t.end, 24 * safetensors_dtype_size(dtype));
  EXPECT_EQ(f.info("empty").numel(), 0u);
  for (const auto& [name, src] : {std::pair<std::string, const std::vector<float>*>{"z.weight", &a}, {"a.bias", &b},
                                  {"scalar", &c}}) {
    std::vector<float> got(src->size());
    f.read_f32(name, got.data());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(float_bits(got[i]), float_bits(stored(dtype, (*src)[i]))) << name << "[" << i << "]";
  }
}

TEST(Safetensors, RoundTripF32) { round_trip(Dtype::F32); }
TEST(Safetensors, RoundTripBf16) { round_trip(Dtype::BF16); }
TEST(Safetensors, RoundTripF16) { round_trip(Dtype::F16); }

TEST(Safetensors, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808000u)), 0x3f80u);   // tie, lower half even: down
  EXPECT_EQ(float_to_bf16(bits_float(0x3f818000u)), 0x3f82u);   // tie, lower half odd: up
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808001u)), 0x3f81u);   // past the tie: up
  EXPECT_EQ(float_to_bf16(bits_float(0x3f807fffu)), 0x3f80u);   // before the tie: down
  EXPECT_EQ(float_to_bf16(bits_float(0x7f7fffffu)), 0x7f80u);   // FLT_MAX rounds to infinity
  EXPECT_EQ(float_to_bf16(bits_float(0xff800000u)), 0xff80u);   // -inf stays
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000u);
  // A NaN whose payload is only in the dropped bits must not become infinity.
  for (uint32_t nan : {0x7f800001u, 0xffc00000u, 0x7fffffffu}) {
    const uint16_t b = float_to_bf16(bits_float(nan));
    EXPECT_TRUE(std::isnan(bf16_to_float(b))) << std::hex << nan;
    EXPECT_EQ(b & 0x8000u, (nan >> 16) & 0x8000u);
  }
}

TEST(Safetensors, F16ConvertsExactlyAndRoundsToNearestEven) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_float(static_cast<uint16_t>(h));
    if (((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff)) EXPECT_TRUE(std::isnan(f)) << h;
    else EXPECT_EQ(float_to_f16(f), h) << std::hex << h;
  }
  EXPECT_EQ(f16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));       // smallest subnormal
  EXPECT_EQ(f16_to_float(0xfbff), -65504.0f);
  EXPECT_EQ(float_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00u);       // tie: to even (down)
  EXPECT_EQ(float_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02u);   // tie: to even (up)
  EXPECT_EQ(float_to_f16(65519.99f), 0x7bffu);                           // below the tie: 65504
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00u);                            // the tie: infinity
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000u);               // tie to even: zero
  EXPECT_EQ(float_to_f16(std::ldexp(1.5f, -25)), 0x0001u);
  EXPECT_EQ(float_to_f16(std::ldexp(3.0f, -25)), 0x0002u);               // tie 1.5 ulp: even, 2
  EXPECT_EQ(float_to_f16(-std::ldexp(1.0f, -30)), 0x8000u);
  EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(bits_float(0x7f800001u)))));
  EXPECT_EQ(float_to_f16(-INFINITY), 0xfc00u);
}

TEST(Safetensors, ReadsRowRanges) {
  TempDir dir;
  const std::string path = dir / "rows.safetensors";
  const std::vector<float> v = ramp(5 * 3 * 2);
  SafetensorsWriter w;
  w.add({"w", Dtype::BF16, {5, 3, 2}, v.data()});
  w.add({"s", Dtype::F16, {}, v.data()});
  w.write(path);
  const SafetensorsFile f(path);
  EXPECT_EQ(f.info("w").row_elements(), 6u);
  std::vector<float> rows(3 * 6);
  f.read_rows_f32("w", 1, 4, rows.data());
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i], stored(Dtype::BF16, v[6 + i])) << i;
  f.read_rows_f32("w", 5, 5, nullptr);   // an empty share
  float s = 0;
  f.read_rows_f32("s", 0, 1, &s);        // a scalar is one row
  EXPECT_EQ(s, stored(Dtype::F16, v[0]));
}

// A data section that does not start 8-aligned (another writer's unpadded header) reads the same.
TEST(Safetensors, ReadsUnalignedDataSection) {
  TempDir dir;
  const std::string path = dir / "odd.safetensors";
  const float vals[2] = {1.5f, -2.25f};
  const uint16_t half[1] = {0x3c00};
  write_bytes(path, st_bytes(R"({"h":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},)"
                             R"("x":{"shape":[2],"data_offsets":[2,10],"dtype":"F32"}})",
                             std::string(reinterpret_cast<const char*>(half), 2) +
                                 std::string(reinterpret_cast<const char*>(vals), 8)));
  const SafetensorsFile f(path);
  EXPECT_EQ(f.tensors(), (std::vector<std::string>{"h", "x"}));
  float got[2];
  f.read_f32("x", got);
  EXPECT_EQ(got[0], 1.5f);
  EXPECT_EQ(got[1], -2.25f);
  f.read_f32("h", got);
  EXPECT_EQ(got[0], 1.0f);
}

TEST(Safetensors, ReportsIntegerDtypesButConvertsOnlyFloats) {
  TempDir dir;
  const std::string path = dir / "ints.safetensors";
  const int64_t ids[3] = {1, -2, 3};
  write_bytes(path, st_bytes(R"({"ids":{"dtype":"I64","shape":[3],"data_offsets":[0,24]},)"
                             R"("mask":{"dtype":"BOOL","shape":[2],"data_offsets":[24,26]}})",
                             std::string(reinterpret_cast<const char*>(ids), 24) + std::string("\1\0", 2)));
  const SafetensorsFile f(path);
  EXPECT_EQ(f.info("ids").dtype, Dtype::I64);
  EXPECT_EQ(f.info("mask").dtype, Dtype::BOOL);
  int64_t back[3];
  std::memcpy(back, f.raw("ids"), 24);
  EXPECT_EQ(back[1], -2);
  float out[3];
  expect_input_error([&] { f.read_f32("ids", out); }, {path, "tensor 'ids'", "I64", "does not convert"});
}

// Each case breaks one rule; each message must name the file and (where there is one) the tensor.
struct Corrupt {
  const char* what;
  std::string bytes;
  std::vector<std::string> message;
};

TEST(Safetensors, RefusesCorruptFiles) {
  const std::string f8(8, '\0');
  const std::string ok_a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const uint64_t past = 1000, huge = 200'000'000;
  const std::vector<Corrupt> cases = {
      {"short", std::string("\x10\0\0", 3), {"3 bytes", "shorter than the 8-byte header length"}},
      {"header length past end", std::string(reinterpret_cast<const char*>(&past), 8) + "{}",
       {"header length 1000", "past the end of the file (10 bytes)"}},
      {"header over limit", std::string(reinterpret_cast<const char*>(&huge), 8) + "{}",
       {"over the format's limit"}},
      {"not JSON", st_bytes("{\"a\":", ""), {"not JSON"}},
      {"not an object", st_bytes("[1,2]", ""), {"JSON array, not an object"}},
      {"number out of range", st_bytes(R"({"a":{"dtype":"F32","shape":[1e999],"data_offsets":[0,8]}})", f8),
       {"not JSON (a number out of range)"}},
      {"unknown dtype", st_bytes(R"({"a":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}})", f8),
       {"tensor 'a'", "unknown dtype 'F12'"}},
      {"no dtype", st_bytes(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", f8), {"tensor 'a'", "no \"dtype\""}},
      {"negative dim", st_bytes(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", f8),
       {"tensor 'a'", "non-negative integers"}},
      {"fractional dim", st_bytes(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", f8),
       {"tensor 'a'", "non-negative integers"}},
      {"one offset", st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8]}})", f8),
       {"tensor 'a'", "data_offsets"}},
      {"end before begin", st_bytes(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", f8),
       {"tensor 'a'", "end before they begin"}},
      {"truncated data", st_bytes("{" + ok_a + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", f8 + "1234"),
       {"tensor 'b'", "[8, 16]", "past the end of the data section (12 bytes)", "truncated"}},
      {"size not shape x dtype", st_bytes(R"({"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,8]}})", f8),
       {"tensor 'a'", "hold 8 bytes", "shape [2] of BF16 needs 4"}},
      {"overflowing shape", st_bytes(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904],)"
                                     R"("data_offsets":[0,8]}})", f8),
       {"tensor 'a'", "needs more than the file's 8"}},
      {"overlap", st_bytes("{" + ok_a + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", f8 + "1234"),
       {"tensor 'b'", "overlap those of tensor 'a' [0, 8]"}},
      {"gap", st_bytes(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", f8), {"tensor 'b'", "no gaps"}},
      {"trailing bytes", st_bytes("{" + ok_a + "}", f8 + "xx"), {"end at byte 8", "holds 10"}},
      {"repeated name", st_bytes("{" + ok_a + "," + ok_a + "}", f8), {"tensor 'a'", "appears twice"}},
      {"metadata not strings", st_bytes(R"({"__metadata__":{"format":1},)" + ok_a + "}", f8),
       {"__metadata__ 'format'", "must be strings"}},
  };
  TempDir dir;
  for (const Corrupt& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string path = dir / "bad.safetensors";
    write_bytes(path, c.bytes);
    std::vector<std::string> parts = c.message;
    parts.push_back(path + ": ");
    expect_input_error([&] { SafetensorsFile f(path); }, parts);
    EXPECT_EQ(read_bytes(path), c.bytes) << "a reader must not touch the file";
  }
}

TEST(Safetensors, MissingTensorAndFileNameTheFile) {
  TempDir dir;
  const std::string path = dir / "m.safetensors";
  const float x = 1;
  SafetensorsWriter w;
  w.add({"x", Dtype::F32, {1}, &x});
  w.write(path);
  const SafetensorsFile f(path);
  expect_input_error([&] { f.info("lm_head.weight"); }, {path, "tensor 'lm_head.weight'", "missing"});
  expect_input_error([&] { SafetensorsFile g(dir / "nope.safetensors"); }, {dir / "nope.safetensors", "cannot open"});
  expect_input_error([&] { SafetensorsModel m(dir.path().string()); }, {"neither model.safetensors nor"});
}

// A mapped file cut short while open would fault on read; the read refuses it instead.
TEST(Safetensors, RefusesAFileShortenedSinceOpened) {
  TempDir dir;
  const std::string path = dir / "m.safetensors";
  const std::vector<float> v = ramp(4096);
  SafetensorsWriter w;
  w.add({"x", Dtype::F32, {4096}, v.data()});
  w.write(path);
  const SafetensorsFile f(path);
  ASSERT_EQ(::truncate(path.c_str(), 64), 0);
  std::vector<float> out(4096);
  expect_input_error([&] { f.read_f32("x", out.data()); }, {path, "changed size since it was opened"});
}

TEST(Safetensors, WriteReplacesAtomically) {
  TempDir dir;
  const std::string path = dir / "m.safetensors";
  write_bytes(path, "old");
  const float x = 2;
  SafetensorsWriter w;
  w.add({"x", Dtype::F32, {1}, &x});
  // Something at PATH.tmp that cannot be removed: the write fails and the old file stays.
  fs::create_directories(path + ".tmp/inside");
  expect_input_error([&] { w.write(path); }, {path, "stale", "unchanged"});
  EXPECT_EQ(read_bytes(path), "old");
  fs::remove_all(path + ".tmp");
  // A link left at PATH.tmp is replaced, never written through.
  write_bytes(dir / "victim", "victim");
  fs::create_symlink(dir / "victim", path + ".tmp");
  w.write(path);
  EXPECT_EQ(read_bytes(dir / "victim"), "victim");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  float back = 0;
  SafetensorsFile(path).read_f32("x", &back);
  EXPECT_EQ(back, 2.0f);
}

std::vector<SafetensorsEntry> entries_of_sizes(const std::vector<int64_t>& numels, const std::vector<float>& data) {
  std::vector<SafetensorsEntry> out;
  for (size_t i = 0; i < numels.size(); ++i) out.push_back({"t" + std::to_string(i), Dtype::F32, {numels[i]}, data.data()});
  return out;
}

TEST(Safetensors, PlansShardsInInsertionOrder) {
  const std::vector<float> none;
  // 4-byte elements; limit 40 bytes: 4+4 | 12 (alone, over the limit) | 8+2 | 1.
  const auto entries = entries_of_sizes({4, 4, 12, 8, 2, 1}, none);
  EXPECT_EQ(plan_shards(entries, 40), (std::vector<std::vector<size_t>>{{0, 1}, {2}, {3, 4}, {5}}));
  EXPECT_EQ(plan_shards(entries, 1000), (std::vector<std::vector<size_t>>{{0, 1, 2, 3, 4, 5}}));
  EXPECT_EQ(plan_shards({}, 10), (std::vector<std::vector<size_t>>{{}}));
  EXPECT_EQ(shard_file_name(0, 3), "model-00001-of-00003.safetensors");
  EXPECT_EQ(shard_file_name(11, 12), "model-00012-of-00012.safetensors");
}

TEST(Safetensors, ShardedModelRoundTrip) {
  TempDir dir;
  const std::vector<float> data = ramp(64);
  SafetensorsShardedWriter w(40);
  for (const SafetensorsEntry& e : entries_of_sizes({4, 4, 12, 8, 2, 1}, data)) w.add(e);
  w.set_metadata("format", "pt");
  w.write(dir.path().string());

  const std::string index = dir / "model.safetensors.index.json";
  const nlohmann::json j = nlohmann::json::parse(read_bytes(index));
  EXPECT_EQ(j["metadata"]["total_size"], 31 * 4);
  EXPECT_EQ(j["weight_map"]["t0"], "model-00001-of-00004.safetensors");
  EXPECT_EQ(j["weight_map"]["t2"], "model-00002-of-00004.safetensors");
  EXPECT_EQ(j["weight_map"]["t5"], "model-00004-of-00004.safetensors");
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));

  for (const std::string& path : {dir.path().string(), index}) {
    const SafetensorsModel m(path);
    EXPECT_TRUE(m.sharded());
    EXPECT_EQ(m.tensors(), (std::vector<std::string>{"t0", "t1", "t2", "t3", "t4", "t5"}));
    EXPECT_EQ(m.metadata().at("format"), "pt");
    EXPECT_EQ(m.file_of("t3").path(), dir / "model-00003-of-00004.safetensors");
    std::vector<float> got(12);
    m.read_f32("t2", got.data());
    EXPECT_EQ(got, std::vector<float>(data.begin(), data.begin() + 12));
    m.read_rows_f32("t3", 2, 5, got.data());
    EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + 3), std::vector<float>(data.begin() + 2, data.begin() + 5));
    expect_input_error([&] { m.info("t9"); }, {index, "tensor 't9'", "missing"});
  }

  // Saved again as one file: the index and the shards go, so no loader can pick them up.
  SafetensorsShardedWriter one;
  one.add({"only", Dtype::BF16, {2}, data.data()});
  one.write(dir.path().string());
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"model.safetensors"});
  const SafetensorsModel m(dir.path().string());
  EXPECT_FALSE(m.sharded());
  EXPECT_EQ(m.tensors(), std::vector<std::string>{"only"});

  // And sharded again: model.safetensors, which transformers would load first, goes.
  w.write(dir.path().string());
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
  EXPECT_TRUE(SafetensorsModel(dir.path().string()).sharded());
}

// The shards of one model written in parts, as ranks sharing a conversion would.
TEST(Safetensors, ShardsWrittenInParts) {
  TempDir dir;
  const std::vector<float> data = ramp(16);
  SafetensorsShardedWriter w(16);
  w.add({"a", Dtype::F32, {4}, data.data()});
  w.add({"b", Dtype::F32, {4}, nullptr});   // written by "another rank"
  ASSERT_EQ(w.plan().size(), 2u);
  w.write_shard(dir.path().string(), 0);
  SafetensorsShardedWriter other(16);
  other.add({"a", Dtype::F32, {4}, nullptr});
  other.add({"b", Dtype::F32, {4}, data.data() + 4});
  other.write_shard(dir.path().string(), 1);
  w.write_index(dir.path().string());
  const SafetensorsModel m(dir.path().string());
  std::vector<float> got(4);
  m.read_f32("b", got.data());
  EXPECT_EQ(got, std::vector<float>(data.begin() + 4, data.begin() + 8));
}

TEST(Safetensors, RefusesBadIndexes) {
  TempDir dir;
  const float x[2] = {1, 2};
  SafetensorsWriter w;
  w.add({"x", Dtype::F32, {2}, x});
  w.write(dir / "model-00001-of-00001.safetensors");
  const std::string index = dir / "model.safetensors.index.json";
  auto check = [&](const std::string& text, const std::vector<std::string>& parts) {
    write_bytes(index, text);
    expect_input_error([&] { SafetensorsModel m(dir.path().string()); }, parts);
  };
  check("{\"weight_map\": ", {index, "not JSON"});
  check(R"({"metadata": {"total_size": 1e999}})", {index, "not JSON (a number out of range)"});
  check(R"({"metadata": {}})", {index, "no \"weight_map\""});
  check(R"({"weight_map": {"x": "../model-00001-of-00001.safetensors"}})", {index, "tensor 'x'", "not a file name"});
  check(R"({"weight_map": {"x": 3}})", {index, "tensor 'x'", "not a file name"});
  check(R"({"weight_map": {"y": "model-00001-of-00001.safetensors"}})",
        {dir / "model-00001-of-00001.safetensors", "tensor 'y'", "missing, though", index});
  check(R"({"weight_map": {"x": "model-00002-of-00002.safetensors"}})",
        {dir / "model-00002-of-00002.safetensors", "cannot open"});
  write_bytes(index, R"({"weight_map": {"x": "model-00001-of-00001.safetensors"}})");
  EXPECT_EQ(SafetensorsModel(dir.path().string()).tensors(), std::vector<std::string>{"x"});
}

}  // namespace
}  // namespace trident
