// Hugging Face config.json <-> [model], the tensor name and layout map of GPT-2 and Llama/Qwen2,
// the import of a model directory into a rank's parameters, and the export reads of a checkpoint.
#include "trident/io/hf_convert.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "checkpoint_plan.hpp"
#include "h5.hpp"
#include "hf_tokenizer.hpp"
#include "json_file.hpp"
#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"

namespace trident {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// A training sequence length for the stored [model] section: runs set their own (model.seq_len is
// not compared by init.from); this one only has to fit the position table.
constexpr int kDefaultSeqLen = 2048;

int64_t product(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The fields of one config.json, with transformers' class defaults for those it omits.
class ConfigFields {
 public:
  ConfigFields(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  [[noreturn]] void refuse(const std::string& what) const { throw InputError(str(where_, ": ", what)); }

  int integer(const char* key, int fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (int64_t{1} << 30))
      refuse(str("\"", key, "\" = ", v.dump(), " is not a positive integer"));
    return v.get<int>();
  }
  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_[key];
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
      refuse(str("\"", key, "\" = ", v.dump(), " is not a positive number"));
    return v.get<double>();
  }
  bool flag(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_boolean()) refuse(str("\"", key, "\" = ", j_[key].dump(), " is not true or false"));
    return j_[key].get<bool>();
  }
  std::string text(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_string()) refuse(str("\"", key, "\" = ", j_[key].dump(), " is not a string"));
    return j_[key].get<std::string>();
  }
  // A setting trident does not model must have the value that means "off".
  void require_flag(const char* key, bool fallback, bool wanted, const std::string& why) const {
    if (flag(key, fallback) != wanted) refuse(str("\"", key, "\" = ", wanted ? "false" : "true", ": ", why));
  }
  const json& raw(const char* key) const { return j_[key]; }

 private:
  const json& j_;
  std::string where_;
};

// rope_scaling (transformers 4) or rope_parameters (transformers 5) must be the default rotary
// embedding; returns rope_theta.
double default_rope_theta(const ConfigFields& f, double fallback) {
  double theta = f.number("rope_theta", fallback);
  if (f.has("rope_scaling")) {
    const json& r = f.raw("rope_scaling");
    const std::string type = r.is_object() ? r.value("rope_type", r.value("type", std::string("?"))) : r.dump();
    if (type != "default")
      f.refuse(str("\"rope_scaling\" of type '", type, "' is not implemented (trident's rotary embedding is the "
                   "default, unscaled one: llama3, yarn, linear and dynamic scaling are not)"));
  }
  if (f.has("rope_parameters")) {
    const json& r = f.raw("rope_parameters");
    const std::string type = r.is_object() ? r.value("rope_type", std::string("default")) : r.dump();
    if (type != "default")
      f.refuse(str("\"rope_parameters\" of rope_type '", type, "' is not implemented (trident's rotary embedding "
                   "is the default, unscaled one: llama3, yarn, linear and dynamic scaling are not)"));
    if (r.contains("rope_theta")) {
      if (!r["rope_theta"].is_number() || !(r["rope_theta"].get<double>() > 1))
        f.refuse(str("\"rope_parameters\".rope_theta = ", r["rope_theta"].dump(), " is not a number > 1"));
      theta = r["rope_theta"].get<double>();
    }
  }
  return theta;
}

ModelConfig gpt2_from(const ConfigFields& f) {
  ModelConfig m;
  m.arch = "gpt2";
  m.n_embd = f.integer("n_embd", 768);
  m.n_layer = f.integer("n_layer", 12);
  m.n_head = f.integer("n_head", 12);
  m.vocab_size = f.integer("vocab_size", 50257);
  m.n_positions = f.integer("n_positions", 1024);
  m.norm_eps = f.number("layer_norm_epsilon", 1e-5);
  m.init_std = f.number("initializer_range", 0.02);
  m.tie_embeddings = "true";
  if (f.has("n_inner") && f.integer("n_inner", 0) != 4 * m.n_embd)
    f.refuse(str("\"n_inner\" = ", f.integer("n_inner", 0), ": trident's GPT-2 MLP is 4 * n_embd = ", 4 * m.n_embd,
                 " wide"));
  const std::string act = f.text("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    f.refuse(str("\"activation_function\" = \"", act, "\": trident's GPT-2 uses the tanh GELU (gelu_new)"));
  f.require_flag("tie_word_embeddings", true, true, "trident's GPT-2 head is its token embedding");
  f.require_flag("scale_attn_weights", true, true, "trident scales attention scores by 1/sqrt(head size)");
  f.require_flag("scale_attn_by_inverse_layer_idx", false, false, "not implemented");
  f.require_flag("add_cross_attention", false, false, "cross-attention is not implemented");
  return m;
}

// LlamaForCausalLM and Qwen2ForCausalLM: the same block, Qwen2 with q/k/v biases.
ModelConfig llama_from(const ConfigFields& f, bool qwen2) {
  ModelConfig m;
  m.arch = "llama";
  m.n_embd = f.integer("hidden_size", 4096);
  m.n_layer = f.integer("num_hidden_layers", 32);
  m.n_head = f.integer("num_attention_heads", 32);
  m.n_kv_head = f.integer("num_key_value_heads", m.n_head);
  m.ffn_hidden_size = f.integer("intermediate_size", qwen2 ? 22016 : 11008);
  m.vocab_size = f.integer("vocab_size", qwen2 ? 151936 : 32000);
  m.n_positions = f.integer("max_position_embeddings", qwen2 ? 32768 : 2048);
  m.norm_eps = f.number("rms_norm_eps", 1e-6);
  m.init_std = f.number("initializer_range", 0.02);
  m.rope_theta = default_rope_theta(f, 10000.0);
  m.tie_embeddings = f.flag("tie_word_embeddings", false) ? "true" : "false";
  m.qkv_bias = qwen2;
  if (m.n_embd % m.n_head != 0)
    f.refuse(str("\"hidden_size\" = ", m.n_embd, " is not a multiple of \"num_attention_heads\" = ", m.n_head));
  if (f.has("head_dim") && f.integer("head_dim", 0) != m.n_embd / m.n_head)
    f.refuse(str("\"head_dim\" = ", f.integer("head_dim", 0), ": trident's head size is hidden_size / "
                 "num_attention_heads = ", m.n_embd / m.n_head));
  if (m.n_head % m.n_kv_head != 0)
    f.refuse(str("\"num_key_value_heads\" = ", m.n_kv_head, " does not divide \"num_attention_heads\" = ", m.n_head));
  const std::string act = f.text("hidden_act", "silu");
  if (act != "silu") f.refuse(str("\"hidden_act\" = \"", act, "\": trident's SwiGLU MLP uses silu"));
  f.require_flag("mlp_bias", false, false, "biases on the MLP projections are not implemented");
  if (qwen2) {
    f.require_flag("use_sliding_window", false, false, "sliding-window attention is not implemented");
  } else {
    f.require_flag("attention_bias", false, false,
                   "it puts a bias on o_proj too, which trident does not model (Qwen2ForCausalLM's q/k/v biases it "
                   "does)");
  }
  if (f.has("layer_types")) {
    for (const json& t : f.raw("layer_types"))
      if (!t.is_string() || t.get<std::string>() != "full_attention")
        f.refuse(str("\"layer_types\" holds ", t.dump(), ": only full attention is implemented (no sliding windows)"));
  }
  return m;
}

// Trident suffix -> Hugging Face suffix of one block's parameters, and whether it is a Conv1D.
struct NamePair {
  const char* trident;
  const char* hf;
  bool transposed;
};
constexpr NamePair kGpt2Block[] = {
    {"ln1.weight", "ln_1.weight", false},          {"ln1.bias", "ln_1.bias", false},
    {"attn.qkv.weight", "attn.c_attn.weight", true}, {"attn.qkv.bias", "attn.c_attn.bias", false},
    {"attn.proj.weight", "attn.c_proj.weight", true}, {"attn.proj.bias", "attn.c_proj.bias", false},
    {"ln2.weight", "ln_2.weight", false},          {"ln2.bias", "ln_2.bias", false},
    {"mlp.fc.weight", "mlp.c_fc.weight", true},    {"mlp.fc.bias", "mlp.c_fc.bias", false},
    {"mlp.proj.weight", "mlp.c_proj.weight", true}, {"mlp.proj.bias", "mlp.c_proj.bias", false},
};
constexpr NamePair kGpt2Top[] = {
    {"wte", "transformer.wte.weight", false},       {"wpe", "transformer.wpe.weight", false},
    {"lnf.weight", "transformer.ln_f.weight", false}, {"lnf.bias", "transformer.ln_f.bias", false},
    {"score.weight", "score.weight", false},
};
constexpr NamePair kLlamaBlock[] = {
    {"ln1.weight", "input_layernorm.weight", false},
    {"attn.q.weight", "self_attn.q_proj.weight", false},
    {"attn.k.weight", "self_attn.k_proj.weight", false},
    {"attn.v.weight", "self_attn.v_proj.weight", false},
    {"attn.q.bias", "self_attn.q_proj.bias", false},
    {"attn.k.bias", "self_attn.k_proj.bias", false},
    {"attn.v.bias", "self_attn.v_proj.bias", false},
    {"attn.proj.weight", "self_attn.o_proj.weight", false},
    {"ln2.weight", "post_attention_layernorm.weight", false},
    {"mlp.gate.weight", "mlp.gate_proj.weight", false},
    {"mlp.up.weight", "mlp.up_proj.weight", false},
    {"mlp.down.weight", "mlp.down_proj.weight", false},
};
constexpr NamePair kLlamaTop[] = {
    {"wte", "model.embed_tokens.weight", false},
    {"lnf.weight", "model.norm.weight", false},
    {"lm_head", "lm_head.weight", false},
    {"score.weight", "score.weight", false},
};

template <size_t N>
const NamePair* find_pair(const NamePair (&table)[N], const std::string& name) {
  for (const NamePair& p : table)
    if (name == p.trident) return &p;
  return nullptr;
}

HfTensor hf_tensor_of(const ModelConfig& m, const ParamInfo& p) {
  HfTensor t;
  t.name = p.name;
  t.shape = p.global_shape;
  const bool llama = m.llama();
  const NamePair* pair = nullptr;
  if (p.name.rfind("blocks.", 0) == 0) {
    const size_t dot = p.name.find('.', 7);
    const std::string layer = p.name.substr(7, dot - 7), rest = p.name.substr(dot + 1);
    pair = llama ? find_pair(kLlamaBlock, rest) : find_pair(kGpt2Block, rest);
    TRIDENT_CHECK(pair != nullptr, "hf_tensors: no Hugging Face name for " + p.name);
    t.hf_name = str(llama ? "model.layers." : "transformer.h.", layer, ".", pair->hf);
  } else {
    pair = llama ? find_pair(kLlamaTop, p.name) : find_pair(kGpt2Top, p.name);
    TRIDENT_CHECK(pair != nullptr, "hf_tensors: no Hugging Face name for " + p.name);
    t.hf_name = pair->hf;
  }
  t.transposed = pair->transposed;
  const int64_t numel = product(t.shape), last = t.shape.back();
  if (t.transposed)
    t.hf_shape = {last, numel / last};
  else if (ends_with(t.name, ".bias") || t.shape.size() == 1)
    t.hf_shape = {numel};
  else
    t.hf_shape = {numel / last, last};
  return t;
}

// (rows, cols) row-major -> (cols, rows).
std::vector<float> transpose(const std::vector<float>& src, int64_t rows, int64_t cols) {
  std::vector<float> dst(src.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[static_cast<size_t>(c * rows + r)] = src[static_cast<size_t>(r * cols + c)];
  return dst;
}


// The buffers transformers keeps in some files beside the parameters, which trident computes.
bool is_known_buffer(const std::string& name) {
  return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias") || ends_with(name, "rotary_emb.inv_freq");
}

// The Hugging Face classes trident converts: language models, and reward models
// (*ForSequenceClassification with one label: score.weight, (1, C) without a bias, in place of the
// LM head, as trident's task = reward has it).
struct HfClass {
  const char* name;
  bool llama, qwen2, reward;
};
constexpr HfClass kHfClasses[] = {
    {"GPT2LMHeadModel", false, false, false},
    {"LlamaForCausalLM", true, false, false},
    {"Qwen2ForCausalLM", true, true, false},
    {"GPT2ForSequenceClassification", false, false, true},
    {"LlamaForSequenceClassification", true, false, true},
    {"Qwen2ForSequenceClassification", true, true, true},
};

std::string class_names() {
  std::string out;
  for (const HfClass& c : kHfClasses) out += (out.empty() ? "" : ", ") + std::string(c.name);
  return out;
}

// A reward model's config.json must have one label (trident's score is one number): id2label's
// size, else num_labels, else transformers' default of 2.
void require_one_label(const ConfigFields& f) {
  int labels = 2;
  if (f.has("id2label")) {
    if (!f.raw("id2label").is_object()) f.refuse(str("\"id2label\" = ", f.raw("id2label").dump(), " is not an object"));
    labels = static_cast<int>(f.raw("id2label").size());
  } else {
    labels = f.integer("num_labels", 2);
  }
  if (labels != 1)
    f.refuse(str("the classifier has ", labels, " labels (\"id2label\", \"num_labels\"): trident's reward model has "
                 "one score, num_labels = 1"));
}

// The pad_token_id of a reward model's config.json. transformers' *ForSequenceClassification
// scores each row at its last token that is not pad_token_id, so that id must never be the token
// a scored sequence ends with (its end-of-turn token, where trident reads the score). Trident pads
// its own samples with token 0: 0, unless 0 is the tokenizer's end-of-text token; then 1.
int32_t reward_pad_id(const HfSpecialTokens& tokens) { return tokens.eos == 0 ? 1 : 0; }

}  // namespace

ModelConfig read_hf_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.json").string();
  if (!fs::is_directory(dir)) throw InputError(str(dir, ": not a directory (a Hugging Face model directory holds config.json and model.safetensors)"));
  if (!fs::exists(path)) throw InputError(str(path, ": missing (a Hugging Face model directory holds config.json)"));
  const json j = read_json_file(path);
  if (!j.is_object()) throw InputError(str(path, ": not a JSON object"));
  const ConfigFields f(j, path);
  if (!j.contains("architectures") || !j["architectures"].is_array() || j["architectures"].size() != 1 ||
      !j["architectures"][0].is_string())
    f.refuse(str("\"architectures\" must list one architecture (", class_names(), ")"));
  const std::string arch = j["architectures"][0].get<std::string>();
  if (f.has("quantization_config")) f.refuse("quantized weights (\"quantization_config\") are not supported");
  const HfClass* c = std::find_if(std::begin(kHfClasses), std::end(kHfClasses),
                                  [&](const HfClass& k) { return arch == k.name; });
  if (c == std::end(kHfClasses)) f.refuse(str("architecture \"", arch, "\" is not supported (", class_names(), ")"));
  ModelConfig m = c->llama ? llama_from(f, c->qwen2) : gpt2_from(f);
  if (c->reward) require_one_label(f);
  m.score_head = c->reward;
  m.seq_len = std::min(m.positions(), kDefaultSeqLen);
  return m;
}

std::string hf_architecture(const ModelConfig& m) {
  for (const HfClass& c : kHfClasses)
    if (c.llama == m.llama() && c.qwen2 == (m.llama() && m.qkv_bias) && c.reward == m.score_head) return c.name;
  TRIDENT_CHECK(false, "hf_architecture: no Hugging Face class for this model");
  return "";
}

std::string hf_config_json(const ModelConfig& m, const std::string& torch_dtype, const HfSpecialTokens& tokens) {
  ordered_json j;
  j["architectures"] = ordered_json::array({hf_architecture(m)});
  if (!m.llama()) {
    j["model_type"] = "gpt2";
    j["vocab_size"] = m.vocab_size;
    j["n_positions"] = m.positions();
    j["n_embd"] = m.n_embd;
    j["n_layer"] = m.n_layer;
    j["n_head"] = m.n_head;
    j["n_inner"] = nullptr;
    j["activation_function"] = "gelu_new";
    // trident trains without dropout; transformers' GPT-2 default is 0.1.
    j["resid_pdrop"] = 0.0;
    j["embd_pdrop"] = 0.0;
    j["attn_pdrop"] = 0.0;
    j["layer_norm_epsilon"] = m.norm_eps;
    j["initializer_range"] = m.init_std;
    j["scale_attn_weights"] = true;
    j["scale_attn_by_inverse_layer_idx"] = false;
    j["reorder_and_upcast_attn"] = false;
    j["tie_word_embeddings"] = true;
  } else {
    const bool qwen2 = m.qkv_bias;
    j["model_type"] = qwen2 ? "qwen2" : "llama";
    j["vocab_size"] = m.vocab_size;
    j["hidden_size"] = m.n_embd;
    j["intermediate_size"] = m.ffn();
    j["num_hidden_layers"] = m.n_layer;
    j["num_attention_heads"] = m.n_head;
    j["num_key_value_heads"] = m.kv_heads();
    j["head_dim"] = m.head_size();
    j["hidden_act"] = "silu";
    j["max_position_embeddings"] = m.positions();
    j["rms_norm_eps"] = m.norm_eps;
    j["rope_theta"] = m.rope_theta;
    j["rope_scaling"] = nullptr;
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", m.rope_theta}};
    j["attention_dropout"] = 0.0;
    j["initializer_range"] = m.init_std;
    j["tie_word_embeddings"] = m.tied();
    if (qwen2) {
      j["use_sliding_window"] = false;
      j["sliding_window"] = nullptr;
      j["max_window_layers"] = m.n_layer;
    } else {
      j["attention_bias"] = false;
      j["mlp_bias"] = false;
      j["pretraining_tp"] = 1;
    }
  }
  if (m.score_head) {
    // The one logit is the reward; transformers writes num_labels as id2label and label2id.
    j["num_labels"] = 1;
    j["id2label"] = {{"0", "LABEL_0"}};
    j["label2id"] = {{"LABEL_0", 0}};
    j["pad_token_id"] = reward_pad_id(tokens);
  }
  j["bos_token_id"] = tokens.bos >= 0 ? ordered_json(tokens.bos) : ordered_json(nullptr);
  j["eos_token_id"] = tokens.eos >= 0 ? ordered_json(tokens.eos) : ordered_json(nullptr);
  j["use_cache"] = true;
  j["torch_dtype"] = torch_dtype;
  return j.dump(2) + "\n";
}

std::string hf_generation_config_json(const HfSpecialTokens& tokens) {
  ordered_json j;
  j["_from_model_config"] = true;
  if (tokens.bos >= 0) j["bos_token_id"] = tokens.bos;
  if (tokens.eos >= 0) j["eos_token_id"] = tokens.eos;
  return j.dump(2) + "\n";
}

std::vector<HfTensor> hf_tensors(const ModelConfig& m) {
  const ParamLayout all(m, StageInfo::of(m, 0, 1), 1, 0, 1, size_t{1} << 20);
  std::vector<HfTensor> out;
  for (const ParamInfo& p : all.params()) out.push_back(hf_tensor_of(m, p));
  // save_pretrained's order, which keeps a layer within a shard: embeddings, the layers upwards,
  // the final norm, the head (the layout lists them from the head down).
  auto rank = [](const HfTensor& t) -> std::pair<int, int> {
    if (t.name == "wte") return {0, 0};
    if (t.name == "wpe") return {0, 1};
    if (t.name.rfind("blocks.", 0) == 0) return {1, std::stoi(t.name.substr(7))};
    return {t.name == "lm_head" || t.name == "score.weight" ? 3 : 2, 0};
  };
  std::stable_sort(out.begin(), out.end(), [&](const HfTensor& a, const HfTensor& b) { return rank(a) < rank(b); });
  return out;
}

std::vector<float> to_hf_layout(const HfTensor& t, std::vector<float> data) {
  if (!t.transposed) return data;
  return transpose(data, t.hf_shape[1], t.hf_shape[0]);
}

std::vector<float> from_hf_layout(const HfTensor& t, std::vector<float> data) {
  if (!t.transposed) return data;
  return transpose(data, t.hf_shape[0], t.hf_shape[1]);
}

std::string model_difference(const ModelConfig& run, const ModelConfig& weights) {
  // A reward model starts from a language model's transformer; the other way round has no LM head.
  if (weights.score_head && !run.score_head)
    return "the weights are a reward model (a score head, no LM head); they load only with --task reward";
  std::string out;
  auto field = [&](const char* key, const auto& mine, const auto& theirs) {
    if (out.empty() && !(mine == theirs))
      out = str("model.", key, " = ", mine, " but the weights' model has ", theirs, "; set it to ", theirs);
  };
  field("arch", run.arch, weights.arch);
  field("n_layer", run.n_layer, weights.n_layer);
  field("n_embd", run.n_embd, weights.n_embd);
  field("n_head", run.n_head, weights.n_head);
  field("vocab_size", run.vocab_size, weights.vocab_size);
  field("norm_eps", run.norm_eps, weights.norm_eps);
  auto text = [](bool b) { return std::string(b ? "true" : "false"); };
  field("tie_embeddings", text(run.tied()), text(weights.tied()));
  // Llama's has no tensor, but it is the model's context length (max_position_embeddings).
  field("n_positions", run.positions(), weights.positions());
  if (!run.llama()) return out;
  field("n_kv_head", run.kv_heads(), weights.kv_heads());
  field("ffn_hidden_size", run.ffn(), weights.ffn());
  field("rope_theta", run.rope_theta, weights.rope_theta);
  field("qkv_bias", text(run.qkv_bias), text(weights.qkv_bias));
  return out;
}

HfImport::HfImport(const std::string& dir) : model_(read_hf_config(dir)), st_(dir), tensors_(hf_tensors(model_)) {
  const std::string arch = hf_architecture(model_);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const HfTensor& t = tensors_[i];
    index_[t.name] = i;
    std::string name = t.hf_name;
    // GPT2Model's files (and some GPT2LMHeadModel ones) name the tensors without 'transformer.'.
    if (!st_.contains(name) && !model_.llama()) name = name.substr(std::strlen("transformer."));
    if (!st_.contains(name))
      throw InputError(str(dir, ": tensor '", t.hf_name, "' is missing (config.json describes a ", arch, " with ",
                           model_.n_layer, " layers, which has it)"));
    const SafetensorsTensor& info = st_.info(name);
    const std::string& file = st_.file_of(name).path();
    if (info.shape != t.hf_shape)
      throw InputError(str(file, ": tensor '", name, "' has shape ", shape_text(info.shape), " but config.json's ",
                           arch, " needs ", shape_text(t.hf_shape)));
    if (!safetensors_dtype_is_float(info.dtype))
      throw InputError(str(file, ": tensor '", name, "' is ", safetensors_dtype_name(info.dtype),
                           "; only F32, F16 and BF16 weights convert"));
    file_names_.push_back(name);
  }
  std::vector<std::string> used = file_names_;
  std::sort(used.begin(), used.end());
  for (const std::string& name : st_.tensors()) {
    if (std::binary_search(used.begin(), used.end(), name) || is_known_buffer(name)) continue;
    // A tied head saved anyway is the embedding again; transformers ties it on load.
    if (model_.head_is_wte() && (name == "lm_head.weight") && st_.info(name).shape == std::vector<int64_t>{model_.vocab_size, model_.n_embd})
      continue;
    throw InputError(str(st_.file_of(name).path(), ": tensor '", name, "' is not part of a ", arch,
                         " as trident models it (config.json's settings, or a model trident cannot hold)"));
  }
}

void HfImport::read_shard(const HfTensor& t, const std::string& file_name, const ParamInfo& p, float* dst) const {
  if (!t.transposed && p.split_dim <= 0) {
    // Trident's rows along dim 0 are whole groups of Hugging Face rows, in the same order.
    const int64_t rows = t.shape[0];
    const int64_t hf_per_row = t.hf_shape[0] / rows;
    const int64_t begin = p.split_dim == 0 ? p.split_begin : 0;
    const int64_t end = p.split_dim == 0 ? std::min<int64_t>(rows, p.split_begin + p.split_size) : rows;
    if (end > begin) st_.read_rows_f32(file_name, begin * hf_per_row, end * hf_per_row, dst);
    return;
  }
  std::vector<float> hf(static_cast<size_t>(product(t.hf_shape)));
  st_.read_f32(file_name, hf.data());
  const std::vector<float> global = from_hf_layout(t, std::move(hf));
  for (size_t i = 0; i < p.numel; ++i) {
    const int64_t g = p.global_index(i);
    dst[i] = g < 0 ? 0.0f : global[static_cast<size_t>(g)];
  }
}

std::vector<float> HfImport::local_params(const ParamLayout& layout, bool* score_unread) const {
  std::vector<float> params(layout.total(), 0.0f);
  if (score_unread) *score_unread = false;
  for (const ParamInfo& p : layout.params()) {
    if (p.name == "score.weight" && !index_.count(p.name)) {
      TRIDENT_CHECK(score_unread != nullptr, "HfImport: a reward model's layout without score_unread");
      *score_unread = true;
      continue;
    }
    const size_t i = index_.at(p.name);
    read_shard(tensors_[i], file_names_[i], p, params.data() + p.offset);
  }
  return params;
}

CheckpointExport::CheckpointExport(const std::string& file) : file_(file) {
  info_ = read_checkpoint_info(file);
  model_ = parse_config_text(info_.config, file + " (stored config)").model;
  tensors_ = hf_tensors(model_);
  h5::Handle f(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid()) throw InputError(str("checkpoint ", file, ": cannot be opened as HDF5"));
  for (const HfTensor& t : tensors_) {
    const std::string name = "/model/" + t.name;
    if (H5Lexists(f.get(), "model", H5P_DEFAULT) <= 0 || H5Lexists(f.get(), name.c_str(), H5P_DEFAULT) <= 0)
      throw InputError(str("checkpoint ", file, ": dataset ", name, " is missing (its stored [model] needs it)"));
    h5::Handle dset(H5Dopen2(f.get(), name.c_str(), H5P_DEFAULT));
    if (!dset.valid() || h5::dataset_shape(dset.get()) != t.shape)
      throw InputError(str("checkpoint ", file, ": dataset ", name, " is not of shape ", shape_text(t.shape),
                           " as its stored [model] needs"));
  }
}

std::vector<float> CheckpointExport::read_hf(size_t i) const {
  const HfTensor& t = tensors_.at(i);
  const std::string name = "/model/" + t.name;
  h5::Handle f(H5Fopen(file_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  h5::Handle dset(f.valid() ? H5Dopen2(f.get(), name.c_str(), H5P_DEFAULT) : H5I_INVALID_HID);
  std::vector<float> data(static_cast<size_t>(product(t.shape)));
  uint64_t stored = 0;
  if (!dset.valid() || !h5::read_attr(dset.get(), "checksum", stored) ||
      H5Dread(dset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()) < 0)
    throw InputError(str("checkpoint ", file_, ": reading dataset ", name, " failed (truncated file?)"));
  // The checksum of the whole tensor, as the save summed it over its owners.
  ParamInfo whole;
  whole.name = t.name;
  whole.global_shape = t.shape;
  whole.numel = data.size();
  if (range_checksum(HostRange{&whole, 0, static_cast<int64_t>(data.size()), 0}, data.data()) != stored)
    throw InputError(str("checkpoint ", file_, ": dataset ", name, " does not match its checksum (corrupt file)"));
  return to_hf_layout(t, std::move(data));
}

HfSpecialTokens hf_tokenizer_ids(const TokenizerFiles& files, const std::string& where, int vocab_size) {
  const HfTokenizer tok(files, where);
  if (tok.vocab_size() > vocab_size)
    throw InputError(str(where, ": the tokenizer has ", tok.vocab_size(), " token ids, more than the model's vocab_size ",
                         vocab_size));
  return {tok.bos_id(), tok.eot_id()};
}

HfSpecialTokens carried_tokenizer_ids(const TokenizerFiles& files, const std::string& where, int vocab_size,
                                      std::string& note) {
  try {
    return hf_tokenizer_ids(files, where, vocab_size);
  } catch (const InputError& e) {
    note = str("note: kept as it is, but trident cannot use this tokenizer (", e.what(),
               "): no BOS/EOS ids for the Hugging Face configs, and generate needs --tokenizer");
    return {};
  }
}

}  // namespace trident
