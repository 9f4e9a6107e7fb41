// safetensors files: u64 little-endian header length N, N bytes of JSON ({name: {dtype, shape,
// data_offsets: [begin, end)}, optional "__metadata__": {string: string}}), then the data section
// the offsets index. Read through a mapping after every offset is checked; written atomically.
#include "trident/io/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint_plan.hpp"
#include "trident/core/dtype.hpp"
#include "trident/core/error.hpp"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian and is read and written with native numbers");

namespace trident {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The reference implementation refuses longer headers (MAX_HEADER_SIZE); so does this reader,
// before it reads one.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";
// Conversions split over OpenMP threads above this many elements.
constexpr uint64_t kParallelElements = 1 << 16;

struct DtypeInfo {
  SafetensorsDtype dtype;
  const char* name;
  size_t bytes;
};

constexpr DtypeInfo kDtypes[] = {
    {SafetensorsDtype::F32, "F32", 4},         {SafetensorsDtype::F16, "F16", 2},
    {SafetensorsDtype::BF16, "BF16", 2},       {SafetensorsDtype::F64, "F64", 8},
    {SafetensorsDtype::I64, "I64", 8},         {SafetensorsDtype::I32, "I32", 4},
    {SafetensorsDtype::I16, "I16", 2},         {SafetensorsDtype::I8, "I8", 1},
    {SafetensorsDtype::U64, "U64", 8},         {SafetensorsDtype::U32, "U32", 4},
    {SafetensorsDtype::U16, "U16", 2},         {SafetensorsDtype::U8, "U8", 1},
    {SafetensorsDtype::BOOL, "BOOL", 1},       {SafetensorsDtype::F8_E4M3, "F8_E4M3", 1},
    {SafetensorsDtype::F8_E5M2, "F8_E5M2", 1},
};

const DtypeInfo& dtype_info(SafetensorsDtype t) {
  for (const DtypeInfo& d : kDtypes)
    if (d.dtype == t) return d;
  TRIDENT_FATAL(str("safetensors dtype ", int(t), " missing from kDtypes"));
}

std::string known_dtype_names() {
  std::string names;
  for (const DtypeInfo& d : kDtypes) names += str(names.empty() ? "" : ", ", d.name);
  return names;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += str(i ? ", " : "", shape[i]);
  return s + "]";
}

std::string errno_text() { return std::strerror(errno); }

// n 16-bit values at src (any alignment) widened to fp32 by `widen`, and the reverse.
template <class Widen>
void halves_to_f32(const uint8_t* src, int64_t n, float* dst, Widen widen) {
#pragma omp parallel for schedule(static) if (n > static_cast<int64_t>(kParallelElements))
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = widen(h);
  }
}

template <class Narrow>
void f32_to_halves(const float* src, int64_t n, uint8_t* dst, Narrow narrow) {
#pragma omp parallel for schedule(static) if (n > static_cast<int64_t>(kParallelElements))
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = narrow(src[i]);
    std::memcpy(dst + 2 * i, &h, 2);
  }
}

// Converts n stored elements of a float dtype to fp32; `src` may have any alignment.
void to_f32(SafetensorsDtype dtype, const uint8_t* src, uint64_t n, float* dst) {
  if (n == 0) return;   // dst may be null
  switch (dtype) {
    case SafetensorsDtype::F32: std::memcpy(dst, src, n * 4); return;
    case SafetensorsDtype::BF16: halves_to_f32(src, static_cast<int64_t>(n), dst, bf16_to_float); return;
    case SafetensorsDtype::F16: halves_to_f32(src, static_cast<int64_t>(n), dst, f16_to_float); return;
    default: TRIDENT_FATAL(str("to_f32 of non-float dtype ", safetensors_dtype_name(dtype)));
  }
}

// n fp32 values stored as `dtype` (F32 copied, BF16/F16 rounded to nearest even) into dst.
void from_f32(SafetensorsDtype dtype, const float* src, uint64_t n, uint8_t* dst) {
  if (n == 0) return;
  switch (dtype) {
    case SafetensorsDtype::F32: std::memcpy(dst, src, n * 4); return;
    case SafetensorsDtype::BF16: f32_to_halves(src, static_cast<int64_t>(n), dst, float_to_bf16); return;
    case SafetensorsDtype::F16: f32_to_halves(src, static_cast<int64_t>(n), dst, float_to_f16); return;
    default: TRIDENT_FATAL(str("from_f32 to non-float dtype ", safetensors_dtype_name(dtype)));
  }
}

// Why nlohmann refused a text: a syntax error (parse_error, with its byte) or a number beyond a
// double's range (out_of_range).
std::string json_error(const json::exception& e) {
  if (const auto* p = dynamic_cast<const json::parse_error*>(&e)) return str("syntax error at byte ", p->byte);
  return "a number out of range";
}

// A JSON value that is a non-negative integer, else false.
bool json_uint(const json& v, uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

// A file opened for an atomic write: PATH.tmp, created exclusively (a link left at that name is
// removed first, never written through), renamed over PATH by commit().
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path) : path_(path), tmp_(path + ".tmp") {
    if (::unlink(tmp_.c_str()) != 0 && errno != ENOENT) fail("cannot remove the stale " + tmp_);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("cannot create " + tmp_);
  }
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* src, size_t bytes) {
    const char* p = static_cast<const char*>(src);
    while (bytes > 0) {
      const ssize_t n = ::write(fd_, p, bytes);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("cannot write " + tmp_);
      p += n;
      bytes -= static_cast<size_t>(n);
    }
  }
  // fsync, close, rename over the final name, fsync the directory.
  void commit() {
    if (::fsync(fd_) != 0) fail("cannot sync " + tmp_);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("cannot close " + tmp_);
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0) fail("cannot rename " + tmp_ + " to it");
    committed_ = true;
    const std::string dir = fs::path(path_).parent_path().string();
    if (!fsync_path(dir.empty() ? "." : dir))
      throw InputError(str(path_, ": written, but its directory cannot be synced (", errno_text(),
                           "), so a crash could still lose it"));
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(str(path_, ": ", what, " (", errno_text(), "); any earlier file of that name is unchanged"));
  }

  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

// The index file's text: weight_map sorted by name (nlohmann::json's order), as transformers writes it.
std::string index_text(const std::vector<SafetensorsEntry>& entries, const std::vector<std::vector<size_t>>& plan) {
  json index;
  uint64_t total = 0;
  json& weight_map = index["weight_map"] = json::object();
  for (size_t s = 0; s < plan.size(); ++s)
    for (size_t i : plan[s]) {
      weight_map[entries[i].name] = shard_file_name(s, plan.size());
      total += entries[i].bytes();
    }
  index["metadata"] = {{"total_size", total}};
  return index.dump(2) + "\n";
}

// n for a name model-<i>-of-<n>.safetensors (five digits each), else 0.
size_t shard_count_of_name(const std::string& name) {
  const std::string head = "model-", mid = "-of-", tail = ".safetensors";
  if (name.size() != head.size() + 5 + mid.size() + 5 + tail.size() || name.compare(0, head.size(), head) != 0 ||
      name.compare(head.size() + 5, mid.size(), mid) != 0 || name.compare(name.size() - tail.size(), tail.size(), tail) != 0)
    return 0;
  const std::string first = name.substr(head.size(), 5), count = name.substr(head.size() + 5 + mid.size(), 5);
  const std::string digits = first + count;
  if (digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stoul(count);
}

}  // namespace

const char* safetensors_dtype_name(SafetensorsDtype t) { return dtype_info(t).name; }
size_t safetensors_dtype_size(SafetensorsDtype t) { return dtype_info(t).bytes; }
bool safetensors_dtype_is_float(SafetensorsDtype t) {
  return t == SafetensorsDtype::F32 || t == SafetensorsDtype::F16 || t == SafetensorsDtype::BF16;
}

uint64_t SafetensorsTensor::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

uint64_t SafetensorsTensor::row_elements() const {
  uint64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= static_cast<uint64_t>(shape[i]);
  return n;
}

// ---------------------------------------------------------------------------------------------
// Reading one file

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw InputError(str(path, ": cannot open (", errno_text(), ")"));
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw InputError(str(path, ": cannot stat (", errno_text(), ")"));
    if (!S_ISREG(st.st_mode)) throw InputError(str(path, ": not a regular file"));
    file_bytes_ = static_cast<uint64_t>(st.st_size);
    if (file_bytes_ < 8)
      throw InputError(str(path, ": ", file_bytes_, " bytes, shorter than the 8-byte header length that starts a "
                           "safetensors file (truncated, or not safetensors?)"));
    void* map = ::mmap(nullptr, file_bytes_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (map == MAP_FAILED) throw InputError(str(path, ": cannot map (", errno_text(), ")"));
    map_ = static_cast<const uint8_t*>(map);

    uint64_t header_bytes;
    std::memcpy(&header_bytes, map_, 8);
    if (header_bytes > kMaxHeaderBytes)
      throw InputError(str(path, ": header length ", header_bytes, " is over the format's limit of ", kMaxHeaderBytes,
                           " bytes (corrupt, or not a safetensors file?)"));
    if (header_bytes > file_bytes_ - 8)
      throw InputError(str(path, ": header length ", header_bytes, " runs past the end of the file (", file_bytes_,
                           " bytes): truncated, or not a safetensors file?"));
    data_start_ = 8 + header_bytes;
    parse_header(reinterpret_cast<const char*>(map_ + 8), header_bytes, file_bytes_ - data_start_);
  } catch (...) {
    close();   // the destructor does not run for a constructor that throws
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() { close(); }

void SafetensorsFile::close() {
  if (map_) ::munmap(const_cast<uint8_t*>(map_), file_bytes_);
  if (fd_ >= 0) ::close(fd_);
  map_ = nullptr;
  fd_ = -1;
}

void SafetensorsFile::parse_header(const char* text, uint64_t bytes, uint64_t data_bytes) {
  auto bad_file = [&](const std::string& what) { return InputError(str(path_, ": ", what)); };
  auto bad = [&](const std::string& name, const std::string& what) {
    return InputError(str(path_, ": tensor ", quoted_text(name), ": ", what));
  };

  // nlohmann keeps the last of two equal keys; a repeated tensor name is refused instead.
  std::set<std::string> seen;
  std::string repeated;
  const json::parser_callback_t note_keys = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && !seen.insert(parsed.get<std::string>()).second &&
        repeated.empty())
      repeated = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(text, text + bytes, note_keys);
  } catch (const json::exception& e) {
    throw bad_file(str("the header is not JSON (", json_error(e), "): corrupt, or not a safetensors file?"));
  }
  if (!header.is_object()) throw bad_file(str("the header is JSON ", header.type_name(), ", not an object"));
  if (!repeated.empty()) throw bad(repeated, "appears twice in the header");

  std::vector<const SafetensorsTensor*> by_offset;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw bad_file("__metadata__ must be an object mapping strings to strings");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          throw bad_file(str("__metadata__ ", quoted_text(key), " is ", value.type_name(),
                             ", but its values must be strings"));
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object()) throw bad(name, str("is described by JSON ", entry.type_name(), ", not an object"));
    SafetensorsTensor t;
    t.name = name;

    const auto dtype = entry.find("dtype");
    if (dtype == entry.end() || !dtype->is_string()) throw bad(name, "has no \"dtype\" string");
    const auto known = std::find_if(std::begin(kDtypes), std::end(kDtypes), [&](const DtypeInfo& d) {
      return d.name == dtype->get<std::string>();
    });
    if (known == std::end(kDtypes))
      throw bad(name, str("unknown dtype ", quoted_text(dtype->get<std::string>(), 40), " (known: ", known_dtype_names(), ")"));
    t.dtype = known->dtype;

    // The element count is bounded by the data section before it is multiplied by the size, so
    // a crafted shape cannot overflow; a zero dimension makes any other dimension harmless.
    const auto shape = entry.find("shape");
    if (shape == entry.end() || !shape->is_array()) throw bad(name, "has no \"shape\" array");
    bool empty = false;
    for (const json& d : *shape) {
      uint64_t dim;
      if (!json_uint(d, dim) || dim > static_cast<uint64_t>(INT64_MAX))
        throw bad(name, str("shape ", shape->dump(), " must hold non-negative integers"));
      t.shape.push_back(static_cast<int64_t>(dim));
      empty = empty || dim == 0;
    }
    const uint64_t max_numel = data_bytes / known->bytes;
    uint64_t numel = empty ? 0 : 1;
    for (int64_t d : t.shape)
      if (!empty) numel = numel > max_numel / static_cast<uint64_t>(d) ? max_numel + 1 : numel * static_cast<uint64_t>(d);

    const auto offsets = entry.find("data_offsets");
    if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 || !json_uint((*offsets)[0], t.begin) ||
        !json_uint((*offsets)[1], t.end))
      throw bad(name, "has no \"data_offsets\" [begin, end] of two non-negative integers");
    const std::string span = str("data_offsets [", t.begin, ", ", t.end, "]");
    if (t.end < t.begin) throw bad(name, span + " end before they begin");
    if (t.end > data_bytes)
      throw bad(name, str(span, " run past the end of the data section (", data_bytes,
                          " bytes): the file is truncated"));
    if (numel > max_numel || t.end - t.begin != numel * known->bytes)
      throw bad(name, str(span, " hold ", t.end - t.begin, " bytes but shape ", shape_text(t.shape), " of ", known->name,
                          " needs ", numel > max_numel ? str("more than the file's ", data_bytes) : str(numel * known->bytes)));
    by_offset.push_back(&tensors_.emplace(name, std::move(t)).first->second);
  }

  // The tensors must tile the data section: no overlap, no gap, nothing after the last one.
  std::sort(by_offset.begin(), by_offset.end(), [](const SafetensorsTensor* a, const SafetensorsTensor* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  const SafetensorsTensor* previous = nullptr;
  for (const SafetensorsTensor* t : by_offset) {
    if (t->begin < covered)
      throw bad(t->name, str("data_offsets [", t->begin, ", ", t->end, "] overlap those of tensor ",
                             quoted_text(previous->name), " [", previous->begin, ", ", previous->end, "]"));
    if (t->begin > covered)
      throw bad(t->name, str("data_offsets [", t->begin, ", ", t->end, "] leave bytes [", covered, ", ", t->begin,
                             ") of the data section to no tensor (the format allows no gaps)"));
    covered = t->end;
    previous = t;
    order_.push_back(t->name);
  }
  if (covered != data_bytes)
    throw bad_file(str("the tensors end at byte ", covered, " of the data section but it holds ", data_bytes,
                       " (bytes appended, or a header from another file?)"));
}

const SafetensorsTensor& SafetensorsFile::info(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw InputError(str(path_, ": tensor ", quoted_text(name), ": missing (the file has ", tensors_.size(),
                         " tensors; another model or architecture?)"));
  return it->second;
}

const uint8_t* SafetensorsFile::raw(const std::string& name) const {
  check_unchanged();
  return map_ + data_start_ + info(name).begin;
}

// A mapped page past a shortened end faults (SIGBUS) instead of failing a read; a file cut
// since it was opened is refused here, before it is touched.
void SafetensorsFile::check_unchanged() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || static_cast<uint64_t>(st.st_size) != file_bytes_)
    throw InputError(str(path_, ": the file changed size since it was opened (", file_bytes_, " bytes then, ",
                         st.st_size, " now): rewritten while in use?"));
}

void SafetensorsFile::read_f32(const std::string& name, float* dst) const {
  const SafetensorsTensor& t = info(name);
  read_rows_f32(name, 0, t.shape.empty() ? 1 : t.shape[0], dst);
}

void SafetensorsFile::read_rows_f32(const std::string& name, int64_t row_begin, int64_t row_end, float* dst) const {
  const SafetensorsTensor& t = info(name);
  if (!safetensors_dtype_is_float(t.dtype))
    throw InputError(str(path_, ": tensor ", quoted_text(name), ": dtype ", safetensors_dtype_name(t.dtype),
                         " does not convert to fp32 (only F32, F16 and BF16 do)"));
  const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
  TRIDENT_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= rows,
                str(path_, ": rows [", row_begin, ", ", row_end, ") of tensor '", name, "' with ", rows, " rows"));
  const uint64_t per_row = t.row_elements(), size = safetensors_dtype_size(t.dtype);
  const uint8_t* src = raw(name) + static_cast<uint64_t>(row_begin) * per_row * size;
  to_f32(t.dtype, src, static_cast<uint64_t>(row_end - row_begin) * per_row, dst);
}

// ---------------------------------------------------------------------------------------------
// Reading a model directory

SafetensorsModel::SafetensorsModel(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const std::string single = (fs::path(path) / kSingleFile).string(), index = (fs::path(path) / kIndexFile).string();
    if (fs::exists(single, ec)) {
      files_.push_back(std::make_unique<SafetensorsFile>(single));
    } else if (fs::exists(index, ec)) {
      open_index(index);
    } else {
      throw InputError(str(path, ": holds neither ", kSingleFile, " nor ", kIndexFile,
                           " (not a Hugging Face model directory, or weights in another format)"));
    }
  } else if (fs::path(path).extension() == ".json") {
    open_index(path);
  } else {
    files_.push_back(std::make_unique<SafetensorsFile>(path));
  }
  if (!sharded())
    for (const std::string& name : files_.front()->tensors()) {
      shard_of_[name] = 0;
      order_.push_back(name);
    }
}

void SafetensorsModel::open_index(const std::string& index_path) {
  index_path_ = index_path;
  auto bad = [&](const std::string& what) { return InputError(str(index_path, ": ", what)); };
  std::error_code ec;
  const uint64_t bytes = fs::file_size(index_path, ec);
  if (ec) throw bad(str("cannot open (", ec.message(), ")"));
  if (bytes > kMaxHeaderBytes) throw bad(str(bytes, " bytes, more than an index of tensor names can be"));
  std::ifstream in(index_path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) throw bad("cannot be read");
  json index;
  try {
    index = json::parse(text);
  } catch (const json::exception& e) {
    throw bad(str("not JSON (", json_error(e), ")"));
  }
  const auto weight_map = index.is_object() ? index.find("weight_map") : index.end();
  if (weight_map == index.end() || !weight_map->is_object() || weight_map->empty())
    throw bad("has no \"weight_map\" object naming the shard of each tensor");

  // Shards in file-name order; each tensor is looked for in the one the index names.
  std::map<std::string, std::vector<std::string>> names_of_shard;
  for (const auto& [name, file] : weight_map->items()) {
    const std::string f = file.is_string() ? file.get<std::string>() : "";
    if (f.empty() || f == "." || f == ".." || f.find_first_of("/\\") != std::string::npos)
      throw bad(str("tensor ", quoted_text(name), ": weight_map names ", file.is_string() ? quoted_text(f) : file.dump(),
                    ", not a file name in the index's directory"));
    names_of_shard[f].push_back(name);
  }
  const fs::path dir = fs::path(index_path).parent_path();
  for (const auto& [file, names] : names_of_shard) {
    files_.push_back(std::make_unique<SafetensorsFile>((dir / file).string()));
    const SafetensorsFile& shard = *files_.back();
    for (const std::string& name : names) {
      if (!shard.contains(name))
        throw InputError(str(shard.path(), ": tensor ", quoted_text(name), ": missing, though ", index_path,
                             " maps it to this shard (an incomplete download, or shards of another save?)"));
      shard_of_[name] = files_.size() - 1;
    }
    for (const std::string& name : shard.tensors())
      if (shard_of_.count(name) && shard_of_[name] == files_.size() - 1) order_.push_back(name);
  }
}

const SafetensorsFile& SafetensorsModel::file_of(const std::string& name) const {
  const auto it = shard_of_.find(name);
  if (it == shard_of_.end())
    throw InputError(str(sharded() ? index_path_ : files_.front()->path(), ": tensor ", quoted_text(name),
                         ": missing (the model has ", order_.size(), " tensors; another model or architecture?)"));
  return *files_[it->second];
}

// ---------------------------------------------------------------------------------------------
// Writing

uint64_t SafetensorsEntry::bytes() const {
  uint64_t n = safetensors_dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

void SafetensorsWriter::add(const SafetensorsEntry& entry) {
  TRIDENT_CHECK(!entry.name.empty() && entry.name != "__metadata__",
                str("safetensors tensor name '", entry.name, "' is reserved or empty"));
  TRIDENT_CHECK(safetensors_dtype_is_float(entry.dtype),
                str("safetensors writer: tensor '", entry.name, "' as ", safetensors_dtype_name(entry.dtype),
                    " (only F32, F16 and BF16 are written)"));
  for (const SafetensorsEntry& e : entries_)
    TRIDENT_CHECK(e.name != entry.name, str("safetensors writer: tensor '", entry.name, "' added twice"));
  for (int64_t d : entry.shape) TRIDENT_CHECK(d >= 0, str("safetensors writer: tensor '", entry.name, "' shape"));
  entries_.push_back(entry);
  data_bytes_ += entry.bytes();
}

void SafetensorsWriter::write(const std::string& path) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const SafetensorsEntry& e : entries_) {
    TRIDENT_CHECK(e.data || e.bytes() == 0, str("safetensors writer: tensor '", e.name, "' has no data"));
    header[e.name] = {{"dtype", safetensors_dtype_name(e.dtype)},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + e.bytes()}}};
    offset += e.bytes();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::type_error&) {
    throw InputError(str(path, ": a tensor name or metadata text is not valid UTF-8, which the JSON header needs"));
  }
  text.append((8 - text.size() % 8) % 8, ' ');   // the data section starts 8-aligned
  const uint64_t header_bytes = text.size();

  AtomicFile out(path);
  out.write(&header_bytes, 8);
  out.write(text.data(), text.size());
  constexpr uint64_t kChunkElements = 1 << 20;
  std::vector<uint8_t> chunk;
  for (const SafetensorsEntry& e : entries_) {
    const uint64_t numel = e.bytes() / safetensors_dtype_size(e.dtype);
    if (e.dtype == SafetensorsDtype::F32) {
      out.write(e.data, numel * 4);
      continue;
    }
    for (uint64_t first = 0; first < numel; first += kChunkElements) {
      const uint64_t n = std::min(kChunkElements, numel - first);
      chunk.resize(n * safetensors_dtype_size(e.dtype));
      from_f32(e.dtype, e.data + first, n, chunk.data());
      out.write(chunk.data(), chunk.size());
    }
  }
  out.commit();
}

std::string shard_file_name(size_t shard, size_t shards) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", shard + 1, shards);
  return name;
}

std::vector<std::vector<size_t>> plan_shards(const std::vector<SafetensorsEntry>& entries, uint64_t max_shard_bytes) {
  std::vector<std::vector<size_t>> plan(1);
  uint64_t used = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const uint64_t bytes = entries[i].bytes();
    if (!plan.back().empty() && used + bytes > max_shard_bytes) {
      plan.emplace_back();
      used = 0;
    }
    plan.back().push_back(i);
    used += bytes;
  }
  return plan;
}

void write_file_atomically(const std::string& path, const std::string& text) {
  AtomicFile out(path);
  out.write(text.data(), text.size());
  out.commit();
}

void SafetensorsShardedWriter::write_shard(const std::string& dir, size_t shard) const {
  const std::vector<std::vector<size_t>> shards = plan();
  TRIDENT_CHECK(shard < shards.size(), str("safetensors shard ", shard, " of ", shards.size()));
  SafetensorsWriter w;
  for (size_t i : shards[shard]) w.add(all_.entries()[i]);
  for (const auto& [key, value] : all_.metadata()) w.set_metadata(key, value);
  const std::string name = shards.size() == 1 ? kSingleFile : shard_file_name(shard, shards.size());
  w.write((fs::path(dir) / name).string());
}

void SafetensorsShardedWriter::write_index(const std::string& dir) const {
  const std::vector<std::vector<size_t>> shards = plan();
  if (shards.size() > 1) write_file_atomically((fs::path(dir) / kIndexFile).string(), index_text(all_.entries(), shards));
  // Files of an earlier save that a loader could take for this one; a link is removed itself.
  auto remove = [&](const std::string& name) {
    std::error_code ec;
    fs::remove(fs::path(dir) / name, ec);
    if (ec) throw InputError(str(dir, "/", name, ": cannot remove this file of an earlier model (", ec.message(), ")"));
  };
  remove(shards.size() > 1 ? kSingleFile : kIndexFile);
  std::error_code ec;
  std::vector<std::string> stale;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t count = shard_count_of_name(name);
    if (count != 0 && (shards.size() == 1 || count != shards.size())) stale.push_back(name);
  }
  for (const std::string& name : stale) remove(name);
}

void SafetensorsShardedWriter::write(const std::string& dir) const {
  const size_t shards = plan().size();
  for (size_t s = 0; s < shards; ++s) write_shard(dir, s);
  write_index(dir);
}

}  // namespace trident
