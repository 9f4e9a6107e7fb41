// Chat records to messages and messages to masked token ids under the plain, ChatML and Llama 3
// templates (and Hugging Face Jinja templates through HfChatTemplate).
#include "trident/io/chat_template.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "hf_chat_template.hpp"
#include "trident/core/error.hpp"

namespace trident {
namespace {

// The string field `key` of a record; BadRecord when it is missing or not a string.
std::string string_field(const nlohmann::json& record, const char* key) {
  const auto it = record.find(key);
  if (it == record.end()) throw BadRecord("missing field", str("no '", key, "' field"));
  if (!it->is_string()) throw BadRecord("missing field", str("'", key, "' is not a string"));
  return it->get<std::string>();
}

void check_object(const nlohmann::json& record) {
  if (!record.is_object()) throw BadRecord("missing field", "not a JSON object");
}

// Roles in order (system first if any, then user/assistant alternating, assistant last) and no empty answer.
void check_roles(const std::vector<ChatMessage>& msgs) {
  size_t i = !msgs.empty() && msgs[0].role == "system" ? 1 : 0;
  if (i == msgs.size()) throw BadRecord("wrong roles", "no user and assistant messages");
  for (size_t k = i; k < msgs.size(); ++k) {
    const char* want = (k - i) % 2 == 0 ? "user" : "assistant";
    if (msgs[k].role != want)
      throw BadRecord("wrong roles", str("message ", k, " has role '", msgs[k].role, "', expected '", want,
                                         "' (an optional system message, then user and assistant alternating)"));
    if (msgs[k].role == "assistant" && msgs[k].content.find_first_not_of(" \t\r\n") == std::string::npos)
      throw BadRecord("empty assistant turn", str("message ", k, " (assistant) is empty"));
  }
  if (msgs.back().role != "assistant")
    throw BadRecord("wrong roles", "the last message is not the assistant's: nothing would train on it");
}


// The id of `text` when the tokenizer encodes it as one token that decodes back to it.
int32_t special_id(const Tokenizer& tok, const std::string& text, const std::string& template_name) {
  const std::vector<int32_t> ids = tok.encode(text);
  if (ids.size() != 1 || tok.decode(ids) != text)
    throw InputError(str("--chat-template ", template_name, ": ", text, " is not a token of the ", tok.name(),
                         " tokenizer; use a tokenizer.json that has it as an added token, or --chat-template plain"));
  return ids[0];
}

}  // namespace

std::string trimmed(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

std::vector<ChatMessage> chat_messages(const nlohmann::json& record) {
  check_object(record);
  std::vector<ChatMessage> msgs;
  const auto it = record.find("messages");
  if (it != record.end()) {
    if (!it->is_array()) throw BadRecord("missing field", "'messages' is not a list");
    for (const nlohmann::json& m : *it) {
      if (!m.is_object()) throw BadRecord("missing field", "a message is not an object");
      msgs.push_back({string_field(m, "role"), string_field(m, "content")});
      const std::string& r = msgs.back().role;
      if (r != "system" && r != "user" && r != "assistant")
        throw BadRecord("wrong roles", str("role '", r, "' is not system, user or assistant"));
    }
  } else if (record.contains("prompt") || record.contains("response")) {
    msgs.push_back({"user", string_field(record, "prompt")});
    msgs.push_back({"assistant", string_field(record, "response")});
  } else {
    throw BadRecord("missing field", "neither 'messages' nor 'prompt'/'response'");
  }
  check_roles(msgs);
  return msgs;
}

std::vector<std::vector<ChatMessage>> preference_conversations(const nlohmann::json& record) {
  check_object(record);
  const std::string prompt = string_field(record, "prompt");
  std::vector<std::vector<ChatMessage>> out;
  for (const char* side : {"chosen", "rejected"}) {
    out.push_back({{"user", prompt}, {"assistant", string_field(record, side)}});
    check_roles(out.back());
  }
  return out;
}

ChatTemplate::ChatTemplate(const std::string& name, const Tokenizer& tokenizer) : name_(name), tok_(tokenizer) {
  if (name == "plain") {
    begin_ = tok_.bos_id();
  } else if (name == "chatml") {
    begin_ = tok_.bos_id();
    open_ = special_id(tok_, "<|im_start|>", name);
    close_ = special_id(tok_, "<|im_end|>", name);
  } else if (name == "llama3") {
    begin_ = special_id(tok_, "<|begin_of_text|>", name);
    open_ = special_id(tok_, "<|start_header_id|>", name);
    header_end_ = special_id(tok_, "<|end_header_id|>", name);
    close_ = special_id(tok_, "<|eot_id|>", name);
  } else if (name.rfind("hf:", 0) == 0) {
    hf_ = std::make_unique<const HfChatTemplate>(name.substr(3), tok_);
  } else {
    throw InputError(str("--chat-template ", name, ": use llama3, chatml, plain, hf (the chat_template of the "
                         "tokenizer_config.json beside --tokenizer) or hf:PATH/tokenizer_config.json"));
  }
}

ChatTemplate::~ChatTemplate() = default;

void ChatTemplate::add_text(MaskedTokens& out, const std::string& text, bool trained) const {
  for (int32_t id : tok_.encode(text)) add_token(out, id, trained);
}

void ChatTemplate::add_token(MaskedTokens& out, int32_t id, bool trained) const {
  out.tokens.push_back(id);
  out.mask.push_back(trained ? 1 : 0);
}

MaskedTokens ChatTemplate::render(const std::vector<ChatMessage>& messages) const {
  if (hf_) return hf_->render(messages);
  MaskedTokens out;
  if (begin_ >= 0) add_token(out, begin_, false);
  for (const ChatMessage& m : messages) {
    const bool trained = m.role == "assistant";
    if (name_ == "plain") {
      const std::string role = m.role == "system" ? "System" : m.role == "user" ? "User" : "Assistant";
      add_text(out, role + ": ", false);
      add_text(out, m.content, trained);
      if (trained) add_token(out, tok_.eot_id(), true);
      else add_text(out, "\n", false);
    } else if (name_ == "chatml") {
      add_token(out, open_, false);
      add_text(out, m.role + "\n", false);
      add_text(out, m.content, trained);
      add_token(out, close_, trained);
      add_text(out, "\n", false);
    } else {
      add_token(out, open_, false);
      add_text(out, m.role, false);
      add_token(out, header_end_, false);
      add_text(out, "\n\n", false);
      add_text(out, trimmed(m.content), trained);
      add_token(out, close_, trained);
    }
  }
  return out;
}

ChatTemplate::Prompt ChatTemplate::render_prompt(const std::vector<ChatMessage>& messages) const {
  std::vector<ChatMessage> asked = messages;
  asked.push_back({"assistant", ""});
  const MaskedTokens r = render(asked);
  const auto first_trained = std::find(r.mask.begin(), r.mask.end(), 1);
  TRIDENT_CHECK(first_trained != r.mask.end(), "ChatTemplate::render_prompt: the template trains no end-of-turn token");
  const size_t n = static_cast<size_t>(first_trained - r.mask.begin());
  return {std::vector<int32_t>(r.tokens.begin(), r.tokens.begin() + n), r.tokens[n]};
}

}  // namespace trident
