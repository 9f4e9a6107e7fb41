// `--chat-template hf:PATH`: a Hugging Face chat template (tokenizer_config.json's Jinja
// chat_template) rendered as transformers renders it, with the assistant's content located in the
// rendered text so that only it and its end-of-turn token train.
#pragma once

#include <string>
#include <vector>

#include "trident/io/chat_template.hpp"
#include "trident/io/jinja.hpp"

namespace trident {

class HfChatTemplate {
 public:
  // config_path: a tokenizer_config.json holding chat_template (a string, or a list of named
  // templates with one named "default"), or beside a chat_template.jinja. Throws InputError naming
  // --chat-template for a missing template or one outside trident's Jinja subset.
  HfChatTemplate(const std::string& config_path, const Tokenizer& tokenizer);

  // The conversation's rendered text encoded piece by piece: the template's own text, untrained; each
  // message's content, trained for the assistant; the first token after an assistant's content, which
  // must be an added token (its end-of-turn token: <|eot_id|>, <|im_end|>, </s>), trained. Throws
  // InputError when the template fails (its raise_exception included), drops, repeats or rewrites a
  // message's content (beyond trimming its whitespace), or ends an assistant turn with no added token.
  MaskedTokens render(const std::vector<ChatMessage>& messages) const;

 private:
  std::string render_text(const std::vector<ChatMessage>& messages, const std::vector<std::string>& contents) const;
  [[noreturn]] void refuse(const std::string& why) const;

  std::string where_;   // "--chat-template hf:PATH", to start every error
  const Tokenizer& tok_;
  nlohmann::ordered_json tokens_;   // bos_token and eos_token, where the config sets them (before template_: it fills them)
  JinjaTemplate template_;
};

}  // namespace trident
