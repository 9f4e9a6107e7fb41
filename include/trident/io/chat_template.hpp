// Chat templates for supervised fine-tuning data: a conversation (system, user and assistant
// messages) rendered to token ids with a loss mask that trains the assistant's tokens only.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "trident/io/masked_dataset.hpp"
#include "trident/io/tokenizer.hpp"

namespace trident {

struct ChatMessage {
  std::string role;      // system | user | assistant
  std::string content;
};

// A record that cannot be used; `kind` names the reason for the tokenize summary's counts
// ("missing field", "wrong role", "empty assistant turn", ...), what() the detail.
class BadRecord : public std::runtime_error {
 public:
  BadRecord(std::string kind, const std::string& detail) : std::runtime_error(detail), kind_(std::move(kind)) {}
  const std::string& kind() const { return kind_; }

 private:
  std::string kind_;
};

// s without its leading and trailing spaces, tabs and newlines (llama3 trims contents so; the RL
// verifier compares answers so).
std::string trimmed(const std::string& s);

// The messages of a chat record: {"messages": [{"role": ..., "content": ...}, ...]} (OpenAI style)
// or {"prompt": ..., "response": ...} (a user and an assistant message). Roles: an optional system
// message first, then user and assistant alternating from user, ending with the assistant; every
// assistant message non-empty. Throws BadRecord otherwise.
std::vector<ChatMessage> chat_messages(const nlohmann::json& record);

// A preference record {"prompt": ..., "chosen": ..., "rejected": ...} as two conversations (the
// prompt as the user's message, each answer as the assistant's): [chosen, rejected]. Throws BadRecord.
std::vector<std::vector<ChatMessage>> preference_conversations(const nlohmann::json& record);

class HfChatTemplate;

// plain: "User: {content}\n", "System: {content}\n", then "Assistant: " and the trained
//   {content}<eot>; the tokenizer's bos_id() first when it has one. Any tokenizer (the byte one too).
// chatml: "<|im_start|>{role}\n{content}<|im_end|>\n" per message; the assistant's {content}<|im_end|>
//   trained; bos_id() first when there is one.
// llama3: <|begin_of_text|> then "<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>"
//   per message, the content trimmed of surrounding whitespace (as Llama 3's own template does); the
//   assistant's {content}<|eot_id|> trained.
// The template's special tokens must be single tokens of the tokenizer (added tokens of a
// tokenizer.json); the text between them is encoded piece by piece, which for the Llama 3 and
// Qwen pre-tokenizers equals encoding the rendered text, as a newline ends a pre-token.
// hf:PATH: the Jinja chat_template of the tokenizer_config.json at PATH (HfChatTemplate).
class ChatTemplate {
 public:
  // name: plain, chatml, llama3 or hf:PATH. Throws InputError naming --chat-template for another
  // name, a special token the tokenizer lacks, or a Jinja template trident cannot run.
  ChatTemplate(const std::string& name, const Tokenizer& tokenizer);
  ~ChatTemplate();
  // Throws InputError where a Jinja template fails on these messages.
  MaskedTokens render(const std::vector<ChatMessage>& messages) const;
  // The prompt that asks for the next assistant message: `messages` (ending with the user's) plus
  // an empty assistant message, rendered and cut before its first trained token, which is the
  // template's end of turn. render() of the messages plus any reply starts with these tokens, so a
  // model is prompted at generation as it was trained, and stops where it learned to.
  struct Prompt {
    std::vector<int32_t> tokens;
    int32_t end_of_turn;   // plain: the tokenizer's end of text; chatml: <|im_end|>; llama3: <|eot_id|>
  };
  Prompt render_prompt(const std::vector<ChatMessage>& messages) const;
  const std::string& name() const { return name_; }

 private:
  void add_text(MaskedTokens& out, const std::string& text, bool trained) const;
  void add_token(MaskedTokens& out, int32_t id, bool trained) const;

  std::string name_;
  const Tokenizer& tok_;
  int32_t begin_ = -1;                 // the first token of every conversation; -1 for none
  int32_t open_ = -1, close_ = -1;     // chatml: <|im_start|>, <|im_end|>; llama3: <|start_header_id|>, <|eot_id|>
  int32_t header_end_ = -1;            // llama3: <|end_header_id|>
  std::unique_ptr<const HfChatTemplate> hf_;   // hf:PATH
};

}  // namespace trident
