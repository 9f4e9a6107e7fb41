// Reading and writing the files of a Hugging Face tokenizer (tokenizer_files.hpp).
#include "trident/io/tokenizer_files.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "trident/core/error.hpp"
#include "trident/io/safetensors.hpp"

namespace trident {

namespace fs = std::filesystem;

const std::string* TokenizerFiles::find(const std::string& name) const {
  for (const auto& [n, text] : files)
    if (n == name) return &text;
  return nullptr;
}

const std::vector<std::string>& tokenizer_file_names() {
  static const std::vector<std::string> names = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                                 "vocab.json", "merges.txt"};
  return names;
}

TokenizerFiles read_tokenizer_files(const std::string& src) {
  const fs::path json_file = fs::is_directory(src) ? fs::path(src) / "tokenizer.json" : fs::path(src);
  if (!fs::is_regular_file(json_file))
    throw InputError(str(json_file.string(), ": no such file; give a Hugging Face tokenizer.json or the directory "
                                             "holding one"));
  TokenizerFiles out;
  for (const std::string& name : tokenizer_file_names()) {
    const fs::path from = name == "tokenizer.json" ? json_file : json_file.parent_path() / name;
    if (name != "tokenizer.json" && !fs::exists(from)) continue;
    std::ifstream in(from, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.is_open() || in.bad())
      throw InputError(str(from.string(), ": cannot read (", std::strerror(errno), ")"));
    out.files.emplace_back(name, std::move(text));
  }
  return out;
}

void write_tokenizer_files(const TokenizerFiles& t, const std::string& dir) {
  for (const auto& [name, text] : t.files) write_file_atomically((fs::path(dir) / name).string(), text);
}

}  // namespace trident
