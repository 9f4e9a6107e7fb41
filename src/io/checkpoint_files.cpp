// Checkpoint directory handling (which file to resume, writability, the 'latest' pointer, pruning)
// and `trident inspect` output.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "checkpoint_plan.hpp"
#include "h5.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/io/checkpoint.hpp"

namespace trident {

namespace fs = std::filesystem;

namespace {

// n for a file name step_<n>.h5 (decimal digits only), else -1.
int64_t step_of_name(const std::string& name) {
  constexpr size_t kPrefix = 5, kSuffix = 3;   // "step_", ".h5"
  if (name.size() <= kPrefix + kSuffix || name.compare(0, kPrefix, "step_") != 0 ||
      name.compare(name.size() - kSuffix, kSuffix, ".h5") != 0)
    return -1;
  const std::string digits = name.substr(kPrefix, name.size() - kPrefix - kSuffix);
  if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

// The checkpoint name in <dir>/latest; "" when latest is missing or holds only white space.
std::string read_latest(const std::string& dir) {
  const std::string latest = dir + "/latest";
  std::error_code ec;
  const fs::file_status st = fs::status(latest, ec);
  if (!fs::exists(st)) return "";
  if (!fs::is_regular_file(st))
    throw InputError(str("checkpoint.resume = auto: ", latest, " is not a regular file; remove it"));
  std::ifstream in(latest, std::ios::binary);
  std::string text(4096, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  const size_t last = text.find_last_not_of(" \t\r\n");
  text.resize(last == std::string::npos ? 0 : last + 1);
  const size_t first = text.find_first_not_of(" \t\r\n");
  text = first == std::string::npos ? "" : text.substr(first);
  // A name with a directory part would let latest point outside checkpoint.dir.
  const bool plain = text.find_first_of("/\\ \t\r\n") == std::string::npos && text != "." && text != ".." &&
                     std::all_of(text.begin(), text.end(), [](char ch) { return ch >= 0x20 && ch <= 0x7e; });
  if (!plain)
    throw InputError(str("checkpoint.resume = auto: ", latest, " holds ", quoted_text(text, 60),
                         ", not the file name of a checkpoint in ", dir, " (like step_2.h5); fix or remove it"));
  return text;
}

// checkpoint.resume = auto; `origin` says how the file was chosen, for messages about it.
ResumePlan resume_auto(const std::string& dir, std::string& origin) {
  ResumePlan plan;
  if (dir.empty()) return plan;
  const std::vector<CheckpointFile> found = list_checkpoints(dir);
  const std::string name = read_latest(dir);
  const int64_t named = name.empty() ? -1 : step_of_name(name);
  if (!found.empty() && (name.empty() || (named >= 0 && found[0].step > named))) {
    plan.file = dir + "/" + found[0].name;
    plan.note = name.empty() ? str("note: ", dir, "/latest is missing or empty; resuming from the newest checkpoint "
                                   "there, ", found[0].name)
                             : str("note: ", dir, "/latest names ", name, " but ", found[0].name, " is newer (a save "
                                   "interrupted before 'latest' was updated); resuming from ", found[0].name);
    origin = str("chosen by checkpoint.resume = auto as the newest checkpoint in ", dir,
                 "; move it away to resume from an older one");
  } else if (!name.empty()) {
    plan.file = dir + "/" + name;
    origin = str("named by ", dir, "/latest; fix or remove 'latest', or pass checkpoint.resume = none");
  }
  return plan;
}

// The checkpoints of c.dir that a run starting from `plan` did not resume from and would
// overwrite (same step) or prune (older than its next saves, counted against checkpoint.keep).
std::vector<std::string> foreign_checkpoints(const std::string& dir, const ResumePlan& plan) {
  std::error_code ec;
  const bool resumes_here = !plan.file.empty() &&
      fs::equivalent(fs::path(plan.file).parent_path().empty() ? "." : fs::path(plan.file).parent_path(), dir, ec);
  std::vector<std::string> out;
  for (const CheckpointFile& f : list_checkpoints(dir))
    if (!resumes_here || f.step > plan.step) out.push_back(f.name);
  return out;
}

}  // namespace

std::vector<CheckpointFile> list_checkpoints(const std::string& dir) {
  std::vector<CheckpointFile> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const int64_t step = step_of_name(name);
    std::error_code type_ec;
    if (step >= 0 && it->is_regular_file(type_ec)) found.push_back({step, name});
  }
  std::sort(found.begin(), found.end(), [](const CheckpointFile& a, const CheckpointFile& b) { return a.step > b.step; });
  return found;
}

ResumePlan resolve_resume(const CheckpointConfig& c) {
  ResumePlan plan;
  std::string origin;
  if (c.resume == "auto") plan = resume_auto(c.dir, origin);
  else if (c.resume != "none") plan.file = c.resume;
  if (!plan.file.empty()) {
    try {
      plan.step = read_checkpoint_info(plan.file).step;
    } catch (const InputError& e) {
      if (origin.empty()) throw;
      throw InputError(str(e.what(), " (", origin, ")"));
    }
  }
  if (c.dir.empty() || c.overwrite) return plan;
  const std::vector<std::string> foreign = foreign_checkpoints(c.dir, plan);
  if (foreign.empty()) return plan;
  std::string names;
  for (size_t i = 0; i < foreign.size() && i < 3; ++i) names += (i ? ", " : "") + foreign[i];
  if (foreign.size() > 3) names += str(" and ", foreign.size() - 3, " more");
  const std::string run = plan.file.empty() ? "starts fresh"
                                            : str("resumes from ", plan.file, " at step ", plan.step);
  throw InputError(str("checkpoint.dir = ", c.dir, " holds checkpoints (", names, ") that this run (which ", run,
                       ") would overwrite or prune: use another checkpoint.dir, continue them with "
                       "checkpoint.resume = auto, or set checkpoint.overwrite = true to replace them"));
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

bool fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

std::string write_latest(const std::string& dir, const std::string& name) {
  const std::string latest = dir + "/latest", tmp = latest + ".tmp", text = name + "\n";
  auto failed = [](const std::string& what, const std::string& path) {
    return str(what, " ", path, ": ", std::strerror(errno));
  };
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) return failed("removing the stale", tmp);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return failed("creating", tmp);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  std::string error;
  if (done < text.size()) error = failed("writing", tmp);
  else if (::fsync(fd) != 0) error = failed("syncing", tmp);
  if (::close(fd) != 0 && error.empty()) error = failed("closing", tmp);
  if (error.empty() && std::rename(tmp.c_str(), latest.c_str()) != 0) error = failed("renaming it to", latest);
  if (!error.empty()) {
    ::unlink(tmp.c_str());
    return error;
  }
  if (!fsync_path(dir)) return failed("syncing the directory", dir);
  std::ifstream back(latest, std::ios::binary);
  const std::string got((std::istreambuf_iterator<char>(back)), {});
  if (got != text)
    return str("reading back ", latest, ": it holds ", quoted_text(got, 60), ", not ", quoted_text(text, 60));
  return "";
}

void prune_checkpoints(const CheckpointConfig& c, int64_t written) {
  std::error_code ec;
  auto remove = [&](const fs::path& p) {
    std::error_code rm_ec;
    fs::remove(p, rm_ec);   // a link is removed itself, never its target
    if (rm_ec) log_warn(str("checkpoint: could not remove ", p.string(), " (", rm_ec.message(), "); left in place"));
  };
  for (fs::directory_iterator it(c.dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t tmp = name.size() > 4 ? name.size() - 4 : 0;
    if (tmp > 0 && name.compare(tmp, 4, ".tmp") == 0 && step_of_name(name.substr(0, tmp)) >= 0) remove(it->path());
  }
  int kept = 0;   // newest first, so the file just written is the first one kept
  for (const CheckpointFile& f : list_checkpoints(c.dir)) {
    if (f.step > written) {
      if (c.overwrite) remove(fs::path(c.dir) / f.name);
    } else if (f.step == written || kept < c.keep) {
      ++kept;
    } else {
      remove(fs::path(c.dir) / f.name);
    }
  }
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
     << printable(info.layout) << "\n";
  if (!std::isnan(info.kl_coef)) os << "  task ppo: KL coefficient " << info.kl_coef << ", value model under /value\n";
  const TokenizerFiles tokenizer = read_checkpoint_tokenizer(file);
  if (!tokenizer.empty()) {
    os << "  tokenizer kept:";
    for (const auto& [name, text] : tokenizer.files) os << " " << name << " (" << text.size() << " bytes)";
    os << "\n";
  }
  os << "\ntensors (fp32, global shapes):\n";
  char line[512];
  // The run's model, then task ppo's value model under /value.
  for (const std::string& root : {std::string(), str(kValueGroup, "/")}) {
    if (!root.empty() && H5Lexists(f.get(), kValueGroup, H5P_DEFAULT) <= 0) continue;
    for (CkptKind kind : kCkptKinds) {
      const std::string group = root + ckpt_group(kind);
      if (H5Lexists(f.get(), group.c_str(), H5P_DEFAULT) <= 0) continue;
      h5::Handle grp(H5Gopen2(f.get(), group.c_str(), H5P_DEFAULT));
      if (!grp.valid()) throw bad(str("/", group, " is not a group"));
      hsize_t n = 0;
      if (H5Gget_num_objs(grp.get(), &n) < 0) throw bad(str("/", group, " cannot be listed"));
      double total = 0;
      uint64_t elements = 0;
      for (hsize_t i = 0; i < n; ++i) {
        const ssize_t name_bytes = H5Gget_objname_by_idx(grp.get(), i, nullptr, 0);
        if (name_bytes <= 0) throw bad(str("/", group, " has an object without a readable name"));
        std::string name(static_cast<size_t>(name_bytes) + 1, '\0');
        H5Gget_objname_by_idx(grp.get(), i, name.data(), name.size());
        name.resize(static_cast<size_t>(name_bytes));
        const std::string path = str("/", group, "/", printable(name, 200));
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
      std::snprintf(line, sizeof line, "  /%s: %llu elements, norm %.6g\n\n", group.c_str(),
                    static_cast<unsigned long long>(elements), std::sqrt(total));
      os << line;
    }
  }
  os << "config:\n" << info.config;
  return os.str();
}

}  // namespace trident
