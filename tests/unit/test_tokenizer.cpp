// Tokenizers: the byte tokenizer, and GPT-2's BPE on a tiny fixture whose ids follow by hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <thread>

#include "trident/core/error.hpp"
#include "trident/io/tokenizer.hpp"

namespace trident {
namespace {

using Ids = std::vector<int32_t>;

// tests/fixtures/gpt2_tiny: vocab.json gives each byte's GPT-2 character the byte's value as
// its id (so 'h' = 104, ' ' = 32), then the merge results in merge order: he 256, ll 257,
// hell 258, hello 259, Ġw 260, or 261, Ġwor 262, ld 263, Ġworld 264, ĠĠ 265, o1 266, 's 267;
// <|endoftext|> is 268. (Ġ is how GPT-2's files spell the space byte.)
const std::filesystem::path kFixture = std::filesystem::path(__FILE__).parent_path() / "../fixtures/gpt2_tiny";

std::unique_ptr<Tokenizer> tiny_gpt2() {
  return make_tokenizer("gpt2", (kFixture / "vocab.json").string(), (kFixture / "merges.txt").string());
}

void expect_input_error(const std::function<void()>& fn, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "expected InputError mentioning " << part;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(ByteTokenizer, EncodesBytesAndRoundTrips) {
  const auto tok = make_tokenizer("byte", "", "");
  EXPECT_EQ(tok->name(), "byte");
  EXPECT_EQ(tok->vocab_size(), 257);
  EXPECT_EQ(tok->eot_id(), 256);
  EXPECT_EQ(tok->encode("hi\xff\n"), (Ids{104, 105, 255, 10}));
  const std::string text = "caf\xc3\xa9 \x80 <|endoftext|>";
  EXPECT_EQ(tok->encode(text).size(), text.size()) << "the literal marker is plain text";
  EXPECT_EQ(tok->decode(tok->encode(text)), text);
  EXPECT_EQ(tok->decode({104, 256}), "h<|endoftext|>");
  expect_input_error([&] { tok->decode({257}); }, "257");
}

TEST(Gpt2Tokenizer, TinyFixtureIdsByHand) {
  const auto tok = tiny_gpt2();
  EXPECT_EQ(tok->name(), "gpt2");
  EXPECT_EQ(tok->vocab_size(), 269);
  EXPECT_EQ(tok->eot_id(), 268);
  // h e l l o: he (rank 0), ll (1), hell (2), hello (3); " world" merges inside its own piece.
  EXPECT_EQ(tok->encode("hello world"), (Ids{259, 264}));
  // Two spaces: the first stands alone (\s+(?!\S)), the second leads " world".
  EXPECT_EQ(tok->encode("hello  world"), (Ids{259, 32, 264}));
  // Three spaces between words: "  " then " b"; at the end all three form one piece, and the
  // pair ĠĠ merges left to right.
  EXPECT_EQ(tok->encode("a   b"), (Ids{97, 265, 32, 98}));
  EXPECT_EQ(tok->encode("a   "), (Ids{97, 265, 32}));
  EXPECT_EQ(tok->encode("lll"), (Ids{257, 108}));
  EXPECT_EQ(tok->encode("llll"), (Ids{257, 257}));
  // Case matters: no merge starts with H.
  EXPECT_EQ(tok->encode("Hello"), (Ids{72, 101, 257, 111}));
  // Letters and digits are separate pieces, so the merge "o 1" cannot apply across them.
  EXPECT_EQ(tok->encode("o1"), (Ids{111, 49}));
  EXPECT_EQ(tok->encode("hello1"), (Ids{259, 49}));
  // 's is a contraction piece; 'S is not (the pattern is case-sensitive).
  EXPECT_EQ(tok->encode("it's"), (Ids{105, 116, 267}));
  EXPECT_EQ(tok->encode("IT'S"), (Ids{73, 84, 39, 83}));
  // Bytes, not characters: é is two ids; a stray byte is one.
  EXPECT_EQ(tok->encode("\xc3\xa9"), (Ids{0xC3, 0xA9}));
  EXPECT_EQ(tok->encode("\xff"), (Ids{255}));
  EXPECT_EQ(tok->encode(""), Ids{});
}

TEST(Gpt2Tokenizer, EndOfTextLiteralIsPlainText) {
  // As in GPT-2's reference encoders: only a caller (--append-eot) inserts the eot id.
  const auto tok = tiny_gpt2();
  const std::string marker = "<|endoftext|>";
  const Ids ids = tok->encode(marker);
  EXPECT_EQ(ids, Ids(marker.begin(), marker.end()));
  EXPECT_EQ(tok->decode({268}), marker);
}

TEST(Gpt2Tokenizer, RoundTripsAnyBytes) {
  const auto tok = tiny_gpt2();
  for (const std::string text : {"hello world", "  \t\n\n x  ", "it's IT'S 'll", "\xff\xfe\xc3(\xed\xa0\x80",
                                  "caf\xc3\xa9 na\xc3\xafve \xf0\x9f\x91\x8d", "o1o1o1 hellohello"})
    EXPECT_EQ(tok->decode(tok->encode(text)), text);
  expect_input_error([&] { tok->decode({269}); }, "269");
}

TEST(Gpt2Tokenizer, EncodeIsThreadSafe) {
  const auto tok = tiny_gpt2();
  const std::string text = "hello world, hello  world; it's lll o1 \xc3\xa9 a   b";
  const Ids expected = tok->encode(text);
  std::vector<Ids> got(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) got[t] = tok->encode(text);
    });
  for (std::thread& t : threads) t.join();
  for (const Ids& ids : got) EXPECT_EQ(ids, expected);
}

TEST(MakeTokenizer, RejectsBadRequests) {
  const std::string vocab = (kFixture / "vocab.json").string(), merges = (kFixture / "merges.txt").string();
  expect_input_error([] { make_tokenizer("sentencepiece", "", ""); }, "unknown tokenizer 'sentencepiece'");
  expect_input_error([] { make_tokenizer("gpt2", "", ""); }, "fetch_gpt2_tokenizer.sh");
  expect_input_error([&] { make_tokenizer("byte", vocab, ""); }, "no vocab");
  expect_input_error([&] { make_tokenizer("gpt2", "/nonexistent/vocab.json", merges); }, "/nonexistent/vocab.json");
  expect_input_error([&] { make_tokenizer("gpt2", merges, merges); }, "not valid JSON");
  // vocab.json read as a merges file: its first line "{" is not a merge.
  expect_input_error([&] { make_tokenizer("gpt2", vocab, vocab); }, "vocab.json:1: expected two tokens");
}

}  // namespace
}  // namespace trident
