// Collective checkpoint load into any layout: every rank reads the hyperslabs of its shard and
// optimizer range; checksums of the owned parts are summed over ranks and compared.
#include <algorithm>
#include <cmath>
#include <functional>
#include <filesystem>
#include <limits>
#include <set>

#include "checkpoint_plan.hpp"
#include "h5.hpp"
#include "trident/core/error.hpp"
#include "trident/io/checkpoint.hpp"
#include "trident/parallel/host_collectives.hpp"

namespace trident {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// Reads a range's non-padding elements into its host buffer through `packed` (reused across
// datasets); false on an I/O error.
bool read_range(hid_t dset, const HostRange& range, float* host_base, std::vector<float>& packed) {
  ShardBoxes sb = shard_boxes(*range.param, range.lo, range.hi);
  if (sb.elements == 0) return true;
  h5::Handle fspace(H5Dget_space(dset));
  H5Sselect_none(fspace.get());
  for (const Box& b : sb.global) {
    std::vector<hsize_t> start(b.start.begin(), b.start.end()), count(b.count.begin(), b.count.end());
    H5Sselect_hyperslab(fspace.get(), H5S_SELECT_OR, start.data(), nullptr, count.data(), nullptr);
  }
  hsize_t n = static_cast<hsize_t>(sb.elements);
  h5::Handle mspace(H5Screate_simple(1, &n, nullptr));
  packed.resize(n);
  if (H5Dread(dset, H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), H5P_DEFAULT, packed.data()) < 0) return false;
  unpack_range(range, sb, packed, host_base);
  return true;
}

// A directory or device given as a checkpoint would make the MPI-IO layer print pages of errors.
template <class Bad>
void require_regular_file(const std::string& file, const Bad& bad) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(file, ec);
  if (!std::filesystem::exists(st)) throw bad("no such file");
  if (!std::filesystem::is_regular_file(st)) throw bad("not a regular file (a checkpoint is a step_<n>.h5 file)");
}

// The tokenizer files a run kept (/tokenizer/<file name>, byte datasets); none where the group is
// absent. A declared size is checked against the file's before anything is allocated.
template <class Bad>
TokenizerFiles read_tokenizer(const std::string& file, hid_t f, const Bad& bad) {
  TokenizerFiles t;
  if (H5Lexists(f, "tokenizer", H5P_DEFAULT) <= 0) return t;
  for (const std::string& name : tokenizer_file_names()) {
    const std::string path = "tokenizer/" + name;
    if (H5Lexists(f, path.c_str(), H5P_DEFAULT) <= 0) continue;
    h5::Handle dset(H5Dopen2(f, path.c_str(), H5P_DEFAULT));
    const std::vector<int64_t> shape = dset.valid() ? h5::dataset_shape(dset.get()) : std::vector<int64_t>{};
    if (shape.size() != 1) throw bad(str("/", path, " is not a one-dimensional byte dataset"));
    std::error_code ec;
    if (shape[0] < 0 || static_cast<uint64_t>(shape[0]) > std::filesystem::file_size(file, ec) || ec)
      throw bad(str("/", path, " declares ", shape[0], " bytes, more than the file holds"));
    std::string text(static_cast<size_t>(shape[0]), '\0');
    if (!text.empty() && H5Dread(dset.get(), H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()) < 0)
      throw bad(str("reading /", path, " failed (truncated file?)"));
    t.files.emplace_back(name, std::move(text));
  }
  if (!t.empty() && !t.find("tokenizer.json")) throw bad("/tokenizer holds files but no tokenizer.json");
  return t;
}

template <class Bad>
CheckpointInfo read_info(const std::string& file, hid_t f, const Bad& bad) {
  CheckpointInfo info;
  int64_t version = 0;
  if (!h5::read_attr(f, "format_version", version)) throw bad("no format_version attribute: not a trident checkpoint");
  if (version > kCheckpointFormatVersion)
    throw bad(str("format version ", version, " is newer than this trident reads (", kCheckpointFormatVersion,
                  "); use a newer trident"));
  info.format_version = static_cast<int>(version);
  if (!h5::read_attr(f, "step", info.step) || !h5::read_attr(f, "consumed_samples", info.consumed_samples) ||
      !h5::read_attr(f, "seed", info.seed) || !h5::read_attr(f, "config", info.config) ||
      !h5::read_attr(f, "layout", info.layout))
    throw bad("missing one of the attributes step, consumed_samples, seed, config, layout");
  // The step sets the learning rate and the data position: a crafted one must not train.
  if (info.step < 0 || info.step > std::numeric_limits<int>::max())
    throw bad(str("step = ", info.step, " is not a count of optimizer steps (0 to 2^31-1)"));
  if (info.consumed_samples < info.step || (info.step == 0) != (info.consumed_samples == 0))
    throw bad(str("consumed_samples = ", info.consumed_samples, " does not fit step = ", info.step,
                  " (every step consumes at least one sample)"));
  if (H5Aexists(f, "kl_coef") > 0 && (!h5::read_attr(f, "kl_coef", info.kl_coef) || !(info.kl_coef >= 0)))
    throw bad("the attribute kl_coef is not a KL coefficient (a number >= 0)");
  const std::string name = std::filesystem::path(file).filename().string();
  if (name.rfind("step_", 0) == 0 && name != str("step_", info.step, ".h5"))
    throw bad(str("its name says ", name, " but its step attribute is ", info.step));
  return info;
}

// Every object of the file must be one of the model's datasets (under /model and each optimizer
// group), a tokenizer file (/tokenizer), or one of their groups, reached by a hard link: a checkpoint of a larger model must not
// load into a smaller one by reading only its first layers, and no link may lead out of the
// file. `skipped` names datasets that may be there unread. The other model's objects (task ppo's
// value model under /value, or for the value model everything outside it) are its own load's to
// check. Returns the first other object's path ("dataset /model/blocks.3.ln1.weight", "link /x"),
// or "".
std::string first_unread_object(hid_t f, const CheckpointPlan& plan, const std::set<std::string>& skipped) {
  struct Visit {
    std::set<std::string> datasets, groups;
    std::string first;
    bool value = false;   // the plan is the value model's
  } v;
  v.datasets = skipped;
  v.value = !plan.root.empty();
  for (CkptKind kind : kCkptKinds) {
    const std::string group = plan.group(kind);
    for (const LogicalTensor& t : plan.tensors) v.datasets.insert(group + "/" + t.name);
    v.groups.insert(group);
    for (size_t slash = group.find('/'); slash != std::string::npos; slash = group.find('/', slash + 1))
      v.groups.insert(group.substr(0, slash));
  }
  v.groups.insert("tokenizer");
  for (const std::string& name : tokenizer_file_names()) v.datasets.insert("tokenizer/" + name);
  auto visit = [](hid_t root, const char* name, const H5L_info_t* link, void* data) -> herr_t {
    Visit& v = *static_cast<Visit*>(data);
    const std::string path = name;
    const bool in_value = path == kValueGroup || path.rfind(str(kValueGroup, "/"), 0) == 0;
    if (in_value != v.value) return 0;
    if (link->type != H5L_TYPE_HARD) {
      v.first = str("link /", name);
      return 1;
    }
    h5::Handle obj(H5Oopen(root, name, H5P_DEFAULT));
    const H5I_type_t type = obj.valid() ? H5Iget_type(obj.get()) : H5I_BADID;
    if (type == H5I_DATASET && v.datasets.count(name)) return 0;
    if (type == H5I_GROUP && v.groups.count(name)) return 0;
    v.first = str(type == H5I_DATASET ? "dataset /" : "object /", name);
    return 1;
  };
  if (H5Lvisit(f, H5_INDEX_NAME, H5_ITER_NATIVE, visit, &v) < 0 && v.first.empty()) return "a group that cannot be read";
  return v.first;
}

}  // namespace

CheckpointInfo read_checkpoint_info(const std::string& file) {
  h5::silence_errors();
  auto bad = [&](const std::string& what) { return InputError(str("checkpoint ", file, ": ", what)); };
  require_regular_file(file, bad);
  h5::Handle f(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid()) throw bad("cannot be opened as HDF5 (truncated or not a checkpoint)");
  return read_info(file, f.get(), bad);
}

TokenizerFiles read_checkpoint_tokenizer(const std::string& file) {
  h5::silence_errors();
  auto bad = [&](const std::string& what) { return InputError(str("checkpoint ", file, ": ", what)); };
  require_regular_file(file, bad);
  h5::Handle f(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid()) throw bad("cannot be opened as HDF5 (truncated or not a checkpoint)");
  return read_tokenizer(file, f.get(), bad);
}

namespace {

// The checkpoint's fp32 data that one rank reads: its parameters and, when asked for, its
// optimizer state, in the layouts of the model's host buffers.
struct HostCheckpoint {
  CheckpointInfo info;
  std::vector<float> params;
  std::vector<float> states[3];   // master, exp_avg, exp_avg_sq; empty without the optimizer
  bool score_unread = false;      // a reward model's trunk from a language model's file
};

constexpr const char* kScoreWeight = "score.weight";

// Whether the path exists, each of its groups checked first (H5Lexists needs them).
bool has_dataset(hid_t f, const std::string& path) {
  for (size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1))
    if (H5Lexists(f, path.substr(0, slash).c_str(), H5P_DEFAULT) <= 0) return false;
  return H5Lexists(f, path.c_str(), H5P_DEFAULT) > 0;
}

// Reward models (a score head, no LM head) and language models load only into their own kind;
// with `trunk_ok` a reward model takes a language model's transformer and leaves its score head
// unread (init.from). Returns the plan without the score head in that case, else `plan`.
CheckpointPlan match_model_kind(hid_t f, const CheckpointPlan& plan, bool trunk_ok, bool* score_unread,
                                const std::function<InputError(const std::string&)>& bad) {
  const bool file_scores = has_dataset(f, str(plan.group(CkptKind::Model), "/", kScoreWeight));
  const bool model_scores = std::any_of(plan.tensors.begin(), plan.tensors.end(),
                                        [](const LogicalTensor& t) { return t.name == kScoreWeight; });
  *score_unread = false;
  if (file_scores == model_scores) return plan;
  if (file_scores)
    throw bad("holds a reward model (task = reward: a score head, no LM head); it loads only with --task reward");
  if (!trunk_ok)
    throw bad("holds a language model, not a reward model; a run with task = reward starts from it with "
              "--init.from (its transformer loads, score.weight starts fresh), it cannot resume or evaluate it");
  CheckpointPlan trunk = plan;
  trunk.tensors.erase(std::remove_if(trunk.tensors.begin(), trunk.tensors.end(),
                                     [](const LogicalTensor& t) { return t.name == kScoreWeight; }),
                      trunk.tensors.end());
  for (auto* ranges : {&trunk.model_need, &trunk.model_own, &trunk.optim_need, &trunk.optim_own})
    ranges->erase(kScoreWeight);
  *score_unread = true;
  return trunk;
}

// Collective: reads and checks everything (attributes, objects, shapes, checksums summed over the
// ranks); n_state = 0 reads the parameters only; `trunk_ok` as match_model_kind. Throws
// InputError on every rank; changes nothing.
HostCheckpoint read_verified(const std::string& file, const CheckpointPlan& model_plan, size_t n_params,
                             bool with_optim, size_t n_state, const ParallelGroups& g, bool trunk_ok = false) {
  h5::silence_errors();
  auto bad = [&](const std::string& what) { return InputError(str("checkpoint ", file, ": ", what)); };

  require_regular_file(file, bad);
  h5::Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
  H5Pset_fapl_mpio(fapl.get(), parallel_io_comm(g), MPI_INFO_NULL);
  h5::Handle f(H5Fopen(file.c_str(), H5F_ACC_RDONLY, fapl.get()));
  if (!f.valid()) throw bad("cannot be opened as HDF5 (truncated or not a checkpoint)");

  HostCheckpoint host;
  host.info = read_info(file, f.get(), bad);
  if (!model_plan.root.empty() && H5Lexists(f.get(), kValueGroup, H5P_DEFAULT) <= 0)
    throw bad(str("holds no value model (/", kValueGroup, "): it was not saved by a task ppo run; start a new ppo run "
                  "from its weights with --init.from (and rl.value_from) instead of resuming it"));
  const CheckpointPlan plan = match_model_kind(f.get(), model_plan, trunk_ok, &host.score_unread, bad);
  // A language model's own head (and its optimizer state), which a reward model's trunk does not read.
  std::set<std::string> skipped;
  for (CkptKind kind : kCkptKinds)
    if (host.score_unread) skipped.insert(str(plan.group(kind), "/lm_head"));
  const std::string unread = first_unread_object(f.get(), plan, skipped);
  if (!unread.empty())
    throw bad(str(unread, " is not part of the configured model (a checkpoint of more layers, or another "
                  "model?); the [model] settings must match the checkpoint"));
  if (with_optim && !has_dataset(f.get(), plan.root + "optim"))
    throw bad("holds weights only, no optimizer state (trident convert writes such files); start a new run from "
              "it with --init.from instead of resuming it");
  std::vector<float>& params = host.params;
  std::vector<float>* states = host.states;
  params.assign(n_params, 0.0f);
  for (int k = 0; k < 3; ++k) states[k].assign(with_optim ? n_state : 0, 0.0f);
  std::vector<std::string> names;
  std::vector<uint64_t> local_sums, stored;
  bool read_failed = false;
  std::string first_failed;
  std::vector<float> packed;
  for (CkptKind kind : kCkptKinds) {
    if (kind != CkptKind::Model && !with_optim) break;
    float* base = kind == CkptKind::Model ? params.data() : states[static_cast<int>(kind) - 1].data();
    const auto& need = kind == CkptKind::Model ? plan.model_need : plan.optim_need;
    const auto& own = kind == CkptKind::Model ? plan.model_own : plan.optim_own;
    for (const LogicalTensor& t : plan.tensors) {
      const std::string name = str("/", plan.group(kind), "/", t.name);
      if (!has_dataset(f.get(), name.substr(1))) throw bad("dataset " + name + " is missing");
      h5::Handle dset(H5Dopen2(f.get(), name.c_str(), H5P_DEFAULT));
      if (!dset.valid()) throw bad("dataset " + name + " cannot be opened");
      std::vector<int64_t> shape = h5::dataset_shape(dset.get());
      if (shape != t.shape)
        throw bad(str("dataset ", name, " has shape ", shape_str(shape), " but the configured model needs ",
                      shape_str(t.shape), "; the [model] settings must match the checkpoint"));
      uint64_t sum = 0;
      if (!h5::read_attr(dset.get(), "checksum", sum)) throw bad("dataset " + name + " has no checksum attribute");
      stored.push_back(sum);
      names.push_back(name);
      auto it = need.find(t.name);
      // Keep going after a failed read so that every rank reaches the same collectives below.
      if (it != need.end() && !read_range(dset.get(), it->second, base, packed)) {
        if (!read_failed) first_failed = name;
        read_failed = true;
      }
      auto o = own.find(t.name);
      local_sums.push_back(o == own.end() || read_failed ? 0 : range_checksum(o->second, base));
    }
  }
  const bool any_failed = !all_true(!read_failed, g);
  if (any_failed) throw bad(read_failed ? "reading " + first_failed + " failed (truncated file?)" : "a read failed on another rank (truncated file?)");
  std::vector<uint64_t> sums = local_sums;
  all_reduce(sums, HostReduce::Sum, g);
  for (size_t i = 0; i < sums.size(); ++i)
    if (sums[i] != stored[i]) throw bad("dataset " + names[i] + " does not match its checksum (corrupt file)");

  return host;
}

}  // namespace

CheckpointInfo read_checkpoint_params(const std::string& file, const GptStage& model, const ParallelGroups& g,
                                      std::vector<float>& params, bool* score_unread) {
  const CheckpointPlan plan = make_checkpoint_plan(model, nullptr, g);
  HostCheckpoint host = read_verified(file, plan, model.layout().total(), false, 0, g, score_unread != nullptr);
  params = std::move(host.params);
  if (score_unread) *score_unread = host.score_unread;
  return host.info;
}

CheckpointInfo load_checkpoint(const std::string& file, GptStage& model, Optimizer* opt, const ParallelGroups& g,
                               bool value_model) {
  CheckpointPlan plan = make_checkpoint_plan(model, opt, g);
  if (value_model) plan.root = str(kValueGroup, "/");
  HostCheckpoint host =
      read_verified(file, plan, model.layout().total(), opt != nullptr, opt ? opt->master().numel : 0, g);
  const std::vector<float>& params = host.params;
  // Everything verified: only now does the model change.
  Backend& be = model.backend();
  Buffer staging(be, params.size() * sizeof(float));
  TensorView f32 = staging.view(DType::F32).slice(0, params.size());
  be.copy_from_host(f32, params.data());
  model.assign_params(f32);
  if (opt) {
    TensorView views[3] = {opt->master(), opt->exp_avg(), opt->exp_avg_sq()};
    for (int k = 0; k < 3; ++k) {
      if (!views[k].numel) continue;
      if (opt->state_on_host())
        std::copy(host.states[k].begin(), host.states[k].end(), views[k].as<float>());
      else
        be.copy_from_host(views[k], host.states[k].data());
    }
  }
  be.synchronize();
  return host.info;
}

}  // namespace trident
