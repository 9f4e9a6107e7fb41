// Checkpoint directory handling (resume resolution, writability) and `trident inspect` output.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "checkpoint_plan.hpp"
#include "h5.hpp"
#include "trident/core/error.hpp"
#include "trident/io/checkpoint.hpp"

namespace trident {

namespace fs = std::filesystem;

std::string resolve_resume(const CheckpointConfig& c) {
  if (c.resume == "none") return "";
  if (c.resume == "auto") {
    if (c.dir.empty()) return "";
    std::ifstream latest(c.dir + "/latest");
    std::string name;
    if (!(latest >> name)) return "";
    std::string path = c.dir + "/" + name;
    if (!fs::exists(path))
      throw InputError(str("checkpoint.resume = auto: ", c.dir, "/latest names ", name,
                           " which does not exist; fix 'latest' or pass checkpoint.resume = none"));
    return path;
  }
  if (!fs::exists(c.resume))
    throw InputError(str("checkpoint.resume = ", c.resume, ": no such file (use auto, none or a checkpoint path)"));
  return c.resume;
}

void prepare_checkpoint_dir(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw InputError(str("checkpoint.dir = ", dir, ": cannot create the directory (", ec.message(), ")"));
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw InputError(str("checkpoint.dir = ", dir, ": not writable by this user"));
}

std::string describe_checkpoint(const std::string& file) {
  h5::silence_errors();
  h5::Handle f(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid()) throw InputError(str("checkpoint ", file, ": cannot be opened as HDF5"));
  int64_t version = 0, step = 0, consumed = 0;
  uint64_t seed = 0;
  std::string config, layout;
  if (!h5::read_attr(f.get(), "format_version", version))
    throw InputError(str("checkpoint ", file, ": no format_version attribute: not a trident checkpoint"));
  h5::read_attr(f.get(), "step", step);
  h5::read_attr(f.get(), "consumed_samples", consumed);
  h5::read_attr(f.get(), "seed", seed);
  h5::read_attr(f.get(), "config", config);
  h5::read_attr(f.get(), "layout", layout);
  std::ostringstream os;
  os << "checkpoint " << file << "\n  format version " << version << ", step " << step << ", consumed samples "
     << consumed << ", seed " << seed << "\n  saved with layout: " << layout << "\n\ntensors (fp32, global shapes):\n";
  char line[512];
  for (CkptKind kind : kCkptKinds) {
    h5::Handle grp(H5Gopen2(f.get(), ckpt_group(kind), H5P_DEFAULT));
    if (!grp.valid()) continue;
    hsize_t n = 0;
    H5Gget_num_objs(grp.get(), &n);
    double total = 0;
    size_t elements = 0;
    for (hsize_t i = 0; i < n; ++i) {
      char name[200];
      H5Gget_objname_by_idx(grp.get(), i, name, sizeof name);
      h5::Handle dset(H5Dopen2(grp.get(), name, H5P_DEFAULT));
      std::vector<int64_t> shape = h5::dataset_shape(dset.get());
      size_t count = 1;
      std::string dims;
      for (int64_t d : shape) {
        count *= static_cast<size_t>(d);
        dims += (dims.empty() ? "" : " x ") + std::to_string(d);
      }
      std::vector<float> data(count);
      H5Dread(dset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data());
      double sq = 0;
      for (float v : data) sq += static_cast<double>(v) * v;
      total += sq;
      elements += count;
      std::snprintf(line, sizeof line, "  /%s/%-40s %-22s norm %.6g\n", ckpt_group(kind), name, dims.c_str(),
                    std::sqrt(sq));
      os << line;
    }
    std::snprintf(line, sizeof line, "  /%s: %zu elements, norm %.6g\n\n", ckpt_group(kind), elements, std::sqrt(total));
    os << line;
  }
  os << "config:\n" << config;
  return os.str();
}

}  // namespace trident
