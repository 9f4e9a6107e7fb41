// Building the data sources: a blend part is a document range of one dataset; part d of a blend
// shuffles its windows with seed + d. A split keeps the first round(split * documents) documents of
// each dataset for training and the rest for validation, with the same weights.
#include "trident/io/data_sources.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "trident/config/blend_spec.hpp"
#include "trident/core/error.hpp"
#include "trident/io/blended_source.hpp"

namespace trident {
namespace {

struct OpenedPart {
  std::shared_ptr<const IndexedDataset> ds;
  uint64_t weight;
};

std::vector<OpenedPart> open_parts(const std::vector<BlendPart>& spec) {
  std::vector<OpenedPart> out;
  for (const BlendPart& p : spec) out.push_back({std::make_shared<const IndexedDataset>(p.prefix), p.weight});
  return out;
}

// Which documents of each part a source reads, and what to say when a range holds no window.
struct Range {
  size_t first_doc, end_doc;
  std::string shortfall;
};

std::unique_ptr<BlendedSource> make_source(const std::vector<OpenedPart>& parts, const std::vector<Range>& ranges,
                                           int seq_len, int vocab_size, uint64_t seed) {
  std::vector<DocumentWindows> windows;
  std::vector<uint64_t> weights;
  for (size_t d = 0; d < parts.size(); ++d) {
    const Range& r = ranges[d];
    if (DocumentWindows::count(*parts[d].ds, r.first_doc, r.end_doc, seq_len) == 0) throw InputError(r.shortfall);
    windows.emplace_back(parts[d].ds, r.first_doc, r.end_doc, seq_len, vocab_size, seed + d);
    weights.push_back(parts[d].weight);
  }
  return std::make_unique<BlendedSource>(std::move(windows), weights);
}

std::string too_short(size_t tokens, int seq_len) {
  return str(tokens, " tokens is less than one sequence of model.seq_len + 1 = ", seq_len + 1);
}

// Every document of every part.
std::vector<Range> whole(const std::vector<OpenedPart>& parts, int seq_len) {
  std::vector<Range> out;
  for (const OpenedPart& p : parts)
    out.push_back({0, p.ds->num_documents(), str(p.ds->prefix(), ": ", too_short(p.ds->num_tokens(), seq_len))});
  return out;
}

// The training (train) or the held-out validation (!train) documents of each part under data.split.
std::vector<Range> split_ranges(const std::vector<OpenedPart>& parts, double split, int seq_len, bool train) {
  std::vector<Range> out;
  for (const OpenedPart& p : parts) {
    const IndexedDataset& ds = *p.ds;
    const size_t n_docs = ds.num_documents();
    const size_t cut = std::min(n_docs, static_cast<size_t>(std::llround(split * static_cast<double>(n_docs))));
    const size_t first = train ? 0 : cut, end = train ? cut : n_docs;
    const size_t tokens = ds.document_offset(end) - ds.document_offset(first);
    out.push_back({first, end,
                   str("data.split = ", split, " leaves ", end - first, " of the ", n_docs, " documents of ",
                       ds.prefix(), " for ", train ? "training" : "validation", ": ", too_short(tokens, seq_len),
                       train ? "; raise data.split" : "; lower data.split or set data.val")});
  }
  return out;
}

// One line per part: its share of the blend, the dataset, the document range and its size.
std::string describe(const char* role, const BlendedSource& s) {
  std::string out;
  for (size_t d = 0; d < s.parts().size(); ++d) {
    const DocumentWindows& p = s.parts()[d];
    char share[32];
    std::snprintf(share, sizeof share, "%.1f%%", 100.0 * s.schedule().weight(d) / s.schedule().period());
    out += str(d ? "\n" : "", role, " ", share, " ", p.dataset().prefix(), ": documents [", p.first_doc(), ", ",
               p.end_doc(), ") of ", p.dataset().num_documents(), ", ", p.tokens(), " tokens, ", p.windows(),
               " sequences of ", p.seq_len());
  }
  return out;
}

// data.val, else the documents data.split holds out of the opened data.train parts; null for neither.
std::unique_ptr<BlendedSource> validation_source(const DataConfig& cfg, const std::vector<OpenedPart>& train,
                                                 int seq_len, int vocab_size, uint64_t seed) {
  if (!cfg.val.empty()) {
    const std::vector<OpenedPart> val = open_parts(parse_blend_spec("data.val", cfg.val));
    return make_source(val, whole(val, seq_len), seq_len, vocab_size, seed);
  }
  if (cfg.split < 1 && !train.empty())
    return make_source(train, split_ranges(train, cfg.split, seq_len, false), seq_len, vocab_size, seed);
  return nullptr;
}

}  // namespace

std::unique_ptr<BatchSource> open_validation_data(const DataConfig& cfg, int seq_len, int vocab_size, uint64_t seed) {
  const bool split = cfg.val.empty() && cfg.split < 1 && !cfg.train.empty();
  const std::vector<OpenedPart> train = split ? open_parts(parse_blend_spec("data.train", cfg.train))
                                              : std::vector<OpenedPart>{};
  return validation_source(cfg, train, seq_len, vocab_size, seed);
}

DataSources open_data(const DataConfig& cfg, int seq_len, int vocab_size, uint64_t seed) {
  if (cfg.train.empty())
    throw InputError("data.train is empty: give a dataset prefix (PREFIX.bin + PREFIX.idx) or a blend "
                     "'W1 PREFIX1 W2 PREFIX2 ...'");
  const std::vector<OpenedPart> train = open_parts(parse_blend_spec("data.train", cfg.train));
  const bool split = cfg.val.empty() && cfg.split < 1;
  std::unique_ptr<BlendedSource> train_source = make_source(
      train, split ? split_ranges(train, cfg.split, seq_len, true) : whole(train, seq_len), seq_len, vocab_size, seed);
  std::unique_ptr<BlendedSource> val_source = validation_source(cfg, train, seq_len, vocab_size, seed);
  DataSources out;
  for (const DocumentWindows& p : train_source->parts()) out.train_sequences += p.windows();
  out.description = describe("train", *train_source);
  if (val_source) out.description += "\n" + describe("validation", *val_source);
  out.train = std::move(train_source);
  out.val = std::move(val_source);
  return out;
}

}  // namespace trident
