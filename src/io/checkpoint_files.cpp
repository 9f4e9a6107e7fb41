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
  auto bad = [&](const std::string& what) { return InputError(str("checkpoint ", file, ": ", what)); };
  // A dataset's declared shape is only read after it is checked against the file's size: a
  // crafted header may declare far more elements than the file holds.
  std::error_code ec;
  const uint64_t file_bytes = fs::file_size(file, ec);
  if (ec) throw bad(str("cannot read its size (", ec.message(), ")"));
  h5::Handle f(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid()) throw bad("cannot be opened as HDF5 (missing, truncated or not a checkpoint)");
  std::ostringstream os;
  os << "checkpoint " << file << "\n  format version " << info.format_version << ", step " << info.step
     << ", consumed samples " << info.consumed_samples << ", seed " << info.seed << "\n  saved with layout: "
     << printable(info.layout) << "\n\ntensors (fp32, global shapes):\n";
  char line[512];
  for (CkptKind kind : kCkptKinds) {
    if (H5Lexists(f.get(), ckpt_group(kind), H5P_DEFAULT) <= 0) continue;
    h5::Handle grp(H5Gopen2(f.get(), ckpt_group(kind), H5P_DEFAULT));
    if (!grp.valid()) throw bad(str("/", ckpt_group(kind), " is not a group"));
    hsize_t n = 0;
    if (H5Gget_num_objs(grp.get(), &n) < 0) throw bad(str("/", ckpt_group(kind), " cannot be listed"));
    double total = 0;
    uint64_t elements = 0;
    for (hsize_t i = 0; i < n; ++i) {
      const ssize_t name_bytes = H5Gget_objname_by_idx(grp.get(), i, nullptr, 0);
      if (name_bytes <= 0) throw bad(str("/", ckpt_group(kind), " has an object without a readable name"));
      std::string name(static_cast<size_t>(name_bytes) + 1, '\0');
      H5Gget_objname_by_idx(grp.get(), i, name.data(), name.size());
      name.resize(static_cast<size_t>(name_bytes));
      const std::string path = str("/", ckpt_group(kind), "/", printable(name, 200));
      if (H5Gget_objtype_by_idx(grp.get(), i) != H5G_DATASET) throw bad(path + " is not a dataset");
      h5::Handle dset(H5Dopen2(grp.get(), name.c_str(), H5P_DEFAULT));
      if (!dset.valid()) throw bad(path + " cannot be opened");
      std::vector<int64_t> shape = h5::dataset_shape(dset.get());
      uint64_t count = 1;
      std::string dims;
      for (int64_t d : shape) {
        if (d > 0 && count > file_bytes / sizeof(float) / static_cast<uint64_t>(d)) count = UINT64_MAX;
        else count *= static_cast<uint64_t>(d);
        dims += (dims.empty() ? "" : " x ") + std::to_string(d);
      }
      if (count > file_bytes / sizeof(float))
        throw bad(str(path, " declares shape [", dims, "], more fp32 elements than the file's ", file_bytes,
                      " bytes hold (corrupt or crafted)"));
      std::vector<float> data(count);
      if (count && H5Dread(dset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()) < 0)
        throw bad(path + " cannot be read as fp32 (truncated or corrupt)");
      double sq = 0;
      for (float v : data) sq += static_cast<double>(v) * v;
      total += sq;
      elements += count;
      std::snprintf(line, sizeof line, "  %-46s %-22s norm %.6g\n", path.c_str(), dims.c_str(), std::sqrt(sq));
      os << line;
    }
    std::snprintf(line, sizeof line, "  /%s: %llu elements, norm %.6g\n\n", ckpt_group(kind),
                  static_cast<unsigned long long>(elements), std::sqrt(total));
    os << line;
  }
  os << "config:\n" << info.config;
  return os.str();
}

}  // namespace trident
