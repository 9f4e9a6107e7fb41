// Reader and writer of Megatron-LM's "MMIDIDX" version-1 indexed dataset (.idx + .bin).
// .idx layout, little-endian: magic (9 bytes), u64 version, u8 dtype code, u64 sequence count,
// u64 document count, int32 sizes[seq], int64 pointers[seq], int64 doc_idx[doc] (starts at 0).
#include "trident/io/indexed_dataset.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include "trident/core/error.hpp"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the indexed dataset is read and written with native (little-endian) integers");

namespace trident {
namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kVersion = 1;
constexpr uint64_t kHeaderBytes = sizeof(kMagic) + 8 + 1 + 8 + 8;
constexpr uint8_t kCodeUint8 = 1;
constexpr uint8_t kCodeUint16 = 8;
constexpr uint8_t kCodeInt32 = 4;
constexpr uint8_t kCodeInt64 = 5;
// Megatron's DType.optimal_dtype: uint16 below this vocabulary size, int32 from it on.
constexpr int kUint16VocabLimit = 65500;

// Bytes per token of a Megatron dtype code; 0 for codes that are not integer token types.
int token_bytes_of(uint8_t code) {
  switch (code) {
    case 1: case 2: return 1;      // uint8, int8
    case 3: case 8: return 2;      // int16, uint16
    case 4: return 4;              // int32
    case 5: return 8;              // int64
    default: return 0;             // 6 float64, 7 float32, unknown
  }
}

std::string errno_text() { return std::strerror(errno); }

void write_all(std::FILE* f, const std::string& path, const void* src, size_t bytes) {
  if (bytes && std::fwrite(src, 1, bytes, f) != bytes)
    throw InputError(str(path, ": write failed (", errno_text(), ")"));
}

// Flushes to the disk before the caller renames, so a crash cannot publish a short file.
void sync_and_close(std::FILE* f, const std::string& path) {
  const bool synced = std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  const int sync_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (!synced || !closed)
    throw InputError(str(path, ": write failed (", std::strerror(synced ? errno : sync_errno), ")"));
}

// Owns a FILE* for the index; every failure names the file.
class CFile {
 public:
  CFile(const std::string& path, const char* mode) : path_(path), f_(std::fopen(path.c_str(), mode)) {
    if (!f_) throw InputError(str(path, ": cannot open (", errno_text(), ")"));
  }
  ~CFile() { if (f_) std::fclose(f_); }
  CFile(const CFile&) = delete;
  CFile& operator=(const CFile&) = delete;

  void read(void* dst, size_t bytes) {
    if (bytes && std::fread(dst, 1, bytes, f_) != bytes)
      throw InputError(str(path_, ": read failed (", std::ferror(f_) ? errno_text() : "unexpected end", ")"));
  }
  void write(const void* src, size_t bytes) { write_all(f_, path_, src, bytes); }
  void close_synced() {
    std::FILE* f = f_;
    f_ = nullptr;
    sync_and_close(f, path_);
  }

 private:
  std::string path_;
  std::FILE* f_;
};

template <class T>
void widen(const uint8_t* src, size_t n, int32_t* out) {
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + i * sizeof(T), sizeof(T));
    out[i] = static_cast<int32_t>(v);
  }
}

template <class T>
void narrow(const std::vector<int32_t>& tokens, uint8_t* dst) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    const T v = static_cast<T>(tokens[i]);
    std::memcpy(dst + i * sizeof(T), &v, sizeof(T));
  }
}

}  // namespace

IndexedDataset::IndexedDataset(const std::string& prefix) : prefix_(prefix) {
  read_index(prefix + ".idx");
  try {
    open_bin(prefix + ".bin");
  } catch (...) {
    close_bin();   // the destructor does not run for a constructor that throws
    throw;
  }
}

IndexedDataset::~IndexedDataset() { close_bin(); }

void IndexedDataset::close_bin() {
  if (bin_fd_ >= 0) ::close(bin_fd_);
  bin_fd_ = -1;
}

void IndexedDataset::read_index(const std::string& path) {
  std::error_code ec;
  const uint64_t file_bytes = std::filesystem::file_size(path, ec);
  if (ec) throw InputError(str(path, ": cannot open (", ec.message(), ")"));
  if (file_bytes < kHeaderBytes)
    throw InputError(str(path, ": not a Megatron indexed dataset (", file_bytes, " bytes, shorter than the header)"));

  CFile f(path, "rb");
  char magic[sizeof(kMagic)];
  uint64_t version = 0, seq_count = 0, doc_count = 0;
  f.read(magic, sizeof(magic));
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0)
    throw InputError(str(path, ": not a Megatron indexed dataset (bad magic)"));
  f.read(&version, 8);
  if (version != kVersion)
    throw InputError(str(path, ": indexed dataset version ", version, " is not supported (trident reads version 1)"));
  f.read(&dtype_code_, 1);
  token_bytes_ = token_bytes_of(dtype_code_);
  if (token_bytes_ == 0)
    throw InputError(str(path, ": dtype code ", int(dtype_code_), " is not an integer token type"));
  f.read(&seq_count, 8);
  f.read(&doc_count, 8);

  // Counts are checked against the file size before any multiplication can overflow.
  const uint64_t body = file_bytes - kHeaderBytes;
  const bool counts_fit = seq_count <= body / 12 && doc_count <= body / 8;
  const uint64_t need = counts_fit ? kHeaderBytes + 12 * seq_count + 8 * doc_count : 0;
  // Megatron's multimodal variant appends one int8 mode per sequence; those are not needed here.
  if (!counts_fit || (file_bytes != need && file_bytes != need + seq_count))
    throw InputError(str(path, " is ", file_bytes, " bytes but its header (", seq_count, " sequences, ", doc_count,
                         " documents) needs ", counts_fit ? need : body, " — truncated or not an index?"));

  sizes_.resize(seq_count);
  pointers_.resize(seq_count);
  doc_idx_.resize(doc_count);
  f.read(sizes_.data(), 4 * seq_count);
  f.read(pointers_.data(), 8 * seq_count);
  f.read(doc_idx_.data(), 8 * doc_count);

  // read_tokens() treats .bin as one token array, which holds when sequences are back to back
  // (as Megatron writes them, also when it merges datasets).
  uint64_t expected = 0;
  for (size_t i = 0; i < seq_count; ++i) {
    if (sizes_[i] < 0) throw InputError(str(path, ": sequence ", i, " has negative size ", sizes_[i]));
    if (pointers_[i] < 0 || static_cast<uint64_t>(pointers_[i]) != expected)
      throw InputError(str(path, ": sequence ", i, " starts at byte ", pointers_[i], ", expected ", expected,
                           " (sequences must be stored back to back)"));
    expected += static_cast<uint64_t>(sizes_[i]) * token_bytes_;
  }
  total_tokens_ = expected / token_bytes_;

  if (doc_count == 0 || doc_idx_.front() != 0 || doc_idx_.back() != static_cast<int64_t>(seq_count))
    throw InputError(str(path, ": document index must run from 0 to the sequence count ", seq_count));
  for (size_t i = 1; i < doc_count; ++i)
    if (doc_idx_[i] < doc_idx_[i - 1]) throw InputError(str(path, ": document index decreases at entry ", i));
}

void IndexedDataset::open_bin(const std::string& path) {
  bin_path_ = path;
  bin_fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (bin_fd_ < 0) throw InputError(str(path, ": cannot open (", errno_text(), ")"));
  struct stat st {};
  if (::fstat(bin_fd_, &st) != 0) throw InputError(str(path, ": cannot stat (", errno_text(), ")"));
  const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
  const uint64_t need = static_cast<uint64_t>(total_tokens_) * token_bytes_;
  if (file_bytes != need)
    throw InputError(str(path, " is ", file_bytes, " bytes but the index needs ", need,
                         file_bytes < need ? " — truncated?" : " — .bin and .idx from different runs?"));
  if (dtype_code_ == kCodeInt64) check_int64_tokens();
}

// Tokens are handed out as int32: an int64 dataset whose ids do not fit would be silently
// truncated, so it is refused when opened (int64 datasets are rare and the scan reads each once).
void IndexedDataset::check_int64_tokens() const {
  constexpr size_t kChunk = 1 << 20;
  std::vector<uint8_t> bytes;
  for (size_t first = 0; first < total_tokens_; first += kChunk) {
    const size_t n = std::min(kChunk, total_tokens_ - first);
    read_bin(first, n, bytes);
    for (size_t i = 0; i < n; ++i) {
      int64_t v;
      std::memcpy(&v, bytes.data() + i * 8, 8);
      if (v < INT32_MIN || v > INT32_MAX)
        throw InputError(str(bin_path_, ": token ", first + i, " is ", v,
                             ", which does not fit the int32 token ids trident reads; re-tokenize the data"));
    }
  }
}

// pread rather than a mapping: a .bin truncated while it is read gives a short read and this
// message, where a mapping would kill the process with SIGBUS.
void IndexedDataset::read_bin(size_t offset, size_t n, std::vector<uint8_t>& bytes) const {
  const size_t want = n * token_bytes_;
  bytes.resize(want);
  size_t done = 0;
  while (done < want) {
    const ssize_t got = ::pread(bin_fd_, bytes.data() + done, want - done,
                                static_cast<off_t>(offset * token_bytes_ + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      throw InputError(str(bin_path_, ": read of tokens [", offset, ", ", offset + n, ") failed (", errno_text(), ")"));
    if (got == 0)
      throw InputError(str(bin_path_, ": tokens [", offset, ", ", offset + n, ") are past its end: the file is shorter "
                           "than when it was opened (changed while in use?)"));
    done += static_cast<size_t>(got);
  }
}

void IndexedDataset::read_tokens(size_t offset, size_t n, int32_t* out) const {
  TRIDENT_CHECK(offset <= total_tokens_ && n <= total_tokens_ - offset,
                str(prefix_, ": tokens [", offset, ", ", offset + n, ") past the end (", total_tokens_, ")"));
  thread_local std::vector<uint8_t> bytes;
  read_bin(offset, n, bytes);
  const uint8_t* src = bytes.data();
  switch (dtype_code_) {
    case 1: widen<uint8_t>(src, n, out); break;
    case 2: widen<int8_t>(src, n, out); break;
    case 3: widen<int16_t>(src, n, out); break;
    case 4: widen<int32_t>(src, n, out); break;
    case kCodeInt64: widen<int64_t>(src, n, out); break;   // in range: checked by check_int64_tokens
    case 8: widen<uint16_t>(src, n, out); break;
    default: TRIDENT_FATAL(str("unreachable dtype code ", int(dtype_code_)));
  }
}

size_t IndexedDataset::document_offset(size_t d) const {
  TRIDENT_CHECK(d < doc_idx_.size(), str(prefix_, ": document ", d, " past the end (", num_documents(), ")"));
  const size_t seq = static_cast<size_t>(doc_idx_[d]);
  return seq < pointers_.size() ? static_cast<size_t>(pointers_[seq]) / token_bytes_ : total_tokens_;
}

std::vector<int32_t> IndexedDataset::sequence(size_t i) const {
  std::vector<int32_t> out(sizes_[i]);
  read_tokens(static_cast<size_t>(pointers_[i]) / token_bytes_, out.size(), out.data());
  return out;
}

IndexedDatasetWriter::IndexedDatasetWriter(const std::string& prefix, int vocab_size, bool bytes)
    : prefix_(prefix),
      vocab_size_(vocab_size),
      dtype_code_(bytes ? kCodeUint8 : vocab_size < kUint16VocabLimit ? kCodeUint16 : kCodeInt32),
      token_bytes_(token_bytes_of(dtype_code_)) {
  TRIDENT_CHECK(!bytes || vocab_size <= 256, str(prefix, ": uint8 values below ", vocab_size));
  const std::string tmp = prefix + ".bin.tmp";
  bin_file_ = std::fopen(tmp.c_str(), "wb");
  if (!bin_file_) throw InputError(str(tmp, ": cannot create (", errno_text(), ")"));
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (finished_) return;
  // Abandoned (an exception unwound past us): leave nothing behind, least of all a final name.
  if (bin_file_) std::fclose(bin_file_);
  std::remove((prefix_ + ".bin.tmp").c_str());
  std::remove((prefix_ + ".idx.tmp").c_str());
}

void IndexedDatasetWriter::add_sequence(const std::vector<int32_t>& tokens) {
  TRIDENT_CHECK(!finished_, str(prefix_, ": add_sequence after finish"));
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    throw InputError(str(prefix_, ": a document of ", tokens.size(), " tokens exceeds the format's int32 size"));
  for (int32_t t : tokens)
    if (t < 0 || t >= vocab_size_)
      throw InputError(str(prefix_, ": token id ", t, " is outside the vocabulary (size ", vocab_size_, ")"));

  scratch_.resize(tokens.size() * token_bytes_);
  if (token_bytes_ == 1) narrow<uint8_t>(tokens, scratch_.data());
  else if (token_bytes_ == 2) narrow<uint16_t>(tokens, scratch_.data());
  else narrow<int32_t>(tokens, scratch_.data());
  write_all(bin_file_, prefix_ + ".bin.tmp", scratch_.data(), scratch_.size());

  sizes_.push_back(static_cast<int32_t>(tokens.size()));
  total_tokens_ += tokens.size();
}

void IndexedDatasetWriter::end_document() {
  TRIDENT_CHECK(static_cast<int64_t>(sizes_.size()) > doc_idx_.back(), str(prefix_, ": a document without sequences"));
  doc_idx_.push_back(static_cast<int64_t>(sizes_.size()));
}

void IndexedDatasetWriter::write_index(const std::string& path) const {
  CFile f(path, "wb");
  const uint64_t seq_count = sizes_.size(), doc_count = doc_idx_.size();
  std::vector<int64_t> pointers(sizes_.size());
  int64_t offset = 0;
  for (size_t i = 0; i < sizes_.size(); ++i) {
    pointers[i] = offset;
    offset += static_cast<int64_t>(sizes_[i]) * token_bytes_;
  }
  f.write(kMagic, sizeof(kMagic));
  f.write(&kVersion, 8);
  f.write(&dtype_code_, 1);
  f.write(&seq_count, 8);
  f.write(&doc_count, 8);
  f.write(sizes_.data(), 4 * sizes_.size());
  f.write(pointers.data(), 8 * pointers.size());
  f.write(doc_idx_.data(), 8 * doc_idx_.size());
  f.close_synced();
}

void IndexedDatasetWriter::finish() {
  TRIDENT_CHECK(!finished_, str(prefix_, ": finish called twice"));
  TRIDENT_CHECK(static_cast<int64_t>(sizes_.size()) == doc_idx_.back(), str(prefix_, ": finish inside a document"));
  const std::string bin = prefix_ + ".bin", idx = prefix_ + ".idx";
  std::FILE* f = bin_file_;
  bin_file_ = nullptr;
  sync_and_close(f, bin + ".tmp");
  write_index(idx + ".tmp");

  // The old index goes first: a crash between the renames then leaves a .bin without an .idx
  // (reported as missing), never a new .bin paired with a stale .idx.
  std::error_code ec;
  std::filesystem::remove(idx, ec);
  std::filesystem::rename(bin + ".tmp", bin, ec);
  if (!ec) std::filesystem::rename(idx + ".tmp", idx, ec);
  if (ec) throw InputError(str(prefix_, ": cannot move the finished files into place (", ec.message(), ")"));
  finished_ = true;
}

}  // namespace trident
