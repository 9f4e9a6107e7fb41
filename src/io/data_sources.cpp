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
#include "trident/io/preference_source.hpp"
#include "trident/io/sft_source.hpp"

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

// What a fine-tuning task reads: chat records (sft, one sequence each) or preference pairs (dpo,
// reward: chosen and rejected), and how the log and the errors name them.
template <class Source>
struct MaskedKind;

template <>
struct MaskedKind<SftSource> {
  static constexpr int kSequences = 1;
  static constexpr const char* kReads = "task sft reads one chat dataset";
  static constexpr const char* kData = "a chat dataset (trident tokenize --format chat)";
  static std::unique_ptr<SftSource> make(std::shared_ptr<const MaskedDataset> ds, size_t first, size_t end,
                                         int seq_len, int vocab_size, uint64_t seed, bool pack) {
    return std::make_unique<SftSource>(std::move(ds), first, end, seq_len, vocab_size, seed, pack);
  }
  static uint64_t sequences(SftSource& s) { return s.epoch_samples(); }
  // With the packing efficiency: the share of sample tokens that hold record tokens.
  static std::string rows(SftSource& s) {
    const std::string layout = s.packs_documents() ? str("packed into ", s.epoch_samples(), " sequences per epoch of ")
                                                   : std::string("one per sequence of ");
    char filled[16];
    std::snprintf(filled, sizeof filled, "%.1f%%", 100.0 * s.fill());
    return str(layout, "seq_len + 1 tokens (", filled, " filled, the rest padding; ", s.cut_records(),
               " longer records cut)");
  }
};

template <>
struct MaskedKind<PreferenceSource> {
  static constexpr int kSequences = 2;
  static constexpr const char* kReads = "tasks dpo and reward read one preference dataset";
  static constexpr const char* kData = "a preference dataset (trident tokenize --format preference)";
  // Pairs are not packed (data.pack is refused for these tasks).
  static std::unique_ptr<PreferenceSource> make(std::shared_ptr<const MaskedDataset> ds, size_t first, size_t end,
                                                int seq_len, int vocab_size, uint64_t seed, bool) {
    return std::make_unique<PreferenceSource>(std::move(ds), first, end, seq_len, vocab_size, seed);
  }
  static uint64_t sequences(PreferenceSource& s) { return s.records() * kSequences; }
  static std::string rows(const PreferenceSource& s) {
    return str("two sequences (chosen, rejected) of seq_len + 1 tokens each (padded; ", s.cut_sequences(),
               " longer sides cut)");
  }
};

// The one fine-tuning dataset an option names.
template <class Source>
std::shared_ptr<const MaskedDataset> open_masked(const char* option, const std::string& spec) {
  const std::vector<BlendPart> parts = parse_blend_spec(option, spec);
  if (parts.size() != 1)
    throw InputError(str(option, " = '", spec, "': ", MaskedKind<Source>::kReads, " (PREFIX), not a blend of ",
                         parts.size()));
  return std::make_shared<const MaskedDataset>(parts[0].prefix, MaskedKind<Source>::kSequences);
}

// Records [0, cut) train and [cut, n) validate under data.split.
size_t split_records(const MaskedDataset& ds, double split) {
  const size_t n = ds.num_records();
  return std::min(n, static_cast<size_t>(std::llround(split * static_cast<double>(n))));
}

template <class Source>
std::unique_ptr<Source> masked_source(std::shared_ptr<const MaskedDataset> ds, size_t first, size_t end,
                                      const char* role, double split, int seq_len, int vocab_size, uint64_t seed,
                                      bool pack) {
  if (first >= end)
    throw InputError(str("data.split = ", split, " leaves no record of the ", ds->num_records(), " of ",
                         ds->tokens().prefix(), " for ", role,
                         std::string(role) == "training" ? "; raise data.split" : "; lower data.split or set data.val"));
  return MaskedKind<Source>::make(std::move(ds), first, end, seq_len, vocab_size, seed, pack);
}

template <class Source>
std::string describe_masked(const char* role, Source& s) {
  const MaskedDataset& ds = s.dataset();
  return str(role, " ", ds.tokens().prefix(), ": records [", s.first_record(), ", ", s.end_record(), ") of ",
             ds.num_records(), ", ", MaskedKind<Source>::rows(s));
}

template <class Source>
std::unique_ptr<Source> masked_validation(const DataConfig& cfg, const std::shared_ptr<const MaskedDataset>& train,
                                          int seq_len, int vocab_size, uint64_t seed) {
  if (!cfg.val.empty()) {
    std::shared_ptr<const MaskedDataset> val = open_masked<Source>("data.val", cfg.val);
    const size_t n = val->num_records();
    return MaskedKind<Source>::make(std::move(val), 0, n, seq_len, vocab_size, seed, cfg.pack);
  }
  if (cfg.split < 1 && train)
    return masked_source<Source>(train, split_records(*train, cfg.split), train->num_records(), "validation",
                                 cfg.split, seq_len, vocab_size, seed, cfg.pack);
  return nullptr;
}

template <class Source>
DataSources open_masked_data(const DataConfig& cfg, int seq_len, int vocab_size, uint64_t seed) {
  if (cfg.train.empty())
    throw InputError(str("data.train is empty: give the PREFIX of ", MaskedKind<Source>::kData));
  std::shared_ptr<const MaskedDataset> train = open_masked<Source>("data.train", cfg.train);
  const size_t end = cfg.val.empty() && cfg.split < 1 ? split_records(*train, cfg.split) : train->num_records();
  std::unique_ptr<Source> train_source =
      masked_source<Source>(train, 0, end, "training", cfg.split, seq_len, vocab_size, seed, cfg.pack);
  std::unique_ptr<Source> val_source = masked_validation<Source>(cfg, train, seq_len, vocab_size, seed);
  DataSources out;
  out.train_sequences = MaskedKind<Source>::sequences(*train_source);
  out.description = describe_masked("train", *train_source);
  if (val_source) out.description += "\n" + describe_masked("validation", *val_source);
  out.train = std::move(train_source);
  out.val = std::move(val_source);
  return out;
}

}  // namespace

DataSources open_sft_data(const DataConfig& cfg, int seq_len, int vocab_size, uint64_t seed) {
  return open_masked_data<SftSource>(cfg, seq_len, vocab_size, seed);
}

DataSources open_preference_data(const DataConfig& cfg, int seq_len, int vocab_size, uint64_t seed) {
  return open_masked_data<PreferenceSource>(cfg, seq_len, vocab_size, seed);
}

std::unique_ptr<BatchSource> open_validation_data(const DataConfig& cfg, int seq_len, int vocab_size, uint64_t seed,
                                                  const std::string& task) {
  const bool split = cfg.val.empty() && cfg.split < 1 && !cfg.train.empty();
  if (task == "sft")
    return masked_validation<SftSource>(cfg, split ? open_masked<SftSource>("data.train", cfg.train) : nullptr,
                                        seq_len, vocab_size, seed);
  if (task == "dpo" || task == "reward")
    return masked_validation<PreferenceSource>(
        cfg, split ? open_masked<PreferenceSource>("data.train", cfg.train) : nullptr, seq_len, vocab_size, seed);
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
