// DocumentReader: reads text or JSON-lines files a few megabytes at a time, so inputs larger
// than memory stream through `trident tokenize`.
#include "trident/io/document_reader.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "trident/core/error.hpp"
#include "utf8.hpp"

namespace trident {

namespace fs = std::filesystem;

namespace {

// Whether the file's first bytes read as text: no NUL byte and valid UTF-8 (a sequence cut by the
// end of the sample counts as valid).
bool looks_like_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(8192, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  for (size_t i = 0; i < head.size();) {
    if (head[i] == '\0') return false;
    const Utf8Char c = decode_utf8(head, i);
    if (!c.valid && head.size() - i >= 4) return false;
    i += c.len;
  }
  return true;
}

}  // namespace

std::vector<std::string> expand_input_paths(const std::vector<std::string>& paths, std::vector<std::string>* skipped) {
  std::vector<std::string> files;
  std::set<fs::path> seen;   // canonical paths, so a file reached twice (a symlink) is read once
  const auto add = [&](const std::string& file, bool from_directory) {
    std::error_code ec;
    const fs::path canonical = fs::canonical(file, ec);
    if (!ec && !seen.insert(canonical).second) {
      if (skipped) skipped->push_back(str(file, " (same file as ", canonical.string(), ")"));
      return;
    }
    // A named file is read as asked; a directory's files are filtered to the text ones.
    if (from_directory && !looks_like_text(file)) {
      if (skipped) skipped->push_back(str(file, " (not text)"));
      return;
    }
    files.push_back(file);
  };
  for (const std::string& p : paths) {
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (fs::is_regular_file(st)) {
      add(p, false);
    } else if (fs::is_directory(st)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec))
        if (it->is_regular_file()) found.push_back(it->path().string());
      if (ec) throw InputError(str(p, ": cannot list directory (", ec.message(), ")"));
      std::sort(found.begin(), found.end());
      for (const std::string& f : found) add(f, true);
    } else {
      throw InputError(str("input ", p, ": ", fs::exists(st) ? "not a file or directory" : "no such file or directory"));
    }
  }
  return files;
}

DocumentReader::DocumentReader(std::vector<std::string> files, DocumentFormat format)
    : files_(std::move(files)), format_(std::move(format)) {}

bool DocumentReader::open_next_file() {
  in_.close();
  if (next_file_ == files_.size()) return false;
  path_ = files_[next_file_++];
  line_no_ = 0;
  in_.clear();
  in_.open(path_, std::ios::binary);
  if (!in_) throw InputError(str(path_, ": cannot read (", std::strerror(errno), ")"));
  return true;
}

bool DocumentReader::read_document(std::string& doc) {
  if (format_.jsonl) return read_json_document(doc);
  doc.clear();
  if (!format_.separator) {
    // The whole file is one document.
    if (in_.peek() == std::ifstream::traits_type::eof()) return false;
    doc.assign(std::istreambuf_iterator<char>(in_), std::istreambuf_iterator<char>());
    return true;
  }
  bool any_line = false;
  while (std::getline(in_, line_)) {
    ++line_no_;
    any_line = true;
    if (line_ == *format_.separator) return true;
    doc += line_;
    if (!in_.eof()) doc += '\n';   // getline stops at end of file without a final newline
  }
  return any_line;
}

bool DocumentReader::read_json_document(std::string& doc) {
  while (std::getline(in_, line_)) {
    ++line_no_;
    if (line_.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json obj;
    try {
      obj = nlohmann::json::parse(line_);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(str(path_, ":", line_no_, ": invalid JSON (", e.what(), ")"));
    }
    const auto field = obj.is_object() ? obj.find(format_.json_key) : obj.end();
    if (!obj.is_object() || field == obj.end() || !field->is_string())
      throw InputError(str(path_, ":", line_no_, ": expected an object with a string field '", format_.json_key, "'"));
    doc = field->get<std::string>();
    return true;
  }
  return false;
}

bool DocumentReader::next_batch(size_t max_bytes, std::vector<std::string>& docs) {
  size_t bytes = 0, added = 0;
  std::string doc;
  while (bytes < max_bytes) {
    if (!in_.is_open() && !open_next_file()) break;
    if (!read_document(doc)) {
      if (in_.bad()) throw InputError(str(path_, ": read failed (", std::strerror(errno), ")"));
      in_.close();
      continue;
    }
    if (doc.empty()) continue;
    bytes += doc.size();
    docs.push_back(std::move(doc));
    ++added;
  }
  return added > 0;
}

}  // namespace trident
