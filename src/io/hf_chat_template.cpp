// Hugging Face chat templates for fine-tuning data: render, locate each message's content by rendering
// again with a marker in its place, and encode the pieces with the assistant's content trained.
#include "hf_chat_template.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "hf_tokenizer.hpp"
#include "json_file.hpp"
#include "trident/core/error.hpp"

namespace trident {
namespace {

// The chat template a tokenizer_config.json names, or the chat_template.jinja beside it.
std::string read_template(const std::string& config_path, const nlohmann::json& config, const std::string& where) {
  const auto it = config.find("chat_template");
  if (it != config.end() && it->is_string()) return it->get<std::string>();
  if (it != config.end() && it->is_array()) {
    for (const nlohmann::json& named : *it)
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
          named["template"].is_string())
        return named["template"].get<std::string>();
    throw InputError(str(where, ": chat_template lists no template named \"default\""));
  }
  if (it != config.end()) throw InputError(str(where, ": chat_template is not a string"));
  const std::filesystem::path jinja = std::filesystem::path(config_path).parent_path() / "chat_template.jinja";
  std::ifstream in(jinja, std::ios::binary);
  if (!in)
    throw InputError(str(where, ": no chat_template field (and no chat_template.jinja beside it); name a "
                                "tokenizer_config.json that has one, or use --chat-template llama3, chatml or plain"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

HfChatTemplate::HfChatTemplate(const std::string& config_path, const Tokenizer& tokenizer)
    : where_("--chat-template hf:" + config_path), tok_(tokenizer), template_([&] {
        const nlohmann::json config = read_json_file(config_path);
        if (!config.is_object()) throw InputError(str(where_, ": not a JSON object"));
        for (const char* key : {"bos_token", "eos_token"})
          if (const std::optional<std::string> token = config_token(config, key)) tokens_[key] = *token;
        try {
          return JinjaTemplate(read_template(config_path, config, where_));
        } catch (const JinjaError& e) {
          throw InputError(str(where_, ": chat_template ", e.what(),
                               " (trident runs the Jinja subset listed in docs/FINE_TUNING.md)"));
        }
      }()) {}

void HfChatTemplate::refuse(const std::string& why) const { throw InputError(str(where_, ": ", why)); }

std::string HfChatTemplate::render_text(const std::vector<ChatMessage>& messages,
                                        const std::vector<std::string>& contents) const {
  nlohmann::ordered_json vars = tokens_;
  vars["messages"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < messages.size(); ++i)
    vars["messages"].push_back({{"role", messages[i].role}, {"content", contents[i]}});
  vars["add_generation_prompt"] = false;
  try {
    return template_.render(vars);
  } catch (const JinjaError& e) {
    refuse(str("chat_template ", printable(e.what(), 300)));
  }
}

MaskedTokens HfChatTemplate::render(const std::vector<ChatMessage>& messages) const {
  std::vector<std::string> contents, markers;
  for (size_t i = 0; i < messages.size(); ++i) {
    contents.push_back(messages[i].content);
    markers.push_back(str("\x02", i, "\x03"));   // no whitespace, letters or quotes: trim and case leave it be
  }
  const std::string text = render_text(messages, contents), marked = render_text(messages, markers);

  // The template's own text: `marked` cut at the markers, each there once and in order.
  std::vector<std::string> own;
  size_t from = 0;
  for (size_t i = 0; i < markers.size(); ++i) {
    const size_t at = marked.find(markers[i]);
    if (at == std::string::npos || at < from || marked.find(markers[i], at + 1) != std::string::npos)
      refuse(str("the template does not write message ", i, "'s content exactly once and in order, so trident "
                 "cannot tell which tokens are the assistant's"));
    own.push_back(marked.substr(from, at - from));
    from = at + markers[i].size();
  }
  own.push_back(marked.substr(from));

  // `text` must be own[0], content 0 (as given or trimmed), own[1], ...; the pieces are encoded
  // separately, as the built-in templates encode theirs.
  MaskedTokens out;
  bool end_of_turn = false;   // the next token closes an assistant's turn and trains
  const auto add = [&](const std::string& piece, bool trained) {
    for (const int32_t id : tok_.encode(piece)) {
      if (end_of_turn && !tok_.is_added_token(id))
        refuse(str("the template writes ", printable(tok_.decode({id}), 40), " after an assistant's content where an "
                   "end-of-turn token (an added token of the tokenizer, such as <|eot_id|> or <|im_end|>) must follow, "
                   "so the model would not learn to stop"));
      out.tokens.push_back(id);
      out.mask.push_back(trained || end_of_turn ? 1 : 0);
      end_of_turn = false;
    }
  };
  size_t pos = 0;
  for (size_t i = 0; i <= messages.size(); ++i) {
    if (text.compare(pos, own[i].size(), own[i]) != 0)
      refuse(str("the template writes different text around message ", i, "'s content depending on the content, "
                 "so trident cannot tell which tokens are the assistant's"));
    add(own[i], false);
    pos += own[i].size();
    if (i == messages.size()) break;
    bool found = false;
    for (const std::string& content : {contents[i], jinja_trim(contents[i])}) {
      if (text.compare(pos, content.size(), content) != 0 ||
          text.compare(pos + content.size(), own[i + 1].size(), own[i + 1]) != 0)
        continue;
      add(content, messages[i].role == "assistant");
      pos += content.size();
      found = true;
      break;
    }
    if (!found)
      refuse(str("the template changes message ", i, "'s content beyond trimming its whitespace, so trident cannot "
                 "tell which tokens are the assistant's"));
    end_of_turn = messages[i].role == "assistant";
  }
  if (end_of_turn)
    refuse("the template ends an assistant's turn with no end-of-turn token, so the model would not learn to stop");
  return out;
}

}  // namespace trident
