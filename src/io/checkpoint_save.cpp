// Collective checkpoint save: temporary file, one dataset per logical tensor and kind, each
// rank writing its owned hyperslabs; then rename, `latest`, pruning (checkpoint_files.cpp).
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "checkpoint_plan.hpp"
#include "h5.hpp"
#include "trident/core/error.hpp"
#include "trident/core/fault_point.hpp"
#include "trident/core/trace.hpp"
#include "trident/io/checkpoint.hpp"

namespace trident {
namespace {

namespace fs = std::filesystem;

void h5_require(bool ok, const std::string& what, const std::string& path) {
  if (!ok) TRIDENT_FATAL(str("checkpoint save: ", what, " failed for ", path, " (disk full or not writable?)"));
}

// What the file holds, in host memory: fp32 parameters and the optimizer state. Host buffers (the
// CPU backend's, an offloaded optimizer's state) are used in place; device buffers are copied.
struct HostState {
  std::vector<float> copies[4];
  const float* data[4] = {};
  const float* of(CkptKind k) const { return data[static_cast<int>(k)]; }
};

// The plan of a save: under ZeRO-3 (no whole parameters) the model written from the shards.
CheckpointPlan save_plan(const GptStage& model, const Optimizer& opt, const ParallelGroups& g) {
  return make_checkpoint_plan(model.config(), model.layout(), &opt, g, model.params().empty());
}

HostState host_state(const GptStage& model, const Optimizer& opt) {
  Backend& be = model.backend();
  HostState h;
  // Under ZeRO-3 the model's parameters are this rank's shards (see make_checkpoint_plan).
  const TensorView params = model.params().empty() ? opt.updated_params() : model.params();
  const TensorView views[4] = {params, opt.master(), opt.exp_avg(), opt.exp_avg_sq()};
  for (int k = 0; k < 4; ++k) {
    const TensorView& v = views[k];
    const bool on_host = k == 0 ? !be.is_device() : opt.state_on_host();
    if (on_host && v.dtype == DType::F32) {
      h.data[k] = v.as<float>();
      continue;
    }
    h.copies[k].resize(v.numel);
    if (v.dtype == DType::F32) {
      if (v.numel) be.copy_to_host(h.copies[k].data(), v);
    } else {
      Buffer staging(be, v.numel * sizeof(float));
      TensorView f32 = staging.view(DType::F32).slice(0, v.numel);
      be.copy(f32, v);
      be.copy_to_host(h.copies[k].data(), f32);
    }
    h.data[k] = h.copies[k].data();
  }
  return h;
}

// The run's tokenizer files as /tokenizer/<file name>, one byte dataset each: created by every
// rank (HDF5 creates collectively), written by rank 0 alone.
void write_tokenizer(hid_t file, const TokenizerFiles& t, bool writer, const std::string& tmp) {
  if (t.empty()) return;
  h5::Handle group(H5Gcreate2(file, "tokenizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  h5_require(group.valid(), "creating the group /tokenizer", tmp);
  for (const auto& [name, text] : t.files) {
    const hsize_t n = text.size();
    h5::Handle space(H5Screate_simple(1, &n, nullptr));
    h5::Handle dset(H5Dcreate2(group.get(), name.c_str(), H5T_STD_U8LE, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                               H5P_DEFAULT));
    h5_require(dset.valid(), "creating /tokenizer/" + name, tmp);
    if (writer && n > 0)
      h5_require(H5Dwrite(dset.get(), H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()) >= 0,
                 "writing /tokenizer/" + name, tmp);
  }
}

// Writes `tmp` collectively: created exclusively (a leftover of an interrupted save, or a link
// placed there, is removed first; unlink never follows a link, and O_EXCL fails on a link put back
// in between instead of writing through it), the attributes, then the datasets of the first
// n_kinds kinds, each rank writing the ranges it owns of host.of(kind). Returns once every rank
// has closed the file.
// A model's plan (its root group) and its data.
struct PlannedModel {
  CheckpointPlan plan;
  HostState host;
};

void write_checkpoint_file(const std::string& tmp, const CheckpointInfo& info, const std::vector<PlannedModel>& models,
                           size_t n_kinds, const ParallelGroups& g, const std::string& saving) {
  if (g.rank == 0 && ::unlink(tmp.c_str()) != 0 && errno != ENOENT)
    h5_require(false, str("removing the stale file (", std::strerror(errno), ")"), tmp);
  // Every rank meets under parallel.timeout_s before each collective HDF5 call, so that a rank
  // that stalls makes the others abort naming it instead of waiting inside HDF5 for ever.
  g.control->barrier(saving + " (start)");
  {
    h5::Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
    H5Pset_fapl_mpio(fapl.get(), parallel_io_comm(g), MPI_INFO_NULL);
    h5::Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.get()));
    h5_require(file.valid(), "creating the file", tmp);
    h5::write_attr(file.get(), "format_version", static_cast<int64_t>(info.format_version));
    h5::write_attr(file.get(), "step", info.step);
    h5::write_attr(file.get(), "consumed_samples", info.consumed_samples);
    h5::write_attr(file.get(), "seed", info.seed);
    h5::write_attr(file.get(), "rng", std::string("stateless: initialisation and data order are functions of seed"));
    h5::write_attr(file.get(), "config", info.config);
    h5::write_attr(file.get(), "layout", info.layout);
    if (!std::isnan(info.kl_coef)) h5::write_attr(file.get(), "kl_coef", info.kl_coef);
    write_tokenizer(file.get(), info.tokenizer, g.rank == 0, tmp);
    h5::Handle lcpl(H5Pcreate(H5P_LINK_CREATE));
    H5Pset_create_intermediate_group(lcpl.get(), 1);
    // Every element is written once by its owner: no fill values (HDF5 would write the whole
    // dataset twice, first with zeros).
    h5::Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
    h5::Handle dxpl(H5Pcreate(H5P_DATASET_XFER));
    H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_INDEPENDENT);

    std::vector<float> packed;   // reused: one allocation for all datasets
    int written = 0, total = 0;
    for (const PlannedModel& m : models) total += static_cast<int>(m.plan.tensors.size() * n_kinds);
    for (size_t k = 0; k < n_kinds * models.size(); ++k) {
      const CheckpointPlan& plan = models[k / n_kinds].plan;
      const CkptKind kind = kCkptKinds[k % n_kinds];
      const auto& owned = kind == CkptKind::Model ? plan.model_own : plan.optim_own;
      const float* base = models[k / n_kinds].host.of(kind);
      for (const LogicalTensor& t : plan.tensors) {
        if (written++ == total / 2) fault_point(FaultPoint::CheckpointWrite, g.rank, info.step);
        const std::string name = str("/", plan.group(kind), "/", t.name);
        auto it = owned.find(t.name);
        // Summing the checksum is this dataset's meeting point, ahead of its collective creation.
        const uint64_t total_sum = g.control->sum(it != owned.end() ? range_checksum(it->second, base) : 0,
                                                  saving + " (checksum of " + name + ")");
        std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
        h5::Handle fspace(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
        h5::Handle dset(H5Dcreate2(file.get(), name.c_str(), H5T_IEEE_F32LE, fspace.get(), lcpl.get(), dcpl.get(),
                                   H5P_DEFAULT));
        h5_require(dset.valid(), "creating dataset " + name, tmp);
        packed.clear();
        hsize_t n_mem = 1;
        h5::Handle mspace(H5Screate_simple(1, &n_mem, nullptr));
        H5Sselect_none(fspace.get());
        H5Sselect_none(mspace.get());
        if (it != owned.end()) {
          const HostRange& range = it->second;
          ShardBoxes sb = shard_boxes(*range.param, range.lo, range.hi);
          pack_range(range, sb, base, packed);
          for (const Box& b : sb.global) {
            std::vector<hsize_t> start(b.start.begin(), b.start.end()), count(b.count.begin(), b.count.end());
            H5Sselect_hyperslab(fspace.get(), H5S_SELECT_OR, start.data(), nullptr, count.data(), nullptr);
          }
          if (!packed.empty()) {
            n_mem = packed.size();
            mspace = h5::Handle(H5Screate_simple(1, &n_mem, nullptr));
          }
        }
        float dummy = 0;
        h5_require(H5Dwrite(dset.get(), H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), dxpl.get(),
                            packed.empty() ? &dummy : packed.data()) >= 0,
                   "writing " + name, tmp);
        h5::write_attr(dset.get(), "checksum", total_sum);
      }
    }
    h5_require(H5Fflush(file.get(), H5F_SCOPE_GLOBAL) >= 0, "flushing", tmp);
  }
  g.control->barrier(saving + " (file closed)");
}

}  // namespace

SaveResult save_checkpoint(const CheckpointConfig& c, const CheckpointInfo& info, const GptStage& model,
                           const Optimizer& opt, const ParallelGroups& g, const ValueState& value) {
  TraceRange range("checkpoint save");
  auto t0 = std::chrono::steady_clock::now();
  h5::silence_errors();
  std::vector<PlannedModel> models;
  models.push_back({save_plan(model, opt, g), host_state(model, opt)});
  if (value.model) {
    TRIDENT_CHECK(value.opt != nullptr, "save_checkpoint: the value model's optimizer is not given");
    models.push_back({save_plan(*value.model, *value.opt, g), host_state(*value.model, *value.opt)});
    models.back().plan.root = str(kValueGroup, "/");
  }
  SaveResult res;
  const std::string name = str("step_", info.step, ".h5");
  res.path = c.dir + "/" + name;
  const std::string tmp = res.path + ".tmp";
  const std::string saving = "checkpoint save of " + res.path;
  write_checkpoint_file(tmp, info, models, std::size(kCkptKinds), g, saving);
  if (g.rank == 0) {
    h5_require(fsync_path(tmp), "syncing", tmp);
    h5_require(std::rename(tmp.c_str(), res.path.c_str()) == 0, "renaming to " + res.path, tmp);
    h5_require(fsync_path(c.dir), "syncing the directory", c.dir);
    const std::string latest_error = write_latest(c.dir, name);
    if (!latest_error.empty())
      TRIDENT_FATAL(str("checkpoint save: ", res.path, " was written but 'latest' was not updated: ", latest_error));
    prune_checkpoints(c, info.step);
    std::error_code ec;
    res.bytes = static_cast<double>(fs::file_size(res.path, ec));
  }
  res.bytes = static_cast<double>(
      g.control->broadcast_from_0(static_cast<uint64_t>(res.bytes), saving + " (renamed into place)"));
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

void save_weights_checkpoint(const std::string& path, const CheckpointInfo& info, const ModelConfig& m,
                             const ParamLayout& layout, const float* params, const ParallelGroups& g) {
  h5::silence_errors();
  std::vector<PlannedModel> models(1);
  models[0].host.data[static_cast<int>(CkptKind::Model)] = params;
  models[0].plan = make_checkpoint_plan(m, layout, nullptr, g);
  const std::string tmp = path + ".tmp";
  const std::string saving = "writing " + path;
  write_checkpoint_file(tmp, info, models, 1, g, saving);
  if (g.rank == 0) {
    h5_require(fsync_path(tmp), "syncing", tmp);
    h5_require(std::rename(tmp.c_str(), path.c_str()) == 0, "renaming to " + path, tmp);
    const fs::path dir = fs::path(path).parent_path();
    h5_require(fsync_path(dir.empty() ? "." : dir.string()), "syncing the directory", dir.string());
  }
  g.control->barrier(saving + " (renamed into place)");
}

}  // namespace trident
