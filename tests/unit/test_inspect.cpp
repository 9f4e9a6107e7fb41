// `trident inspect` and read_checkpoint_info on crafted files: declared shapes are checked
// against the file's size, malformed attributes are refused, and every failure is an InputError.
#include <gtest/gtest.h>

#include "craft_checkpoint.hpp"
#include "expect_input_error.hpp"
#include "temp_dir.hpp"
#include "trident/io/checkpoint.hpp"

namespace trident {
namespace {

using test::CraftedFile;
using test::expect_input_error;
using test::TempDir;

TEST(Inspect, DescribesASmallCheckpoint) {
  TempDir dir;
  const std::string path = dir / "ok.h5";
  {
    CraftedFile f(path);
    f.checkpoint_attrs();
    ASSERT_TRUE(f.dataset("/model", "wte", {4, 3}));
  }
  const std::string text = describe_checkpoint(path);
  EXPECT_NE(text.find("/model/wte"), std::string::npos) << text;
  EXPECT_NE(text.find("4 x 3"), std::string::npos) << text;
  EXPECT_NE(text.find("step 2"), std::string::npos) << text;
}

// A [2^20, 2^20] tensor in a file of a few KB: refused before 4 TiB are allocated.
TEST(Inspect, ShapeLargerThanTheFileIsRefused) {
  TempDir dir;
  const std::string path = dir / "huge.h5";
  {
    CraftedFile f(path);
    f.checkpoint_attrs();
    ASSERT_TRUE(f.dataset("/model", "wte", {1u << 20, 1u << 20}));
  }
  expect_input_error([&] { describe_checkpoint(path); }, {path, "/model/wte", "1048576 x 1048576", "bytes"});
}

// A kept tokenizer file declaring 2^40 bytes in a file of a few KB: refused before it is allocated.
TEST(Inspect, TokenizerLargerThanTheFileIsRefused) {
  TempDir dir;
  const std::string path = dir / "huge_tokenizer.h5";
  {
    CraftedFile f(path);
    f.checkpoint_attrs();
    ASSERT_TRUE(f.dataset("/model", "wte", {4, 3}));
    ASSERT_TRUE(f.dataset("/tokenizer", "tokenizer.json", {hsize_t{1} << 40}));
  }
  expect_input_error([&] { read_checkpoint_tokenizer(path); }, {path, "/tokenizer/tokenizer.json", "more than the file holds"});
}

// An attribute of many values where one is expected would be written past the variable that
// receives it.
TEST(Inspect, AttributeOfSeveralValuesIsRefused) {
  TempDir dir;
  const std::string path = dir / "array_attr.h5";
  {
    CraftedFile f(path);
    f.checkpoint_attrs();
    f.attr_int64("step", 7, 4096);
  }
  expect_input_error([&] { read_checkpoint_info(path); }, {path, "missing one of the attributes"});
}

}  // namespace
}  // namespace trident
