// safetensors, Hugging Face's tensor file format, and its sharded models: files read through a
// read-only mapping with the whole header validated on open, written atomically from fp32 data.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace trident {

// The dtypes a file may hold. Every one is reported; only F32, F16 and BF16 convert to fp32.
enum class SafetensorsDtype : uint8_t { F32, F16, BF16, F64, I64, I32, I16, I8, U64, U32, U16, U8, BOOL, F8_E4M3, F8_E5M2 };

const char* safetensors_dtype_name(SafetensorsDtype t);   // as in the header: "BF16"
size_t safetensors_dtype_size(SafetensorsDtype t);        // bytes per element
bool safetensors_dtype_is_float(SafetensorsDtype t);      // F32, F16 or BF16

// Hugging Face's default limit on a shard's tensor bytes (save_pretrained's max_shard_size "5GB").
constexpr uint64_t kHfMaxShardBytes = 5'000'000'000;

// One tensor of a file: its byte range [begin, end) in the file's data section.
struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;

  uint64_t numel() const;
  // Elements in one row, that is one index of dim 0 (1 for a scalar).
  uint64_t row_elements() const;
};

// One .safetensors file, mapped read-only. The constructor checks all of it against the file's
// size (header length, JSON, dtypes, shapes, offsets that tile the data section exactly, as the
// reference reader requires), so later reads cannot go out of bounds; anything wrong throws
// InputError "FILE: tensor 'NAME': what (fix)".
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Names in the order of their data in the file.
  const std::vector<std::string>& tensors() const { return order_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  // Throws InputError naming the file when it has no tensor `name`.
  const SafetensorsTensor& info(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The tensor's bytes as stored (little-endian, any alignment), for dtypes that do not convert.
  const uint8_t* raw(const std::string& name) const;

  // All of the tensor as fp32 into dst (numel floats). Throws InputError for a dtype other than
  // F32/F16/BF16, and when the file has shrunk since it was opened (a read would fault).
  void read_f32(const std::string& name, float* dst) const;
  // Rows [row_begin, row_end) of dim 0 as fp32 into dst ((row_end - row_begin) * row_elements()
  // floats): the share of a large tensor one rank converts. Touches only those rows' pages.
  // Rows outside the tensor are the caller's bug (fatal), as the shape is known from info().
  void read_rows_f32(const std::string& name, int64_t row_begin, int64_t row_end, float* dst) const;

 private:
  void parse_header(const char* text, uint64_t bytes, uint64_t data_bytes);
  void check_unchanged() const;
  void close();

  std::string path_;
  int fd_ = -1;
  const uint8_t* map_ = nullptr;
  uint64_t file_bytes_ = 0;
  uint64_t data_start_ = 0;   // 8 + header length
  std::map<std::string, SafetensorsTensor> tensors_;
  std::vector<std::string> order_;
  std::map<std::string, std::string> metadata_;
};

// A Hugging Face model's weights: model.safetensors, or model.safetensors.index.json and the
// shards its weight_map names (all opened and checked up front). Tensors are looked up by name
// across shards; errors name the shard (or the index, for a tensor no shard has).
class SafetensorsModel {
 public:
  // `path`: a directory (model.safetensors first, else the index, the order transformers uses),
  // an index .json, or one .safetensors file.
  explicit SafetensorsModel(const std::string& path);

  bool sharded() const { return !index_path_.empty(); }
  const std::string& index_path() const { return index_path_; }
  // Every tensor: shard by shard in file-name order, each shard in its file order.
  const std::vector<std::string>& tensors() const { return order_; }
  bool contains(const std::string& name) const { return shard_of_.count(name) != 0; }
  // The file holding `name`; throws InputError naming the model when none does.
  const SafetensorsFile& file_of(const std::string& name) const;
  const SafetensorsTensor& info(const std::string& name) const { return file_of(name).info(name); }
  void read_f32(const std::string& name, float* dst) const { file_of(name).read_f32(name, dst); }
  void read_rows_f32(const std::string& name, int64_t row_begin, int64_t row_end, float* dst) const {
    file_of(name).read_rows_f32(name, row_begin, row_end, dst);
  }
  // The first shard's __metadata__ (every shard of a save_pretrained model has the same).
  const std::map<std::string, std::string>& metadata() const { return files_.front()->metadata(); }

 private:
  void open_index(const std::string& index_path);

  std::string index_path_;   // empty for a single file
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> shard_of_;   // tensor -> files_ index
  std::vector<std::string> order_;
};

// What to write for one tensor; the data is fp32 at the tensor's shape, row-major.
struct SafetensorsEntry {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::F32;   // F32, BF16 or F16 (rounded to nearest even)
  std::vector<int64_t> shape;
  const float* data = nullptr;   // not owned: must stay valid until the write

  uint64_t bytes() const;   // in the file
};

// Writes one .safetensors file: tensors in the order they were added (the data offsets ascend
// in that order; readers accept any order), the header's JSON padded with spaces so that the
// data section starts 8-aligned, as the reference writer does.
class SafetensorsWriter {
 public:
  // Names must be unique, non-empty and not "__metadata__".
  void add(const SafetensorsEntry& entry);
  // transformers refuses a file whose __metadata__ lacks "format": "pt"; write it when present.
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  uint64_t data_bytes() const { return data_bytes_; }

  // Writes PATH.tmp in the same directory, syncs it and renames it over PATH, then syncs the
  // directory: a failure (InputError naming the file) leaves any earlier PATH as it was.
  void write(const std::string& path) const;

 private:
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
  uint64_t data_bytes_ = 0;
};

// Writes `text` to PATH as SafetensorsWriter::write writes a file (PATH.tmp created exclusively,
// synced, renamed over PATH, the directory synced): the JSON files beside a model's shards.
void write_file_atomically(const std::string& path, const std::string& text);

// Hugging Face's shard file name: shard_file_name(0, 3) is "model-00001-of-00003.safetensors".
std::string shard_file_name(size_t shard, size_t shards);

// Entries (by index) per shard: in insertion order, a new shard whenever the next tensor would
// take the current one past max_shard_bytes of data (a larger tensor gets a shard of its own),
// as huggingface_hub's split_torch_state_dict_into_shards does. Always at least one shard.
std::vector<std::vector<size_t>> plan_shards(const std::vector<SafetensorsEntry>& entries, uint64_t max_shard_bytes);

// Writes a model into `dir` as save_pretrained does: one shard is model.safetensors; more are
// shard_file_name(i, n) plus model.safetensors.index.json (metadata.total_size and weight_map),
// written last. Every file is written as SafetensorsWriter::write does; afterwards the files of
// an earlier model in `dir` that would contradict this one (a model.safetensors beside a new
// index, which transformers would load instead; an index beside a new single file; shards of
// another count) are removed.
class SafetensorsShardedWriter {
 public:
  explicit SafetensorsShardedWriter(uint64_t max_shard_bytes = kHfMaxShardBytes) : max_shard_bytes_(max_shard_bytes) {}
  // Every tensor of the model, on every rank that writes a part of it: the plan depends on all of
  // them. Only the entries of the shards a rank writes need data.
  void add(const SafetensorsEntry& entry) { all_.add(entry); }
  // Written into every shard's __metadata__.
  void set_metadata(const std::string& key, const std::string& value) { all_.set_metadata(key, value); }
  std::vector<std::vector<size_t>> plan() const { return plan_shards(all_.entries(), max_shard_bytes_); }

  // Everything, from one process.
  void write(const std::string& dir) const;
  // The parts, for ranks that share the work: each writes some shards, then one writes the index
  // once every shard is in place.
  void write_shard(const std::string& dir, size_t shard) const;
  void write_index(const std::string& dir) const;

 private:
  uint64_t max_shard_bytes_;
  SafetensorsWriter all_;   // every entry, in order, and the metadata
};

}  // namespace trident
