// Megatron-LM indexed dataset ("MMIDIDX" version 1): PREFIX.bin holds the tokens of every
// document back to back; PREFIX.idx holds dtype, per-sequence sizes and byte offsets, and the
// document index. Data prepared by Megatron-LM's preprocess_data.py reads unchanged.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace trident {

// Read-only view of one dataset: the index in memory, tokens read from .bin on demand.
class IndexedDataset {
 public:
  // Throws InputError naming the file when PREFIX.idx / PREFIX.bin is missing or malformed, or
  // when an int64 dataset holds an id that does not fit int32.
  explicit IndexedDataset(const std::string& prefix);
  ~IndexedDataset();
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  const std::string& prefix() const { return prefix_; }
  size_t num_sequences() const { return sizes_.size(); }
  size_t num_documents() const { return doc_idx_.empty() ? 0 : doc_idx_.size() - 1; }
  size_t num_tokens() const { return total_tokens_; }
  int token_bytes() const { return token_bytes_; }   // 1, 2, 4 or 8, from the dtype code
  uint8_t dtype_code() const { return dtype_code_; }  // Megatron's code: 8 uint16, 4 int32, ...
  uint32_t sequence_length(size_t i) const { return static_cast<uint32_t>(sizes_[i]); }
  const std::vector<int64_t>& document_index() const { return doc_idx_; }
  // Offset in tokens of document d's first token; d == num_documents() gives num_tokens().
  size_t document_offset(size_t d) const;

  // Tokens [offset, offset + n) of the concatenation of all sequences, written as int32. Throws
  // InputError naming .bin when it can no longer be read (truncated since it was opened).
  void read_tokens(size_t offset, size_t n, int32_t* out) const;
  // Tokens of sequence i.
  std::vector<int32_t> sequence(size_t i) const;

 private:
  void read_index(const std::string& idx_path);
  void open_bin(const std::string& bin_path);
  void close_bin();
  void check_int64_tokens() const;
  // Tokens [offset, offset + n) as stored (token_bytes_ each) into `bytes`.
  void read_bin(size_t offset, size_t n, std::vector<uint8_t>& bytes) const;

  std::string prefix_;
  int token_bytes_ = 2;
  uint8_t dtype_code_ = 0;
  std::vector<int32_t> sizes_;
  std::vector<int64_t> pointers_;   // byte offset of each sequence in .bin
  std::vector<int64_t> doc_idx_;
  size_t total_tokens_ = 0;
  std::string bin_path_;
  int bin_fd_ = -1;
};

// Streams documents into PREFIX.bin/.idx. Each add_document() call is one sequence and one
// document; add_sequence() calls closed by end_document() make a document of several sequences.
// Token width follows Megatron's preprocess_data.py (uint16 when vocab_size < 65500, else int32),
// so both tools write byte-identical files for the same tokens; `bytes` writes uint8 values below
// vocab_size instead (loss masks).
class IndexedDatasetWriter {
 public:
  IndexedDatasetWriter(const std::string& prefix, int vocab_size, bool bytes = false);
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  void add_document(const std::vector<int32_t>& tokens) {
    add_sequence(tokens);
    end_document();
  }
  void add_sequence(const std::vector<int32_t>& tokens);
  void end_document();   // the sequences added since the last call form one document
  // Writes PREFIX.idx and closes PREFIX.bin; files appear under their final names only here.
  void finish();

  size_t num_documents() const { return doc_idx_.size() - 1; }
  size_t num_tokens() const { return total_tokens_; }

 private:
  void write_index(const std::string& path) const;

  std::string prefix_;
  int vocab_size_;
  uint8_t dtype_code_;
  int token_bytes_;
  std::FILE* bin_file_ = nullptr;
  std::vector<int32_t> sizes_;
  std::vector<int64_t> doc_idx_{0};
  std::vector<uint8_t> scratch_;   // one document converted to the on-disk width
  size_t total_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace trident
