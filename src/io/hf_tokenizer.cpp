// tokenizer.json loading (model, added tokens, normalizer, pre-tokenizer, post-processor,
// decoder) and encoding: added tokens, then NFC, the split pattern and byte-level BPE.
#include "hf_tokenizer.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpt2_pretokenize.hpp"
#include "json_file.hpp"
#include "nfc.hpp"
#include "trident/core/error.hpp"

namespace trident {
namespace {

using nlohmann::json;


// The "type" of a tokenizer.json component, or "" when it is null.
std::string type_of(const json& component, const std::string& where) {
  if (component.is_null()) return "";
  if (!component.is_object() || !component.contains("type") || !component["type"].is_string())
    throw InputError(str(where, ": expected an object with a \"type\""));
  return component["type"].get<std::string>();
}

bool flag(const json& object, const char* key, bool fallback) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? fallback : it->get<bool>();
}

// The special tokens a TemplateProcessing "single" template puts before and after the text.
void read_template(const json& processor, std::vector<int32_t>& before, std::vector<int32_t>& after,
                   const std::string& where) {
  bool seen_text = false;
  for (const json& item : processor.at("single")) {
    if (item.contains("Sequence")) {
      if (item["Sequence"].at("id") != "A" || seen_text)
        throw InputError(str(where, ": post_processor template ", quoted_text(processor["single"].dump()),
                             " is not supported (trident takes special tokens around one $A)"));
      seen_text = true;
      continue;
    }
    const std::string name = item.at("SpecialToken").at("id").get<std::string>();
    const json& ids = processor.at("special_tokens").at(name).at("ids");
    if (ids.size() != 1)
      throw InputError(str(where, ": post_processor special token ", quoted_text(name), " must be one id"));
    (seen_text ? after : before).push_back(ids[0].get<int32_t>());
  }
}

void read_post_processor(const json& processor, std::vector<int32_t>& before, std::vector<int32_t>& after,
                         const std::string& where) {
  const std::string type = type_of(processor, where + ": post_processor");
  if (type.empty() || type == "ByteLevel") return;   // ByteLevel only adjusts offsets
  if (type == "TemplateProcessing") return read_template(processor, before, after, where);
  if (type == "Sequence") {
    for (const json& p : processor.at("processors")) read_post_processor(p, before, after, where);
    return;
  }
  throw InputError(str(where, ": post_processor ", type,
                       " is not supported (trident reads ByteLevel, TemplateProcessing or a Sequence of them)"));
}

}  // namespace

std::optional<std::string> config_token(const json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content")) return (*it)["content"].get<std::string>();
  return std::nullopt;
}

bool HfTokenizer::is_added_token(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !has_token_[id]) return false;
  int32_t found = -1;
  return added_token_at(token_bytes_[id], 0, found) == token_bytes_[id].size() && found == id;
}

HfTokenizer::HfTokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path file = fs::is_directory(path) ? fs::path(path) / "tokenizer.json" : fs::path(path);
  const fs::path config_file = file.parent_path() / "tokenizer_config.json";
  load(read_json_file(file.string()),
       fs::exists(config_file) ? read_json_file(config_file.string()) : json::object(), file.string(),
       config_file.string());
}

HfTokenizer::HfTokenizer(const TokenizerFiles& files, const std::string& where) {
  const std::string* text = files.find("tokenizer.json");
  if (!text) throw InputError(str(where, ": holds no tokenizer.json"));
  const std::string* config = files.find("tokenizer_config.json");
  const std::string root_where = where + " tokenizer.json", config_where = where + " tokenizer_config.json";
  load(parse_json_text(*text, root_where), config ? parse_json_text(*config, config_where) : json::object(), root_where,
       config_where);
}

void HfTokenizer::load(const json& root, const json& config, const std::string& where, const std::string& config_where) {
  if (!root.is_object() || !root.contains("model"))
    throw InputError(str(where, ": not a tokenizer.json (no \"model\"); pass a Hugging Face tokenizer.json "
                                "or the directory holding one"));
  name_ = "tokenizer.json " + where;

  try {
    load_model(root["model"], where);

    // Added tokens decode to their text as it is and take ids the vocabulary may not have.
    added_.emplace_back();
    for (const json& t : root.value("added_tokens", json::array())) {
      const std::string content = t.at("content").get<std::string>();
      const int32_t id = t.at("id").get<int32_t>();
      if (content.empty() || id < 0)
        throw InputError(str(where, ": added token ", quoted_text(t.dump()), " has empty content or a negative id"));
      if (flag(t, "single_word", false) || flag(t, "lstrip", false) || flag(t, "rstrip", false))
        throw InputError(str(where, ": added token ", quoted_text(content),
                             " uses single_word/lstrip/rstrip, which trident does not implement"));
      if (static_cast<size_t>(id) >= token_bytes_.size()) {
        token_bytes_.resize(id + 1);
        has_token_.resize(id + 1, false);
      }
      token_bytes_[id] = content;
      has_token_[id] = true;
      int32_t node = 0;
      for (const char c : content) {
        const uint8_t b = static_cast<uint8_t>(c);
        int32_t child = -1;
        for (const auto& [byte, to] : added_[node].next)
          if (byte == b) child = to;
        if (child < 0) {
          child = static_cast<int32_t>(added_.size());
          added_[node].next.emplace_back(b, child);
          added_.emplace_back();
        }
        node = child;
      }
      added_[node].token = id;
    }

    const std::string normalizer = type_of(root.value("normalizer", json()), where + ": normalizer");
    if (normalizer == "NFC") nfc_ = true;
    else if (!normalizer.empty())
      throw InputError(str(where, ": normalizer ", normalizer, " is not supported (trident reads none or NFC)"));

    const json& pre = root.value("pre_tokenizer", json());
    const std::string pre_type = type_of(pre, where + ": pre_tokenizer");
    const auto byte_level_ok = [&](const json& p, bool use_regex) {
      return type_of(p, where) == "ByteLevel" && !flag(p, "add_prefix_space", false) &&
             flag(p, "use_regex", true) == use_regex;
    };
    if (pre_type == "ByteLevel" && byte_level_ok(pre, true)) {
      split_.reset();
    } else if (pre_type == "Sequence" && pre.at("pretokenizers").size() == 2 &&
               type_of(pre["pretokenizers"][0], where) == "Split" && byte_level_ok(pre["pretokenizers"][1], false)) {
      const json& split = pre["pretokenizers"][0];
      const std::string regex = split.at("pattern").value("Regex", "");
      split_ = known_split_pattern(regex);
      if (!split_)
        throw InputError(str(where, ": pre_tokenizer Split regex ", quoted_text(regex),
                             " is not one trident implements (GPT-2's, Llama 3's or Qwen 2's)"));
      if (split.value("behavior", "") != "Isolated" || flag(split, "invert", false))
        throw InputError(str(where, ": pre_tokenizer Split must have behavior Isolated and invert false"));
    } else {
      throw InputError(str(where, ": pre_tokenizer ", quoted_text(pre.dump().substr(0, 200)),
                           " is not supported (trident reads ByteLevel, or a Sequence of Split and "
                           "ByteLevel with use_regex false, both without add_prefix_space)"));
    }

    if (type_of(root.value("decoder", json()), where + ": decoder") != "ByteLevel")
      throw InputError(str(where, ": decoder must be ByteLevel (a byte-level BPE tokenizer)"));

    std::vector<int32_t> before, after;
    read_post_processor(root.value("post_processor", json()), before, after, where);
    if (before.size() > 1)
      throw InputError(str(where, ": post_processor puts ", before.size(), " tokens before the text; trident adds one BOS"));
    if (!before.empty()) bos_id_ = before[0];
  } catch (const json::exception& e) {
    throw InputError(str(where, ": unexpected structure (", e.what(), ")"));
  }

  // tokenizer_config.json decides BOS where it says; the end-of-text token is its eos_token.
  const auto id_of = [&](const std::string& token) {
    int32_t id = -1;
    return added_token_at(token, 0, id) == token.size() && !token.empty() ? id : bpe_.find(token);
  };
  const auto config_id = [&](const std::string& token, const char* what) {
    const int32_t id = id_of(token);
    if (id < 0) throw InputError(str(config_where, ": ", what, " ", quoted_text(token), " is not a token of ", where));
    return id;
  };
  try {
    if (config.contains("add_bos_token") && !config["add_bos_token"].is_null()) {
      bos_id_ = -1;
      if (config["add_bos_token"].get<bool>()) {
        const std::optional<std::string> bos = config_token(config, "bos_token");
        if (!bos) throw InputError(str(config_where, ": add_bos_token is true but bos_token is not set"));
        bos_id_ = config_id(*bos, "bos_token");
      }
    }
    const std::optional<std::string> eos = config_token(config, "eos_token");
    eot_id_ = eos ? config_id(*eos, "eos_token") : id_of("<|endoftext|>");
  } catch (const json::exception& e) {
    throw InputError(str(config_where, ": unexpected structure (", e.what(), ")"));
  }
  if (eot_id_ < 0)
    throw InputError(str(where, ": no end-of-text token: put a tokenizer_config.json with eos_token beside it"));
  if (bos_id_ >= vocab_size() || (bos_id_ >= 0 && !has_token_[bos_id_]))
    throw InputError(str(where, ": post_processor BOS id ", bos_id_, " is not a token"));
}

void HfTokenizer::load_model(const json& model, const std::string& where) {
  if (type_of(model, where + ": model") != "BPE")
    throw InputError(str(where, ": model type ", quoted_text(model.value("type", "")),
                         " is not supported (trident reads byte-level BPE)"));
  if (flag(model, "byte_fallback", false))
    throw InputError(str(where, ": model byte_fallback is a SentencePiece-style BPE, which trident does not read"));
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(affix) && !model[affix].is_null() && model[affix] != "")
      throw InputError(str(where, ": model ", affix, " is not supported"));
  }
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() != 0)
    throw InputError(str(where, ": model dropout is not supported (it makes encoding random)"));
  bpe_.set_ignore_merges(flag(model, "ignore_merges", false));

  const json& vocab = model.at("vocab");
  if (!vocab.is_object() || vocab.empty()) throw InputError(str(where, ": model vocab must be a non-empty object"));
  for (const auto& [token, id_json] : vocab.items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 || id_json.get<int64_t>() > (int64_t{1} << 30))
      throw InputError(str(where, ": vocab token ", quoted_text(token), " has id ", quoted_text(id_json.dump())));
    const int32_t id = id_json.get<int32_t>();
    if (static_cast<size_t>(id) >= token_bytes_.size()) {
      token_bytes_.resize(id + 1);
      has_token_.resize(id + 1, false);
    }
    if (has_token_[id]) throw InputError(str(where, ": vocab id ", id, " is given twice"));
    token_bytes_[id] = byte_level_to_bytes(token, where);
    has_token_[id] = true;
    if (!bpe_.add_token(token_bytes_[id], id))
      throw InputError(str(where, ": vocab token ", quoted_text(token), " is listed twice"));
  }
  bpe_.finish_vocab(where);

  // Merges are "left right" strings (one space) or, since tokenizers 0.20, [left, right] pairs.
  const json& merges = model.at("merges");
  bpe_.reserve_merges(merges.size());
  int32_t rank = 0;
  for (const json& m : merges) {
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == 0 || space == std::string::npos || space + 1 == s.size() || s.find(' ', space + 1) != std::string::npos)
        throw InputError(str(where, ": merge ", rank, " ", quoted_text(s), " is not two tokens separated by one space"));
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      throw InputError(str(where, ": merge ", rank, " ", quoted_text(m.dump()), " is neither \"a b\" nor [\"a\", \"b\"]"));
    }
    const std::string at = str(where, ": merge ", rank);
    bpe_.add_merge(byte_level_to_bytes(left, at), byte_level_to_bytes(right, at), rank, at);
    ++rank;
  }
}

size_t HfTokenizer::added_token_at(std::string_view text, size_t pos, int32_t& id) const {
  size_t best = 0;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    int32_t child = -1;
    for (const auto& [byte, to] : added_[node].next)
      if (byte == static_cast<uint8_t>(text[i])) child = to;
    if (child < 0) break;
    node = child;
    if (added_[node].token >= 0) best = i + 1 - pos, id = added_[node].token;
  }
  return best;
}

void HfTokenizer::encode_section(std::string_view text, std::vector<int32_t>& ids) const {
  std::string normalized;
  if (nfc_ && may_need_nfc(text)) {
    normalized = to_nfc(text);
    text = normalized;
  }
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = split_ ? split_piece_end(*split_, text, pos) : gpt2_piece_end(text, pos);
    bpe_.encode_piece(text.substr(pos, end - pos), ids);
    pos = end;
  }
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  size_t start = 0;
  for (size_t pos = 0; pos < text.size() && !added_[0].next.empty(); ++pos) {
    int32_t id = -1;
    const size_t len = added_token_at(text, pos, id);
    if (len == 0) continue;
    encode_section(text.substr(start, pos - start), ids);
    ids.push_back(id);
    pos += len - 1;
    start = pos + 1;
  }
  encode_section(text.substr(start), ids);
  return ids;
}

std::string HfTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (const int32_t id : ids) {
    if (id < 0 || id >= vocab_size() || !has_token_[id])
      throw InputError(str("token id ", id, " is not in ", name_, " (", vocab_size(), " ids)"));
    out += token_bytes_[id];
  }
  return out;
}

}  // namespace trident
