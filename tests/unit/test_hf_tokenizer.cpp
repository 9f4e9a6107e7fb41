// tokenizer.json tokenizers on small hand-written files whose ids follow by hand: merges in both
// forms, ignore_merges, the three split patterns, NFC, added tokens, BOS/EOS, and bad files.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "byte_level_vocab.hpp"
#include "expect_input_error.hpp"
#include "temp_dir.hpp"
#include "trident/io/tokenizer.hpp"

namespace trident {
namespace {

using Ids = std::vector<int32_t>;
using nlohmann::json;
using test::expect_input_error;
using test::byte_char;

constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Bytes are ids 0..255; then "12" 256, "123" 257, "1234" 258, "he" 259, "hel" 260 and "hlo" 261
// (in the vocab, but no merge makes it); added tokens <|end|> 262, <|end|>! 263, <|bos|> 264.
json tiny(bool pair_merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  vocab["12"] = 256, vocab["123"] = 257, vocab["1234"] = 258, vocab["he"] = 259, vocab["hel"] = 260, vocab["hlo"] = 261;
  const std::vector<std::pair<std::string, std::string>> merges = {{"1", "2"}, {"12", "3"}, {"123", "4"},
                                                                    {"h", "e"}, {"he", "l"}};
  json m = json::array();
  for (const auto& [a, b] : merges) m.push_back(pair_merges ? json::array({a, b}) : json(a + " " + b));
  return json{{"version", "1.0"},
              {"added_tokens", json::array({{{"id", 262}, {"content", "<|end|>"}, {"special", true}},
                                            {{"id", 263}, {"content", "<|end|>!"}, {"special", false}},
                                            {{"id", 264}, {"content", "<|bos|>"}, {"special", true}}})},
              {"normalizer", nullptr},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
              {"post_processor", {{"type", "ByteLevel"}}},
              {"decoder", {{"type", "ByteLevel"}}},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}}}};
}

json split_pre_tokenizer(const std::string& regex) {
  return {{"type", "Sequence"},
          {"pretokenizers", json::array({{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"},
                                          {"invert", false}},
                                         {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
}

std::string write(const test::TempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir / name) << text;
  return dir / name;
}

std::unique_ptr<Tokenizer> load(const test::TempDir& dir, const json& tokenizer) {
  return make_tokenizer(write(dir, "tokenizer.json", tokenizer.dump()), "", "");
}

TEST(HfTokenizer, MergesAsStringsOrPairsGiveTheSameIds) {
  test::TempDir dir;
  write(dir, "tokenizer_config.json", R"({"eos_token": "<|end|>"})");
  for (const bool pairs : {false, true}) {
    const auto tok = load(dir, tiny(pairs));
    EXPECT_EQ(tok->vocab_size(), 265);
    // GPT-2's pattern keeps "1234" one piece: 1 2 -> 12, 12 3 -> 123, 123 4 -> 1234.
    EXPECT_EQ(tok->encode("1234"), (Ids{258}));
    EXPECT_EQ(tok->encode("hel hlo"), (Ids{260, ' ', 'h', 'l', 'o'}));
    EXPECT_EQ(tok->decode({260, 258, 262}), "hel1234<|end|>");
  }
}

TEST(HfTokenizer, IgnoreMergesTakesWholePiecesFromTheVocab) {
  test::TempDir dir;
  write(dir, "tokenizer_config.json", R"({"eos_token": "<|end|>"})");
  json t = tiny(false);
  t["model"]["ignore_merges"] = true;
  // "hlo" is a vocabulary token no merge forms; as a whole piece it is taken as is.
  EXPECT_EQ(load(dir, t)->encode("hlo hlo"), (Ids{261, ' ', 'h', 'l', 'o'}));
}

TEST(HfTokenizer, SplitPatternsOfLlama3AndQwen2) {
  test::TempDir dir;
  write(dir, "tokenizer_config.json", R"({"eos_token": "<|end|>"})");
  json t = tiny(false);
  t["pre_tokenizer"] = split_pre_tokenizer(kLlama3Regex);
  const auto llama = load(dir, t);
  // Digits in groups of three: "123" "4".
  EXPECT_EQ(llama->encode("1234"), (Ids{257, '4'}));
  // A letter run takes one leading non-letter (here "'"), contractions any case, "\s*[\r\n]+".
  EXPECT_EQ(llama->encode("x'HE"), (Ids{'x', '\'', 'H', 'E'}));
  EXPECT_EQ(llama->encode("he \n\nhe"), (Ids{259, ' ', '\n', '\n', 259}));
  t["pre_tokenizer"] = split_pre_tokenizer(kQwen2Regex);
  EXPECT_EQ(load(dir, t)->encode("1234"), (Ids{'1', '2', '3', '4'}));
  t["pre_tokenizer"] = split_pre_tokenizer("\\p{N}+");
  expect_input_error([&] { load(dir, t); }, {"tokenizer.json", "Split regex", "is not one trident implements"});
}

TEST(HfTokenizer, NfcNormalizerComposes) {
  test::TempDir dir;
  write(dir, "tokenizer_config.json", R"({"eos_token": "<|end|>"})");
  json t = tiny(false);
  const std::string decomposed = "e\xcc\x81", composed = "\xc3\xa9";   // e + U+0301, U+00E9
  EXPECT_EQ(load(dir, t)->encode(decomposed), (Ids{'e', 0xCC, 0x81}));
  t["normalizer"] = {{"type", "NFC"}};
  const auto tok = load(dir, t);
  EXPECT_EQ(tok->encode(decomposed), (Ids{0xC3, 0xA9}));
  EXPECT_EQ(tok->encode(composed), (Ids{0xC3, 0xA9}));
  // Marks are reordered by combining class (dot below before circumflex), Hangul jamo compose,
  // and invalid UTF-8 passes through.
  EXPECT_EQ(tok->decode(tok->encode("a\xcc\x82\xcc\xa3")), "\xe1\xba\xad");
  EXPECT_EQ(tok->decode(tok->encode("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8")), "\xea\xb0\x81");
  EXPECT_EQ(tok->decode(tok->encode("\xff" + decomposed + "\x80")), "\xff" + composed + "\x80");
  t["normalizer"] = {{"type", "NFKC"}};
  expect_input_error([&] { load(dir, t); }, {"tokenizer.json", "normalizer NFKC is not supported"});
}

TEST(HfTokenizer, AddedTokensAreCutOutFirstLongestMatch) {
  test::TempDir dir;
  write(dir, "tokenizer_config.json", R"({"eos_token": "<|end|>"})");
  const auto tok = load(dir, tiny(false));
  EXPECT_EQ(tok->encode("he<|end|>he"), (Ids{259, 262, 259}));
  EXPECT_EQ(tok->encode("<|end|>!<|end|>"), (Ids{263, 262}));
  EXPECT_EQ(tok->encode("<|en<|end|>"), (Ids{'<', '|', 'e', 'n', 262}));
  // Any byte string round-trips when there is no normalizer.
  for (const std::string s : {"a<|end|>!b\xff\xc3", "<|bos|>x", " \t\n  he  ", "\xe2\x82 caf\xc3\xa9"})
    EXPECT_EQ(tok->decode(tok->encode(s)), s);
  expect_input_error([&] { tok->decode({265}); }, {"token id 265"});
}

TEST(HfTokenizer, BosAndEosFromPostProcessorAndConfig) {
  test::TempDir dir;
  json t = tiny(false);
  t["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({{{"SpecialToken", {{"id", "<|bos|>"}, {"type_id", 0}}}},
                                                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                         {"special_tokens", {{"<|bos|>", {{"id", "<|bos|>"}, {"ids", {264}}, {"tokens", {"<|bos|>"}}}}}}};
  // No tokenizer_config.json: no end-of-text token to be found.
  expect_input_error([&] { load(dir, t); }, {"tokenizer.json", "no end-of-text token", "eos_token"});
  write(dir, "tokenizer_config.json", R"({"eos_token": {"content": "<|end|>"}})");
  auto tok = load(dir, t);
  EXPECT_EQ(tok->bos_id(), 264);
  EXPECT_EQ(tok->eot_id(), 262);
  EXPECT_EQ(tok->encode("he"), (Ids{259})) << "encode() adds neither; the caller does";
  // The directory works as well as the file, and add_bos_token in the config decides.
  write(dir, "tokenizer_config.json", R"({"eos_token": "<|end|>!", "add_bos_token": false})");
  tok = make_tokenizer(dir.path().string(), "", "");
  EXPECT_EQ(tok->bos_id(), -1);
  EXPECT_EQ(tok->eot_id(), 263);
  write(dir, "tokenizer_config.json", R"({"eos_token": "<|end|>", "add_bos_token": true, "bos_token": "he"})");
  EXPECT_EQ(make_tokenizer(dir.path().string(), "", "")->bos_id(), 259);
  write(dir, "tokenizer_config.json", R"({"eos_token": "<|nope|>"})");
  expect_input_error([&] { load(dir, t); }, {"tokenizer_config.json", "eos_token '<|nope|>' is not a token"});
}

TEST(HfTokenizer, BadFilesNameTheFileAndWhatIsWrong) {
  test::TempDir dir;
  write(dir, "tokenizer_config.json", R"({"eos_token": "<|end|>"})");
  expect_input_error([&] { make_tokenizer(write(dir, "tokenizer.json", "{"), "", ""); },
                     {"tokenizer.json", "not valid JSON"});
  expect_input_error([&] { make_tokenizer(write(dir, "tokenizer.json", "{}"), "", ""); },
                     {"tokenizer.json", "not a tokenizer.json"});
  json t = tiny(false);
  t["model"]["type"] = "WordPiece";
  expect_input_error([&] { load(dir, t); }, {"tokenizer.json", "model type 'WordPiece' is not supported"});
  t = tiny(false);
  t["model"]["merges"].push_back("h l");   // "hl" is not in the vocabulary
  expect_input_error([&] { load(dir, t); }, {"tokenizer.json: merge 5", "not in the vocabulary"});
  t = tiny(false);
  t["model"]["merges"].push_back("hl");
  expect_input_error([&] { load(dir, t); }, {"tokenizer.json: merge 5", "not two tokens"});
  t = tiny(false);
  t["model"]["merges"].push_back(json::array({"h"}));
  expect_input_error([&] { load(dir, t); }, {"tokenizer.json: merge 5", "neither"});
  t = tiny(false);
  t["added_tokens"][0]["lstrip"] = true;
  expect_input_error([&] { load(dir, t); }, {"tokenizer.json", "lstrip"});
  t = tiny(false);
  t["model"]["vocab"].erase(byte_char('z'));
  expect_input_error([&] { load(dir, t); }, {"tokenizer.json", "no token for byte 122"});
  t = tiny(false);
  t["decoder"] = {{"type", "WordPiece"}};
  expect_input_error([&] { load(dir, t); }, {"tokenizer.json", "decoder must be ByteLevel"});
  expect_input_error([&] { make_tokenizer((dir / "missing"), "", ""); }, {"unknown tokenizer", "tokenizer.json"});
  std::filesystem::create_directories(dir / "empty");
  expect_input_error([&] { make_tokenizer((dir / "empty"), "", ""); }, {"empty/tokenizer.json", "cannot open"});
  expect_input_error([&] { make_tokenizer(dir.path().string(), "vocab.json", ""); }, {"takes no vocab"});
}

}  // namespace
}  // namespace trident
