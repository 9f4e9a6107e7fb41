// Windows of a document range in sampler order, with the token ids checked as they are read.
#include "trident/io/document_windows.hpp"

#include "trident/core/error.hpp"

namespace trident {
namespace {

size_t range_tokens(const IndexedDataset& ds, size_t first_doc, size_t end_doc) {
  TRIDENT_CHECK(first_doc <= end_doc && end_doc <= ds.num_documents(),
                str(ds.prefix(), ": documents [", first_doc, ", ", end_doc, ") of ", ds.num_documents()));
  return ds.document_offset(end_doc) - ds.document_offset(first_doc);
}

// The document of range [first_doc, end_doc) that holds token `offset` of the dataset.
size_t document_holding(const IndexedDataset& ds, size_t first_doc, size_t end_doc, size_t offset) {
  size_t lo = first_doc, hi = end_doc;   // the document is in [lo, hi)
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    if (ds.document_offset(mid) <= offset) lo = mid;
    else hi = mid;
  }
  return lo;
}

}  // namespace

uint64_t DocumentWindows::count(const IndexedDataset& ds, size_t first_doc, size_t end_doc, int seq_len) {
  const size_t n = range_tokens(ds, first_doc, end_doc);
  return n > static_cast<size_t>(seq_len) ? (n - 1) / seq_len : 0;
}

DocumentWindows::DocumentWindows(std::shared_ptr<const IndexedDataset> ds, size_t first_doc, size_t end_doc,
                                 int seq_len, int vocab_size, uint64_t seed)
    : ds_(std::move(ds)),
      first_doc_(first_doc),
      end_doc_(end_doc),
      first_token_(ds_->document_offset(first_doc)),
      tokens_(range_tokens(*ds_, first_doc, end_doc)),
      seq_len_(seq_len),
      vocab_size_(vocab_size),
      sampler_(count(*ds_, first_doc, end_doc, seq_len), seed) {}

void DocumentWindows::sample(uint64_t k, int32_t* out) const {
  const size_t len = static_cast<size_t>(seq_len_) + 1;
  const size_t start = first_token_ + sampler_.window(k) * seq_len_;
  ds_->read_tokens(start, len, out);
  for (size_t i = 0; i < len; ++i)
    if (out[i] < 0 || out[i] >= vocab_size_) {
      const size_t doc = document_holding(*ds_, first_doc_, end_doc_, start + i);
      throw InputError(str(ds_->prefix(), ".bin: token id ", out[i], " (document ", doc, ", token ",
                           start + i - ds_->document_offset(doc), ") is outside model.vocab_size = ", vocab_size_,
                           "; the data was tokenized for another vocabulary"));
    }
}

}  // namespace trident
