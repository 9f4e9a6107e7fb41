// Checks decode(encode(x)) == x for the GPT-2 tokenizer on real files: every line of the .jsonl
// inputs ("text" field) and every other input file as a whole, plus invalid UTF-8 byte strings.
//   tokenizer_roundtrip VOCAB MERGES FILE...
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "trident/io/tokenizer.hpp"

namespace {

bool round_trips(const trident::Tokenizer& tok, const std::string& text, const std::string& what) {
  const std::string back = tok.decode(tok.encode(text));
  if (back == text) return true;
  size_t i = 0;
  while (i < back.size() && i < text.size() && back[i] == text[i]) ++i;
  std::fprintf(stderr, "FAIL round trip of %s: first difference at byte %zu of %zu (decoded %zu bytes)\n",
               what.c_str(), i, text.size(), back.size());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: tokenizer_roundtrip VOCAB MERGES FILE...\n");
    return 2;
  }
  const auto tok = trident::make_tokenizer("gpt2", argv[1], argv[2]);
  size_t checked = 0, failed = 0;
  const auto check = [&](const std::string& text, const std::string& what) {
    ++checked;
    if (!round_trips(*tok, text, what)) ++failed;
  };

  // The JS reference cannot see these, so only the round trip is checked for them.
  const char* invalid_utf8[] = {"\xff", "abc\xc3", "\xc3(x", "\xe2\x82", "\xed\xa0\x80 surrogate",
                                "\xc0\xaf overlong", "\xf4\x90\x80\x80 past U+10FFFF", " \x80\x81\x82 ",
                                "caf\xe9 latin-1", "\xf0\x9f\x91 truncated emoji"};
  for (const char* s : invalid_utf8) check(s, "an invalid UTF-8 string");

  for (int i = 3; i < argc; ++i) {
    const std::string path = argv[i];
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "tokenizer_roundtrip: cannot read %s\n", path.c_str());
      return 2;
    }
    if (path.size() > 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0) {
      std::string line;
      for (size_t n = 1; std::getline(in, line); ++n)
        if (!line.empty()) check(nlohmann::json::parse(line).at("text").get<std::string>(), path + ":" + std::to_string(n));
    } else {
      std::stringstream text;
      text << in.rdbuf();
      check(text.str(), path);
    }
  }
  std::printf("%s round trip: %zu of %zu texts decode back to their bytes\n", failed ? "FAIL" : "OK",
              checked - failed, checked);
  return failed ? 1 : 0;
}
