// The token and mask datasets of fine-tuning data, written together and checked against each other
// when opened, so that a mask from another run is refused rather than misaligned.
#include "trident/io/masked_dataset.hpp"

#include "trident/core/error.hpp"

namespace trident {
namespace {

constexpr uint8_t kCodeUint8 = 1;

}  // namespace

std::string mask_prefix(const std::string& prefix) { return prefix + "_mask"; }

MaskedDataset::MaskedDataset(const std::string& prefix, int sequences_per_document)
    : tokens_(std::make_shared<const IndexedDataset>(prefix)), per_doc_(sequences_per_document) {
  const std::string mprefix = mask_prefix(prefix);
  try {
    mask_ = std::make_shared<const IndexedDataset>(mprefix);
  } catch (const InputError& e) {
    throw InputError(str(e.what(), " — a fine-tuning dataset needs its loss mask ", mprefix,
                         ".bin/.idx beside it (written by trident tokenize --format chat or preference)"));
  }
  const IndexedDataset& t = *tokens_;
  const IndexedDataset& m = *mask_;
  const std::string fix = " — written by different tokenize runs? Re-run trident tokenize";
  if (m.dtype_code() != kCodeUint8)
    throw InputError(str(mprefix, ".idx: dtype code ", int(m.dtype_code()), " is not uint8 (code 1): not a loss mask"));
  if (m.num_sequences() != t.num_sequences() || m.document_index() != t.document_index())
    throw InputError(str(mprefix, ".idx: ", m.num_sequences(), " sequences in ", m.num_documents(),
                         " documents, but ", prefix, ".idx has ", t.num_sequences(), " in ", t.num_documents(), fix));
  for (size_t i = 0; i < t.num_sequences(); ++i)
    if (m.sequence_length(i) != t.sequence_length(i))
      throw InputError(str(mprefix, ".idx: sequence ", i, " has ", m.sequence_length(i), " mask values for ",
                           t.sequence_length(i), " tokens in ", prefix, ".idx", fix));
  const std::vector<int64_t>& docs = t.document_index();
  for (size_t d = 0; d + 1 < docs.size(); ++d)
    if (docs[d + 1] - docs[d] != per_doc_)
      throw InputError(str(prefix, ".idx: document ", d, " holds ", docs[d + 1] - docs[d], " sequences, expected ",
                           per_doc_, per_doc_ == 1 ? " (a chat dataset: is this a preference dataset?)"
                                                   : " (a preference dataset: chosen and rejected)"));
}

size_t MaskedDataset::sequence_length(size_t record, int which) const {
  return tokens_->sequence_length(record * per_doc_ + which);
}

MaskedTokens MaskedDataset::read(size_t record, int which, size_t max_len) const {
  TRIDENT_CHECK(record < num_records() && which >= 0 && which < per_doc_,
                str(tokens_->prefix(), ": record ", record, " side ", which));
  const size_t seq = record * per_doc_ + which;
  const size_t n = std::min<size_t>(tokens_->sequence_length(seq), max_len);
  const size_t offset = tokens_->document_offset(record) +
                        (which ? tokens_->sequence_length(record * per_doc_) : 0);
  MaskedTokens out;
  out.tokens.resize(n);
  out.mask.resize(n);
  tokens_->read_tokens(offset, n, out.tokens.data());
  mask_->read_tokens(offset, n, out.mask.data());
  for (size_t i = 0; i < n; ++i)
    if (out.mask[i] != 0 && out.mask[i] != 1)
      throw InputError(str(mask_->prefix(), ".bin: value ", out.mask[i], " at token ", offset + i,
                           " is not a loss mask (0 or 1); re-run trident tokenize"));
  return out;
}

MaskedDatasetWriter::MaskedDatasetWriter(const std::string& prefix, int vocab_size)
    : tokens_(prefix, vocab_size), mask_(mask_prefix(prefix), 2, true) {}

void MaskedDatasetWriter::add_sequence(const MaskedTokens& s) {
  TRIDENT_CHECK(s.tokens.size() == s.mask.size(), "add_sequence: tokens and mask differ in length");
  tokens_.add_sequence(s.tokens);
  mask_.add_sequence(s.mask);
  for (int32_t m : s.mask) trained_ += m != 0;
}

void MaskedDatasetWriter::end_document() {
  tokens_.end_document();
  mask_.end_document();
}

// The mask first: a crash between the two leaves new mask files beside old tokens, which the
// reader's size checks refuse unless every record kept its length.
void MaskedDatasetWriter::finish() {
  mask_.finish();
  tokens_.finish();
}

}  // namespace trident
