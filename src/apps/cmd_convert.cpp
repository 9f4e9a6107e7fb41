// `trident convert`: a Hugging Face model directory into a trident checkpoint (--from-hf), or a
// checkpoint into a Hugging Face directory (--to-hf); on one rank or many, each converting its share.
#include <boost/program_options.hpp>
#include <filesystem>

#include "commands.hpp"
#include "runtime.hpp"
#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/io/checkpoint.hpp"
#include "trident/io/hf_convert.hpp"
#include "trident/io/safetensors.hpp"
#include "trident/parallel/collective_error.hpp"
#include "trident/parallel/host_collectives.hpp"
#include "trident/train/trainer.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace trident {
namespace {

struct ConvertOptions {
  std::string from_hf, to_hf, out, dtype = "bf16", tokenizer;
  uint64_t shard_bytes = kHfMaxShardBytes;
  bool overwrite = false;
};

// The layout of a conversion on `world` ranks: the widest tensor parallelism the model allows,
// then pipeline stages, then data-parallel replicas (DP rank 0 alone writes the weights). A reward
// model's micro-batch holds a pair, as its task requires.
void conversion_layout(RunConfig& cfg, int world) {
  const ModelConfig& m = cfg.model;
  int tp = world;
  for (; tp > 1; --tp)
    if (world % tp == 0 && m.n_head % tp == 0 && (m.kv_heads() % tp == 0 || tp % m.kv_heads() == 0) &&
        m.ffn() % tp == 0)
      break;
  int pp = world / tp;
  for (; pp > 1; --pp)
    if ((world / tp) % pp == 0 && m.n_layer % pp == 0) break;
  ParallelConfig& p = cfg.parallel;
  p.tp = tp;
  p.pp = pp;
  p.dp = world / (tp * pp);
  p.zero = 0;
  p.schedule = "gpipe";
  p.auto_layout = false;
  cfg.train.micro_batch_size = m.score_head ? 2 : 1;
  cfg.train.global_batch_size = p.dp * cfg.train.micro_batch_size;
}

// --out of --from-hf: a file that does not exist yet, or --overwrite.
void check_checkpoint_out(const ConvertOptions& o) {
  const std::string name = fs::path(o.out).filename().string();
  if (name.rfind("step_", 0) == 0 && name != "step_0.h5")
    throw InputError(str("--out ", o.out, ": a checkpoint named step_<n>.h5 must be step_0.h5 (the converted "
                         "weights are at step 0); choose another name"));
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(o.out, ec);
  if (fs::is_directory(st)) throw InputError(str("--out ", o.out, ": is a directory; name the checkpoint file"));
  if (fs::exists(st) && !o.overwrite)
    throw InputError(str("--out ", o.out, ": exists; pass --overwrite to replace it"));
  const fs::path dir = fs::path(o.out).parent_path();
  if (!dir.empty() && !fs::is_directory(dir)) throw InputError(str("--out ", o.out, ": no directory ", dir.string()));
}

// --out of --to-hf: a new or empty directory, or --overwrite (files of the earlier model that a
// loader would take for this one are then removed).
void check_hf_out(const ConvertOptions& o) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(o.out, ec))) return;
  if (!fs::is_directory(o.out)) throw InputError(str("--out ", o.out, ": exists and is not a directory"));
  if (!fs::is_empty(o.out, ec) && !o.overwrite)
    throw InputError(str("--out ", o.out, ": is not empty; pass --overwrite to replace the model in it"));
}

SafetensorsDtype export_dtype(const std::string& dtype, std::string* torch_dtype) {
  if (dtype == "f32") return *torch_dtype = "float32", SafetensorsDtype::F32;
  if (dtype == "bf16") return *torch_dtype = "bfloat16", SafetensorsDtype::BF16;
  if (dtype == "f16") return *torch_dtype = "float16", SafetensorsDtype::F16;
  throw InputError(str("--dtype ", quoted_text(dtype), ": must be bf16, f32 or f16"));
}

int convert_from_hf(const ConvertOptions& o, const RunConfig& cli) {
  const int world = comm_size(MPI_COMM_WORLD);
  std::unique_ptr<HfImport> hf;
  RunConfig cfg = cli;
  collective_check(MPI_COMM_WORLD, [&] {
    check_checkpoint_out(o);
    hf = std::make_unique<HfImport>(o.from_hf);
    cfg.model = hf->model();
    // The stored task says what the weights are: a reward model's checkpoint has task = reward.
    cfg.task = cfg.model.score_head ? "reward" : "pretrain";
    cfg.backend = "cpu";
    conversion_layout(cfg, world);
    validate_run_config(cfg, world);
  });
  Runtime rt = make_runtime(cfg, MPI_COMM_WORLD);
  const ParallelGroups& g = rt.groups;
  const ParallelConfig& p = cfg.parallel;
  const ParamLayout layout(cfg.model, StageInfo::of(cfg.model, g.coord.pp, p.pp), p.tp, g.coord.tp, p.dp,
                           bucket_elements(p));
  std::vector<float> params;
  CheckpointInfo info;
  std::string tokenizer_note;
  // Only DP rank 0 writes parameters (the checkpoint's ownership rule): the others read nothing.
  // The directory's tokenizer, where it has one, goes into the checkpoint for the runs after it.
  collective_check(MPI_COMM_WORLD, [&] {
    params = g.coord.dp == 0 ? hf->local_params(layout) : std::vector<float>(layout.total(), 0.0f);
    if (std::filesystem::exists(std::filesystem::path(o.from_hf) / "tokenizer.json")) {
      info.tokenizer = read_tokenizer_files(o.from_hf);
      carried_tokenizer_ids(info.tokenizer, o.from_hf, cfg.model.vocab_size, tokenizer_note);
    }
  });
  info.seed = cfg.train.seed;
  cfg.backend = cli.backend;
  info.config = to_ini(cfg);
  info.layout = str("converted from ", o.from_hf, " (", hf_architecture(cfg.model), ") with tp=", p.tp, " pp=", p.pp,
                    " dp=", p.dp);
  abort_job_on_error("convert", [&] {
    save_weights_checkpoint(o.out, info, cfg.model, layout, params.data(), g);
    return 0;
  });
  RunConfig model_only;
  model_only.model = cfg.model;
  std::string section = to_ini(model_only);
  section = section.substr(section.find("[model]"));
  section = section.substr(0, section.find("\n[", 1));
  section.erase(section.find_last_not_of('\n') + 1);
  log_info(str("convert: wrote ", o.out, " (", hf_architecture(cfg.model), ", step 0, weights only) from ", o.from_hf,
               " on ", world, " ranks. Its model, for the [model] section of a run that starts from it with "
               "--init.from", cfg.model.score_head ? " (a reward model: the run needs --task reward)" : "", ":\n",
               section));
  if (!tokenizer_note.empty()) log_info(tokenizer_note);
  return 0;
}

int convert_to_hf(const ConvertOptions& o) {
  const int world = comm_size(MPI_COMM_WORLD), rank = comm_rank(MPI_COMM_WORLD);
  std::string torch_dtype;
  const SafetensorsDtype dtype = export_dtype(o.dtype, &torch_dtype);
  std::unique_ptr<CheckpointExport> ck;
  HfSpecialTokens tokens;
  TokenizerFiles tokenizer;
  std::string tokenizer_note;
  collective_check(MPI_COMM_WORLD, [&] {
    ck = std::make_unique<CheckpointExport>(o.to_hf);
    check_hf_out(o);
    // --tokenizer (which must load), else the one the checkpoint keeps (the run's), if any.
    if (!o.tokenizer.empty()) {
      tokenizer = read_tokenizer_files(o.tokenizer);
      tokens = hf_tokenizer_ids(tokenizer, o.tokenizer, ck->model().vocab_size);
    } else if (!(tokenizer = read_checkpoint_tokenizer(o.to_hf)).empty()) {
      tokens = carried_tokenizer_ids(tokenizer, o.to_hf, ck->model().vocab_size, tokenizer_note);
    }
    if (rank == 0) {
      std::error_code ec;
      fs::create_directories(o.out, ec);
      if (!fs::is_directory(o.out)) throw InputError(str("--out ", o.out, ": cannot create it (", ec.message(), ")"));
    }
  });
  const std::vector<HfTensor>& tensors = ck->tensors();
  std::vector<SafetensorsEntry> entries;
  for (const HfTensor& t : tensors) entries.push_back({t.hf_name, dtype, t.hf_shape, nullptr});
  const std::vector<std::vector<size_t>> shards = plan_shards(entries, o.shard_bytes);
  // Shard s is written by rank s % world; every rank describes every tensor (the plan's input).
  std::vector<std::vector<float>> data(tensors.size());
  SafetensorsShardedWriter writer(o.shard_bytes);
  writer.set_metadata("format", "pt");
  collective_check(MPI_COMM_WORLD, [&] {
    for (size_t s = static_cast<size_t>(rank); s < shards.size(); s += static_cast<size_t>(world))
      for (size_t i : shards[s]) data[i] = ck->read_hf(i);
    for (size_t i = 0; i < tensors.size(); ++i) {
      SafetensorsEntry e = entries[i];
      e.data = data[i].empty() ? nullptr : data[i].data();
      writer.add(e);
    }
    for (size_t s = static_cast<size_t>(rank); s < shards.size(); s += static_cast<size_t>(world))
      writer.write_shard(o.out, s);
  });
  // Every shard is in place: the index, the tokenizer and the configs, written last.
  collective_check(MPI_COMM_WORLD, [&] {
    if (rank != 0) return;
    writer.write_index(o.out);
    write_tokenizer_files(tokenizer, o.out);
    // A reward model does not generate: save_pretrained writes no generation config for it.
    if (!ck->model().score_head)
      write_file_atomically((fs::path(o.out) / "generation_config.json").string(), hf_generation_config_json(tokens));
    write_file_atomically((fs::path(o.out) / "config.json").string(),
                          hf_config_json(ck->model(), torch_dtype, tokens));
  });
  log_info(str("convert: wrote ", o.out, " (", hf_architecture(ck->model()), ", ", torch_dtype, ", ", shards.size(),
               shards.size() == 1 ? " file" : " shards", tokenizer.empty() ? ", no tokenizer" : ", with the tokenizer",
               ") from ", o.to_hf, " (step ", ck->info().step, ") on ", world, " ranks"));
  if (!tokenizer_note.empty()) log_info(tokenizer_note);
  return 0;
}

}  // namespace

int cmd_convert(const Args& args) {
  ConvertOptions o;
  po::options_description extra("Conversion");
  extra.add_options()("from-hf", po::value(&o.from_hf), "Hugging Face model directory (config.json + safetensors) to read")(
      "to-hf", po::value(&o.to_hf), "trident checkpoint (.h5) to export")(
      "out", po::value(&o.out), "--from-hf: the checkpoint file to write; --to-hf: the directory to write")(
      "dtype", po::value(&o.dtype)->default_value("bf16"), "--to-hf: bf16, f32 or f16 tensors")(
      "tokenizer", po::value(&o.tokenizer),
      "--to-hf: the tokenizer.json (or its directory) to copy beside the weights, in place of the one the "
      "checkpoint keeps (the run's data.tokenizer or its Hugging Face source's); its BOS/EOS ids go into "
      "config.json and generation_config.json")(
      "shard-bytes", po::value(&o.shard_bytes)->default_value(kHfMaxShardBytes),
      "--to-hf: most tensor bytes per safetensors shard (Hugging Face's 5 GB)")(
      "overwrite", po::bool_switch(&o.overwrite), "replace an existing --out");
  ParsedArgs parsed = parse_args(args, &extra);
  if (parsed.help) {
    log_info("usage: trident convert --from-hf DIR --out CKPT.h5 [--overwrite]\n"
             "       trident convert --to-hf CKPT.h5 --out DIR [--dtype bf16|f32|f16] [--tokenizer PATH] [--overwrite]\n"
             "Hugging Face GPT2LMHeadModel, LlamaForCausalLM and Qwen2ForCausalLM to and from trident checkpoints,\n"
             "and reward models (task = reward) as their *ForSequenceClassification (one label);\n"
             "under mpirun each rank converts its share. docs/HF_INTERCHANGE.md has the rules.\n\n" +
             run_options_help(&extra, {"parallel.timeout_s"}));
    return 0;
  }
  if (o.from_hf.empty() == o.to_hf.empty()) throw InputError("give one of --from-hf DIR or --to-hf CKPT.h5");
  if (o.out.empty()) throw InputError("--out is required (the checkpoint file, or the Hugging Face directory)");
  if (o.shard_bytes == 0) throw InputError("--shard-bytes 0: must be at least 1");
  if (!o.from_hf.empty() && !o.tokenizer.empty())
    throw InputError("--tokenizer is for --to-hf (--from-hf keeps the directory's own tokenizer.json, if it has one)");
  return o.from_hf.empty() ? convert_to_hf(o) : convert_from_hf(o, parsed.cfg);
}

}  // namespace trident
