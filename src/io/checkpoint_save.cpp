// Collective checkpoint save: temporary file, one dataset per logical tensor and kind, each
// rank writing its owned hyperslabs; then rename, `latest`, pruning.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "checkpoint_plan.hpp"
#include "h5.hpp"
#include "trident/core/error.hpp"
#include "trident/core/trace.hpp"
#include "trident/io/checkpoint.hpp"

namespace trident {
namespace {

namespace fs = std::filesystem;

void h5_require(bool ok, const std::string& what, const std::string& path) {
  if (!ok) TRIDENT_FATAL(str("checkpoint save: ", what, " failed for ", path, " (disk full or not writable?)"));
}

// What the file holds, in host memory: fp32 parameters and the optimizer state. The CPU backend's
// buffers are used in place; device buffers are copied.
struct HostState {
  std::vector<float> copies[4];
  const float* data[4] = {};
  const float* of(CkptKind k) const { return data[static_cast<int>(k)]; }
};

HostState host_state(const GptStage& model, const Optimizer& opt) {
  Backend& be = model.backend();
  HostState h;
  const TensorView views[4] = {model.params(), opt.master(), opt.exp_avg(), opt.exp_avg_sq()};
  for (int k = 0; k < 4; ++k) {
    const TensorView& v = views[k];
    if (!be.is_device() && v.dtype == DType::F32) {
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

// Test hook (TRIDENT_TEST_DIE_IN_SAVE="rank:step"): that rank dies like kill -9 halfway through
// writing, so tests can check that the previous checkpoint survives.
bool die_in_save(int rank, int64_t step) {
  const char* v = std::getenv("TRIDENT_TEST_DIE_IN_SAVE");
  int r = -1;
  long s = -1;
  return v && std::sscanf(v, "%d:%ld", &r, &s) == 2 && r == rank && s == step;
}

void fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// Rank 0: keep the newest `keep` step_<n>.h5 files; remove leftovers of interrupted saves.
void prune(const std::string& dir, int keep) {
  std::vector<std::pair<long, fs::path>> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    long n = -1;
    char tail[16] = {0};
    if (std::sscanf(name.c_str(), "step_%ld.h5%15s", &n, tail) >= 1) {
      if (std::string(tail) == ".tmp") fs::remove(e.path());
      else if (tail[0] == 0) found.push_back({n, e.path()});
    }
  }
  std::sort(found.rbegin(), found.rend());
  for (size_t i = static_cast<size_t>(keep); i < found.size(); ++i) fs::remove(found[i].second);
}

}  // namespace

SaveResult save_checkpoint(const std::string& dir, int keep, const CheckpointInfo& info, const GptStage& model,
                           const Optimizer& opt, const ParallelGroups& g) {
  TraceRange range("checkpoint save");
  auto t0 = std::chrono::steady_clock::now();
  h5::silence_errors();
  const HostState host = host_state(model, opt);
  const CheckpointPlan plan = make_checkpoint_plan(model, &opt, g);
  SaveResult res;
  res.path = str(dir, "/step_", info.step, ".h5");
  const std::string tmp = res.path + ".tmp";
  {
    h5::Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
    H5Pset_fapl_mpio(fapl.get(), g.mpi.world, MPI_INFO_NULL);
    h5::Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()));
    h5_require(file.valid(), "creating the file", tmp);
    h5::write_attr(file.get(), "format_version", static_cast<int64_t>(info.format_version));
    h5::write_attr(file.get(), "step", info.step);
    h5::write_attr(file.get(), "consumed_samples", info.consumed_samples);
    h5::write_attr(file.get(), "seed", info.seed);
    h5::write_attr(file.get(), "rng", std::string("stateless: initialisation and data order are functions of seed"));
    h5::write_attr(file.get(), "config", info.config);
    h5::write_attr(file.get(), "layout", info.layout);
    h5::Handle lcpl(H5Pcreate(H5P_LINK_CREATE));
    H5Pset_create_intermediate_group(lcpl.get(), 1);
    // Every element is written once by its owner: no fill values (HDF5 would write the whole
    // dataset twice, first with zeros).
    h5::Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
    h5::Handle dxpl(H5Pcreate(H5P_DATASET_XFER));
    H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_INDEPENDENT);

    std::vector<float> packed;   // reused: one allocation for all datasets
    int written = 0;
    const int total = static_cast<int>(plan.tensors.size()) * 4;
    for (CkptKind kind : kCkptKinds) {
      const auto& owned = kind == CkptKind::Model ? plan.model_own : plan.optim_own;
      const float* base = host.of(kind);
      for (const LogicalTensor& t : plan.tensors) {
        if (written++ == total / 2 && die_in_save(g.rank, info.step)) std::_Exit(9);
        std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
        h5::Handle fspace(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
        const std::string name = str("/", ckpt_group(kind), "/", t.name);
        h5::Handle dset(H5Dcreate2(file.get(), name.c_str(), H5T_IEEE_F32LE, fspace.get(), lcpl.get(), dcpl.get(),
                                   H5P_DEFAULT));
        h5_require(dset.valid(), "creating dataset " + name, tmp);
        packed.clear();
        uint64_t sum = 0;
        hsize_t n_mem = 1;
        h5::Handle mspace(H5Screate_simple(1, &n_mem, nullptr));
        H5Sselect_none(fspace.get());
        H5Sselect_none(mspace.get());
        auto it = owned.find(t.name);
        if (it != owned.end()) {
          const Piece& piece = it->second;
          ShardBoxes sb = shard_boxes(*piece.param, piece.lo, piece.hi);
          pack_piece(piece, sb, base, packed);
          sum = piece_checksum(piece, base);
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
        uint64_t total_sum = 0;
        MPI_Allreduce(&sum, &total_sum, 1, MPI_UINT64_T, MPI_SUM, g.mpi.world);
        h5::write_attr(dset.get(), "checksum", total_sum);
      }
    }
    h5_require(H5Fflush(file.get(), H5F_SCOPE_GLOBAL) >= 0, "flushing", tmp);
  }
  MPI_Barrier(g.mpi.world);
  if (g.rank == 0) {
    fsync_path(tmp);
    h5_require(std::rename(tmp.c_str(), res.path.c_str()) == 0, "renaming to " + res.path, tmp);
    fsync_path(dir);
    const std::string latest = dir + "/latest", latest_tmp = latest + ".tmp";
    std::ofstream(latest_tmp) << fs::path(res.path).filename().string() << "\n";
    fsync_path(latest_tmp);
    h5_require(std::rename(latest_tmp.c_str(), latest.c_str()) == 0, "updating", latest);
    fsync_path(dir);
    prune(dir, keep);
    res.bytes = static_cast<double>(fs::file_size(res.path));
  }
  MPI_Bcast(&res.bytes, 1, MPI_DOUBLE, 0, g.mpi.world);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace trident
