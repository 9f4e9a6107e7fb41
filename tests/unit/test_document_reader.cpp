// The inputs `trident tokenize` reads from a directory: text files once each; binary files and
// second paths to the same file (symlinks) are left out and reported.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "temp_dir.hpp"
#include "trident/io/document_reader.hpp"

namespace trident {
namespace {

namespace fs = std::filesystem;

TEST(ExpandInputPaths, DirectorySkipsBinaryFilesAndSymlinkedDuplicates) {
  test::TempDir dir;
  std::ofstream(dir / "a.txt") << "héllo text\n";
  std::ofstream(dir / "b.bin", std::ios::binary) << std::string("\x7f" "ELF\0\0\x01\x02", 8);
  fs::create_symlink(dir / "a.txt", dir / "c_link.txt");
  std::vector<std::string> skipped;
  const std::vector<std::string> files = expand_input_paths({dir.path().string()}, &skipped);
  EXPECT_EQ(files, std::vector<std::string>{dir / "a.txt"});
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_NE(skipped[0].find("b.bin (not text)"), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[1].find("c_link.txt (same file as"), std::string::npos) << skipped[1];
}

// A file named on the command line is read as asked, binary or not.
TEST(ExpandInputPaths, NamedFilesAreKept) {
  test::TempDir dir;
  std::ofstream(dir / "b.bin", std::ios::binary) << std::string("\0\0\0", 3);
  std::vector<std::string> skipped;
  EXPECT_EQ(expand_input_paths({dir / "b.bin"}, &skipped), std::vector<std::string>{dir / "b.bin"});
  EXPECT_TRUE(skipped.empty());
}

}  // namespace
}  // namespace trident
