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
  const CheckpointInfo info = read_checkpoint_info(file);
  h5::Handle f(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  std::ostringstream os;
  os << "checkpoint " << file << "\n  format version " << info.format_version << ", step " << info.step
     << ", consumed samples " << info.consumed_samples << ", seed " << info.seed << "\n  saved with layout: "
     << info.layout << "\n\ntensors (fp32, global shapes):\n";
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
  os << "config:\n" << info.config;
  return os.str();
}

}  // namespace trident
