// Fine-tuning data: chat templates (exact ids and masks with the byte tokenizer and a hand-written
// tokenizer.json holding Llama 3's special tokens; generation prompts), bad records, the token/mask
// dataset pair and its checks, whole-record SFT samples, and tokenize's over-long handling.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "../../src/apps/tokenize_records.hpp"
#include "byte_level_vocab.hpp"
#include "expect_input_error.hpp"
#include "temp_dir.hpp"
#include "trident/io/chat_template.hpp"
#include "trident/io/masked_dataset.hpp"
#include "trident/io/sft_source.hpp"

namespace trident {
namespace {

using nlohmann::json;
using test::expect_input_error;
using test::byte_char;
using test::TempDir;
using Ids = std::vector<int32_t>;

// The byte ids of text, each with the same mask value.
void append(MaskedTokens& out, const std::string& text, int trained) {
  for (unsigned char c : text) {
    out.tokens.push_back(c);
    out.mask.push_back(trained);
  }
}
void append(MaskedTokens& out, int32_t id, int trained) {
  out.tokens.push_back(id);
  out.mask.push_back(trained);
}

const std::vector<ChatMessage> kChat = {{"system", "Be brief."}, {"user", "2+3?"}, {"assistant", "5"},
                                         {"user", "and 2+4?"}, {"assistant", " 6 "}};

TEST(ChatTemplate, PlainWithTheByteTokenizer) {
  const std::unique_ptr<Tokenizer> tok = make_tokenizer("byte", "", "");
  MaskedTokens want;
  append(want, "System: Be brief.\nUser: 2+3?\nAssistant: ", 0);
  append(want, "5", 1);
  append(want, 256, 1);   // <|endoftext|> ends the answer and is trained: the model learns to stop
  append(want, "User: and 2+4?\nAssistant: ", 0);
  append(want, " 6 ", 1);
  append(want, 256, 1);
  const MaskedTokens got = ChatTemplate("plain", *tok).render(kChat);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.mask, want.mask);
}

TEST(ChatTemplate, TheByteTokenizerHasNoSpecialTokens) {
  const std::unique_ptr<Tokenizer> tok = make_tokenizer("byte", "", "");
  expect_input_error([&] { ChatTemplate("llama3", *tok); }, {"--chat-template llama3", "<|begin_of_text|>", "byte"});
  expect_input_error([&] { ChatTemplate("chatml", *tok); }, {"--chat-template chatml", "<|im_start|>"});
  expect_input_error([&] { ChatTemplate("tokenizer_config.json", *tok); },
                     {"--chat-template tokenizer_config.json", "use llama3, chatml, plain, hf", "hf:PATH"});
}

// A byte-level tokenizer.json without merges (ids 0..255 are the bytes) and Llama 3's special
// tokens as added tokens 256..260 (or ChatML's 256, 257 with chatml).
std::unique_ptr<Tokenizer> special_tokenizer(const TempDir& dir, bool chatml) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  const std::vector<std::string> names =
      chatml ? std::vector<std::string>{"<|im_start|>", "<|im_end|>", "<|endoftext|>"}
             : std::vector<std::string>{"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                                        "<|end_header_id|>", "<|eot_id|>"};
  json added = json::array();
  for (size_t i = 0; i < names.size(); ++i) added.push_back({{"id", 256 + i}, {"content", names[i]}, {"special", true}});
  const json t = {{"version", "1.0"},
                  {"added_tokens", added},
                  {"normalizer", nullptr},
                  {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
                  {"post_processor", {{"type", "ByteLevel"}}},
                  {"decoder", {{"type", "ByteLevel"}}},
                  {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
  std::ofstream(dir / "tokenizer.json") << t.dump();
  std::ofstream(dir / "tokenizer_config.json")
      << (chatml ? R"({"eos_token": "<|endoftext|>"})"
                 : R"({"eos_token": "<|end_of_text|>", "bos_token": "<|begin_of_text|>", "add_bos_token": true})");
  return make_tokenizer(dir / "tokenizer.json", "", "");
}

TEST(ChatTemplate, Llama3WithItsSpecialTokens) {
  TempDir dir;
  const std::unique_ptr<Tokenizer> tok = special_tokenizer(dir, false);
  constexpr int32_t kBegin = 256, kHeader = 258, kHeaderEnd = 259, kEot = 260;
  MaskedTokens want;
  append(want, kBegin, 0);
  for (const auto& [role, content] : std::vector<std::pair<std::string, std::string>>{
           {"system", "Be brief."}, {"user", "2+3?"}, {"assistant", "5"}, {"user", "and 2+4?"}, {"assistant", "6"}}) {
    const int trained = role == "assistant";
    append(want, kHeader, 0);
    append(want, role, 0);
    append(want, kHeaderEnd, 0);
    append(want, "\n\n", 0);
    append(want, content, trained);   // " 6 " trimmed, as Llama 3's template does
    append(want, kEot, trained);
  }
  const MaskedTokens got = ChatTemplate("llama3", *tok).render(kChat);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.mask, want.mask);
  expect_input_error([&] { ChatTemplate("chatml", *tok); }, {"--chat-template chatml", "<|im_start|>"});
}

TEST(ChatTemplate, ChatMlWithItsSpecialTokens) {
  TempDir dir;
  const std::unique_ptr<Tokenizer> tok = special_tokenizer(dir, true);
  constexpr int32_t kStart = 256, kEnd = 257;
  MaskedTokens want;
  append(want, kStart, 0);
  append(want, "user\n", 0);
  append(want, "hi", 0);
  append(want, kEnd, 0);
  append(want, "\n", 0);
  append(want, kStart, 0);
  append(want, "assistant\n", 0);
  append(want, "yo", 1);
  append(want, kEnd, 1);
  append(want, "\n", 0);
  const MaskedTokens got = ChatTemplate("chatml", *tok).render({{"user", "hi"}, {"assistant", "yo"}});
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.mask, want.mask);
  expect_input_error([&] { ChatTemplate("llama3", *tok); }, {"<|begin_of_text|>"});
}

// A ChatTemplate of `jinja` as the chat_template of a tokenizer_config.json in dir.
ChatTemplate hf_template(const TempDir& dir, const std::string& jinja, const Tokenizer& tok) {
  const std::string config = dir / "hf_config.json";
  std::ofstream(config) << json{{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}, {"chat_template", jinja}}.dump();
  return ChatTemplate("hf:" + config, tok);
}

// Llama 3's own template (tests/fixtures/chat_templates/llama3.jinja) gives the built-in llama3's ids
// and mask: the assistant's trimmed content and its <|eot_id|> train, nothing else.
TEST(ChatTemplate, HuggingFaceTemplateMasksTheAssistantsContentAndEndOfTurn) {
  TempDir dir;
  const std::unique_ptr<Tokenizer> tok = special_tokenizer(dir, false);
  const ChatTemplate hf = hf_template(
      dir,
      "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
      "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
      "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}",
      *tok);
  const MaskedTokens got = hf.render(kChat), want = ChatTemplate("llama3", *tok).render(kChat);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.mask, want.mask);
  EXPECT_EQ(tok->decode(got.tokens).substr(0, 17), "<|begin_of_text|>");
}

// A template whose turns end in text rather than an added token, or that writes a content twice or
// changes it, is refused rather than given a wrong mask.
TEST(ChatTemplate, HuggingFaceTemplatesTheMaskCannotFollowAreRefused) {
  TempDir dir;
  const std::unique_ptr<Tokenizer> tok = special_tokenizer(dir, false);
  const std::vector<ChatMessage> chat = {{"user", "hi"}, {"assistant", "yo"}};
  expect_input_error([&] { hf_template(dir, "{% for m in messages %}{{ m.content }}\n{% endfor %}", *tok).render(chat); },
                     {"--chat-template hf:", "end-of-turn token"});
  expect_input_error(
      [&] { hf_template(dir, "{% for m in messages %}{{ m.content }}{{ m.content }}<|eot_id|>{% endfor %}", *tok).render(chat); },
      {"does not write message 0's content exactly once"});
  expect_input_error(
      [&] { hf_template(dir, "{% for m in messages %}{{ m.content | upper }}<|eot_id|>{% endfor %}", *tok).render(chat); },
      {"changes message 0's content beyond trimming"});
  const MaskedTokens ok = hf_template(dir, "{% for m in messages %}{{ m.content }}<|eot_id|>{% endfor %}", *tok).render(chat);
  EXPECT_EQ(ok.tokens, (Ids{'h', 'i', 260, 'y', 'o', 260}));
  EXPECT_EQ(ok.mask, (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));
}

std::string bad_kind(const std::string& line, bool preference = false) {
  try {
    if (preference) preference_conversations(json::parse(line));
    else chat_messages(json::parse(line));
  } catch (const BadRecord& e) {
    return e.kind();
  }
  return "";
}

TEST(ChatRecords, GoodAndBadRecords) {
  EXPECT_EQ(bad_kind(R"({"prompt": "q", "response": "a"})"), "");
  const std::vector<ChatMessage> m = chat_messages(json::parse(R"({"prompt": "q", "response": "a"})"));
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].role, "user");
  EXPECT_EQ(m[1].content, "a");
  EXPECT_EQ(bad_kind(R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]})"), "");
  EXPECT_EQ(bad_kind(R"({"prompt": "q"})"), "missing field");
  EXPECT_EQ(bad_kind(R"({"text": "q"})"), "missing field");
  EXPECT_EQ(bad_kind(R"([1, 2])"), "missing field");
  EXPECT_EQ(bad_kind(R"({"messages": [{"role": "user"}]})"), "missing field");
  EXPECT_EQ(bad_kind(R"({"messages": [{"role": "user", "content": 3}]})"), "missing field");
  EXPECT_EQ(bad_kind(R"({"messages": [{"role": "bot", "content": "q"}]})"), "wrong roles");
  EXPECT_EQ(bad_kind(R"({"messages": [{"role": "assistant", "content": "a"}]})"), "wrong roles");
  EXPECT_EQ(bad_kind(R"({"messages": [{"role": "user", "content": "q"}]})"), "wrong roles");
  EXPECT_EQ(bad_kind(R"({"messages": [{"role": "system", "content": "s"}]})"), "wrong roles");
  EXPECT_EQ(bad_kind(R"({"messages": [{"role": "user", "content": "q"}, {"role": "user", "content": "q"}]})"),
            "wrong roles");
  EXPECT_EQ(bad_kind(R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": " \n"}]})"),
            "empty assistant turn");
  EXPECT_EQ(bad_kind(R"({"prompt": "q", "chosen": "a", "rejected": "b"})", true), "");
  EXPECT_EQ(bad_kind(R"({"prompt": "q", "chosen": "a"})", true), "missing field");
  EXPECT_EQ(bad_kind(R"({"prompt": "q", "chosen": "a", "rejected": ""})", true), "empty assistant turn");
}

// A generation prompt is the training rendering of the same conversation up to the assistant's
// content, and the end-of-turn token is the one that closes the trained answer, for every template.
TEST(ChatTemplate, RenderPromptIsTheTrainingPrefix) {
  TempDir dir_llama3, dir_chatml;
  const std::unique_ptr<Tokenizer> byte = make_tokenizer("byte", "", "");
  const std::unique_ptr<Tokenizer> llama3 = special_tokenizer(dir_llama3, false);
  const std::unique_ptr<Tokenizer> chatml = special_tokenizer(dir_chatml, true);
  const std::vector<ChatMessage> question = {{"system", "Be brief."}, {"user", "2+3?"}};
  std::vector<ChatMessage> answered = question;
  answered.push_back({"assistant", "5"});
  for (const auto& [name, tok, eot] : std::vector<std::tuple<std::string, const Tokenizer*, int32_t>>{
           {"plain", byte.get(), 256}, {"llama3", llama3.get(), 260}, {"chatml", chatml.get(), 257}}) {
    SCOPED_TRACE(name);
    const ChatTemplate tmpl(name, *tok);
    const auto [prompt, end_of_turn] = tmpl.render_prompt(question);
    const MaskedTokens full = tmpl.render(answered);
    ASSERT_LE(prompt.size() + 2, full.tokens.size());
    EXPECT_EQ(Ids(full.tokens.begin(), full.tokens.begin() + prompt.size()), prompt);
    // Then come the answer and the end of turn, the first trained tokens.
    EXPECT_EQ(full.tokens[prompt.size()], '5');
    EXPECT_EQ(full.tokens[prompt.size() + 1], eot);
    EXPECT_EQ(end_of_turn, eot);
    EXPECT_EQ(std::count(full.mask.begin(), full.mask.begin() + prompt.size(), 1), 0);
    EXPECT_EQ(full.mask[prompt.size()], 1);
  }
  MaskedTokens want;
  append(want, "System: Be brief.\nUser: 2+3?\nAssistant: ", 0);
  EXPECT_EQ(ChatTemplate("plain", *byte).render_prompt(question).tokens, want.tokens);
}

TEST(MaskedDataset, RoundTripAndAgreementChecks) {
  TempDir dir;
  {
    MaskedDatasetWriter w(dir / "chat", 300);
    w.add_sequence({{1, 2, 3, 4}, {0, 0, 1, 1}});
    w.end_document();
    w.add_sequence({{5, 6}, {0, 1}});
    w.end_document();
    w.finish();
  }
  const MaskedDataset ds(dir / "chat", 1);
  ASSERT_EQ(ds.num_records(), 2u);
  const MaskedTokens r = ds.read(1, 0, 100);
  EXPECT_EQ(r.tokens, (Ids{5, 6}));
  EXPECT_EQ(r.mask, (Ids{0, 1}));
  EXPECT_EQ(ds.read(0, 0, 3).mask, (Ids{0, 0, 1}));
  expect_input_error([&] { MaskedDataset(dir / "chat", 2); }, {"chat.idx", "document 0 holds 1 sequences",
                                                                 "expected 2"});
  // A mask of other records: same count, other sizes.
  {
    IndexedDatasetWriter m(dir / "other_mask", 2, true);
    m.add_document({0, 1});
    m.add_document({0, 0, 1, 1});
    m.finish();
  }
  std::filesystem::copy_file(dir / "other_mask.idx", dir / "chat_mask.idx",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(dir / "other_mask.bin", dir / "chat_mask.bin",
                             std::filesystem::copy_options::overwrite_existing);
  expect_input_error([&] { MaskedDataset(dir / "chat", 1); }, {"chat_mask.idx", "sequence 0 has 2 mask values for 4",
                                                                 "Re-run trident tokenize"});
  // Pre-training data: no mask beside it.
  {
    IndexedDatasetWriter t(dir / "plain", 300);
    t.add_document({1, 2});
    t.finish();
  }
  expect_input_error([&] { MaskedDataset(dir / "plain", 1); }, {"plain_mask.idx", "loss mask", "--format chat"});
  // A token dataset in place of a mask.
  std::filesystem::copy_file(dir / "plain.idx", dir / "plain_mask.idx");
  std::filesystem::copy_file(dir / "plain.bin", dir / "plain_mask.bin");
  expect_input_error([&] { MaskedDataset(dir / "plain", 1); }, {"plain_mask.idx", "not uint8"});
}

TEST(SftSource, WholeRecordsPaddedOrCutWithShiftedMask) {
  TempDir dir;
  {
    MaskedDatasetWriter w(dir / "chat", 300);
    w.add_sequence({{1, 2, 3, 4}, {0, 0, 1, 1}});   // shorter than T + 1 = 6: padded
    w.end_document();
    w.add_sequence({{10, 11, 12, 13, 14, 15, 16, 17}, {0, 1, 0, 1, 1, 1, 1, 1}});   // longer: cut
    w.end_document();
    w.finish();
  }
  auto ds = std::make_shared<const MaskedDataset>(dir / "chat", 1);
  SftSource src(ds, 0, 2, 5, 300, 7, false);
  EXPECT_EQ(src.cut_records(), 1u);
  // Each epoch visits both records once.
  Ids tokens(4 * 6);
  std::vector<uint8_t> mask(4 * 5);
  src.samples(0, 4, tokens.data());
  src.target_mask(0, 4, mask.data());
  int short_seen = 0;
  for (int k = 0; k < 4; ++k) {
    const Ids row(tokens.begin() + 6 * k, tokens.begin() + 6 * k + 6);
    const std::vector<uint8_t> m(mask.begin() + 5 * k, mask.begin() + 5 * k + 5);
    if (row[0] == 1) {
      ++short_seen;
      EXPECT_EQ(row, (Ids{1, 2, 3, 4, 0, 0}));
      EXPECT_EQ(m, (std::vector<uint8_t>{0, 1, 1, 0, 0}));   // targets 2, 3, 4 then padding
    } else {
      EXPECT_EQ(row, (Ids{10, 11, 12, 13, 14, 15}));
      EXPECT_EQ(m, (std::vector<uint8_t>{1, 0, 1, 1, 1}));
    }
  }
  EXPECT_EQ(short_seen, 2);
  SftSource small_vocab(ds, 0, 2, 5, 12, 7, false);
  expect_input_error([&] { small_vocab.samples(0, 2, tokens.data()); }, {"chat.bin", "token id", "model.vocab_size = 12"});
}

// Packed samples (data.pack): records fill each sample greedily in visiting order, each with its
// own document start and shifted mask; the target across a record's end is untrained; a record
// longer than a sample is cut, alone; fewer, fuller samples than one record each.
TEST(SftSource, PackedRecordsFillSamplesGreedily) {
  TempDir dir;
  const std::vector<MaskedTokens> records = {{{1, 2, 3}, {0, 1, 1}},
                                             {{4, 5}, {1, 1}},
                                             {{6, 7, 8, 9}, {0, 0, 1, 1}},
                                             {{10, 11, 12, 13, 14, 15, 16, 17}, {0, 1, 1, 1, 1, 1, 1, 1}},
                                             {{18}, {1}}};
  {
    MaskedDatasetWriter w(dir / "chat", 300);
    for (const MaskedTokens& r : records) {
      w.add_sequence(r);
      w.end_document();
    }
    w.finish();
  }
  auto ds = std::make_shared<const MaskedDataset>(dir / "chat", 1);
  const int T = 5;   // samples of 6 tokens
  SftSource packed(ds, 0, 5, T, 300, 7, true), unpacked(ds, 0, 5, T, 300, 7, false);
  EXPECT_TRUE(packed.packs_documents());
  EXPECT_FALSE(unpacked.packs_documents());
  EXPECT_EQ(unpacked.epoch_samples(), 5u);
  EXPECT_LT(packed.epoch_samples(), 5u);
  // 3 + 2 + 4 + 6 (cut) + 1 = 16 record tokens in 6-token samples.
  EXPECT_NEAR(unpacked.fill(), 16.0 / 30, 1e-12);
  EXPECT_NEAR(packed.fill(), 16.0 / (6.0 * packed.epoch_samples()), 1e-12);
  EXPECT_GT(packed.fill(), unpacked.fill());

  // Two epochs of packed samples hold every record once per epoch, laid out as the greedy rule says.
  const int64_t n = static_cast<int64_t>(packed.epoch_samples());
  for (int64_t s = 0; s < 2 * n + 1; ++s) {
    SCOPED_TRACE(s);
    Ids tokens(T + 1);
    std::vector<uint8_t> mask(T);
    std::vector<int32_t> docs(T);
    packed.samples(s, 1, tokens.data());
    packed.target_mask(s, 1, mask.data());
    packed.doc_starts(s, 1, docs.data());
    // Rebuild the sample from its documents: each one a whole record (or the cut long one).
    for (int t = 0; t < T;) {
      const int start = docs[t];
      ASSERT_EQ(start, t);
      int end = t;
      while (end < T && docs[end] == start) ++end;
      const auto r = std::find_if(records.begin(), records.end(), [&](const MaskedTokens& m) { return m.tokens[0] == tokens[start]; });
      if (r == records.end()) {   // padding: token 0, untrained, a document to the end
        EXPECT_EQ(end, T);
        for (int u = start; u <= T; ++u) EXPECT_EQ(tokens[u], 0);
        for (int u = start; u < T; ++u) EXPECT_EQ(mask[u], 0);
        break;
      }
      const int len = std::min<int>(static_cast<int>(r->tokens.size()), T + 1);
      EXPECT_TRUE(end == start + len || (end == T && start + len == T + 1)) << "document " << start << ".." << end;
      for (int u = 0; u < len; ++u) EXPECT_EQ(tokens[start + u], r->tokens[u]);
      for (int u = 0; u + 1 < len; ++u) EXPECT_EQ(mask[start + u], r->mask[u + 1]);
      if (start + len - 1 < T) EXPECT_EQ(mask[start + len - 1], 0);   // the target across the record's end
      t = end;
    }
  }
  // A fresh source (a resumed run) reads a later epoch's sample without the earlier ones.
  SftSource resumed(ds, 0, 5, T, 300, 7, true);
  Ids a(T + 1), b(T + 1);
  resumed.samples(2 * n - 1, 1, a.data());
  packed.samples(2 * n - 1, 1, b.data());
  EXPECT_EQ(a, b);
}

TEST(TokenizeRecords, OverLongRecordsDroppedOrTruncated) {
  TempDir dir;
  std::ofstream(dir / "in.jsonl") << R"({"prompt": "short", "response": "ok"})" << "\n"
                                  << R"({"prompt": "a much longer question", "response": "answer"})" << "\n"
                                  << R"({"prompt": "a question longer than the limit of forty tokens", "response": "x"})"
                                  << "\n" << R"({"prompt": "q", "response": "a long answer of sixty bytes, which is cut at fifty"})"
                                  << "\n" << R"({"prompt": "no answer"})" << "\n";
  const std::unique_ptr<Tokenizer> tok = make_tokenizer("byte", "", "");
  // Records of 26, 47, 68 and 73 tokens under --max-len 50.
  RecordOptions o{"chat", "plain", dir / "drop", 50, false};
  tokenize_records(o, {dir / "in.jsonl"}, *tok);
  EXPECT_EQ(MaskedDataset(dir / "drop", 1).num_records(), 2u);
  o.output = dir / "cut";
  o.truncate = true;
  tokenize_records(o, {dir / "in.jsonl"}, *tok);
  // The third record cut at 50 tokens keeps no assistant token: dropped all the same; the fourth
  // keeps the first 31 bytes of its answer.
  const MaskedDataset cut(dir / "cut", 1);
  ASSERT_EQ(cut.num_records(), 3u);
  const MaskedTokens last = cut.read(2, 0, 100);
  EXPECT_EQ(last.tokens.size(), 50u);
  EXPECT_EQ(std::count(last.mask.begin(), last.mask.end(), 1), 31);
  o.output = dir / "pairs";
  o.format = "preference";
  o.max_len = 0;
  std::ofstream(dir / "pref.jsonl") << R"({"prompt": "q", "chosen": "good", "rejected": "bad"})" << "\n";
  tokenize_records(o, {dir / "pref.jsonl"}, *tok);
  const MaskedDataset pairs(dir / "pairs", 2);
  ASSERT_EQ(pairs.num_records(), 1u);
  const MaskedTokens chosen = pairs.read(0, 0, 100), rejected = pairs.read(0, 1, 100);
  EXPECT_EQ(tok->decode(Ids(chosen.tokens.begin(), chosen.tokens.end() - 1)), "User: q\nAssistant: good");
  EXPECT_EQ(tok->decode(Ids(rejected.tokens.begin(), rejected.tokens.end() - 1)), "User: q\nAssistant: bad");
  EXPECT_EQ(std::count(rejected.mask.begin(), rejected.mask.end(), 1), 4);   // "bad" and <|endoftext|>
  o.output = dir / "none";
  std::ofstream(dir / "bad.jsonl") << R"({"prompt": "q"})" << "\n";
  expect_input_error([&] { tokenize_records(o, {dir / "bad.jsonl"}, *tok); }, {"no usable preference record",
                                                                                "1 missing field"});
  EXPECT_FALSE(std::filesystem::exists(dir / "none.bin"));
}

}  // namespace
}  // namespace trident
