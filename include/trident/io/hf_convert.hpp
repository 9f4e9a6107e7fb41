// Hugging Face interchange of whole models (GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM, and
// reward models as their *ForSequenceClassification): config.json as the [model] section and back,
// and each trident parameter's Hugging Face tensor (name, shape, GPT-2's Conv1D transposition).
// Rules and limits: docs/HF_INTERCHANGE.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trident/config/run_config.hpp"
#include "trident/io/checkpoint.hpp"
#include "trident/io/safetensors.hpp"
#include "trident/model/layout.hpp"

namespace trident {

// DIR/config.json as a [model] section (score_head set for a *ForSequenceClassification). Throws
// InputError "DIR/config.json: ..." for a missing or malformed file, an architecture other than the
// six, a classifier with more than one label, and any setting trident does not model (rope_scaling,
// sliding windows, a head_dim other than hidden_size / num_attention_heads, ...).
ModelConfig read_hf_config(const std::string& dir);

// "GPT2LMHeadModel", "Qwen2ForCausalLM" (llama with q/k/v biases) or "LlamaForCausalLM"; for a
// reward model (score_head) "GPT2ForSequenceClassification", "Qwen2ForSequenceClassification" or
// "LlamaForSequenceClassification".
std::string hf_architecture(const ModelConfig& m);

// Token ids for config.json and generation_config.json; -1 where unknown (no tokenizer given).
struct HfSpecialTokens {
  int32_t bos = -1, eos = -1;
};

// config.json of m with every field transformers reads for its architecture; torch_dtype is
// "float32", "bfloat16" or "float16". A reward model's has one label and a pad_token_id that is
// not the end-of-text token (transformers scores each row at its last token that is not padding).
std::string hf_config_json(const ModelConfig& m, const std::string& torch_dtype, const HfSpecialTokens& tokens);
std::string hf_generation_config_json(const HfSpecialTokens& tokens);

// One trident parameter and its Hugging Face tensor: the same elements in the same order, or for
// GPT-2's Conv1D weights the transpose (Hugging Face stores (in, out), trident (out, in)).
struct HfTensor {
  std::string name;               // trident's (ParamLayout), e.g. blocks.0.attn.q.weight
  std::vector<int64_t> shape;     // trident's global shape, e.g. {NH, HS, C}
  std::string hf_name;            // as save_pretrained names it, e.g. model.layers.0.self_attn.q_proj.weight
  std::vector<int64_t> hf_shape;  // e.g. {NH*HS, C}
  bool transposed = false;
};

// Every parameter of m, in save_pretrained's order: embeddings, layers upwards, final norm, head
// (lm_head, or a reward model's score.weight).
std::vector<HfTensor> hf_tensors(const ModelConfig& m);

// One whole tensor from trident's layout to Hugging Face's, and back (a transpose or nothing).
std::vector<float> to_hf_layout(const HfTensor& t, std::vector<float> data);
std::vector<float> from_hf_layout(const HfTensor& t, std::vector<float> data);

// "" when a run's [model] section describes the model of some weights; else one line naming the
// first differing field with both values. Settings that do not shape the weights or the function
// (seq_len, init_std) are not compared. A reward model's run (score_head) may take a language
// model's weights (its transformer), not the reverse.
std::string model_difference(const ModelConfig& run, const ModelConfig& weights);

// A Hugging Face model directory opened for import: config.json as a [model] section and its
// safetensors (model.safetensors or the sharded index), every tensor trident needs present at
// its shape and no other tensor but the buffers transformers keeps (GPT-2's attn.bias and
// attn.masked_bias, rotary_emb.inv_freq, a language model's tied lm_head.weight); InputError naming
// the file and the tensor otherwise. GPT-2 names may lack the 'transformer.' prefix.
class HfImport {
 public:
  explicit HfImport(const std::string& dir);
  const ModelConfig& model() const { return model_; }

  // This rank's parameters for `layout` (a layout of model()): layout.total() fp32, each tensor's
  // shard at its offset, zero elsewhere (vocabulary padding, alignment). A shard of rows (split
  // along trident's dim 0, not transposed) is read alone (read_rows_f32); other tensors are read
  // whole and the shard taken from them.
  // A reward model's layout (score.weight) from a model without a score head: its transformer
  // only; score.weight is left 0 and *score_unread set (which must then be given).
  std::vector<float> local_params(const ParamLayout& layout, bool* score_unread = nullptr) const;

 private:
  void read_shard(const HfTensor& t, const std::string& file_name, const ParamInfo& p, float* dst) const;

  ModelConfig model_;
  SafetensorsModel st_;
  std::vector<HfTensor> tensors_;
  std::map<std::string, size_t> index_;       // trident name -> tensors_ index
  std::vector<std::string> file_names_;       // each tensor's name in the file
};

// A trident checkpoint opened for export, by one process: its attributes, its model (the stored
// [model] section) and every /model dataset present at its shape (InputError naming the file and
// the dataset otherwise). Optimizer state, when there is one, is not read.
class CheckpointExport {
 public:
  explicit CheckpointExport(const std::string& file);
  const CheckpointInfo& info() const { return info_; }
  const ModelConfig& model() const { return model_; }
  const std::vector<HfTensor>& tensors() const { return tensors_; }
  // tensors()[i] in Hugging Face's layout, after checking the data against the dataset's checksum.
  std::vector<float> read_hf(size_t i) const;

 private:
  std::string file_;
  CheckpointInfo info_;
  ModelConfig model_;
  std::vector<HfTensor> tensors_;
};

// The BOS and EOS ids of a tokenizer (read_tokenizer_files, or kept in a checkpoint), after loading
// it: InputError, naming `where`, for one trident cannot read or with more ids than vocab_size.
HfSpecialTokens hf_tokenizer_ids(const TokenizerFiles& files, const std::string& where, int vocab_size);
// The same for a tokenizer that comes along without being asked for (a Hugging Face directory's,
// one a checkpoint keeps): one trident cannot read (a SentencePiece-style tokenizer.json) is still
// kept and exported as it is, so this returns no ids (-1) and sets `note` to why instead of throwing.
HfSpecialTokens carried_tokenizer_ids(const TokenizerFiles& files, const std::string& where, int vocab_size,
                                      std::string& note);

}  // namespace trident
