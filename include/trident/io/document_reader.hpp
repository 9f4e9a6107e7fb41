// Streams raw-text documents out of files for `trident tokenize`: plain text (one document per
// file, or documents split at separator lines) or JSON lines (one document per line).
#pragma once

#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace trident {

// Files named by `paths`, in order; a directory contributes its regular files (recursively,
// sorted by path) that look like text (no NUL byte, valid UTF-8 in the first 8 KB). A file
// reached a second time (a symlink, or named twice) is read once. What is left out is added to
// *skipped as "path (reason)". Throws InputError for a path that does not exist or is neither.
std::vector<std::string> expand_input_paths(const std::vector<std::string>& paths,
                                            std::vector<std::string>* skipped = nullptr);

struct DocumentFormat {
  bool jsonl = false;                     // else plain text
  std::string json_key = "text";          // jsonl: the string field holding the document
  std::optional<std::string> separator;   // text: a line exactly equal to it ends a document
};

class DocumentReader {
 public:
  DocumentReader(std::vector<std::string> files, DocumentFormat format);

  // Appends whole documents to `docs` until their bytes reach `max_bytes` or the input ends;
  // returns false when no document was left. Empty documents are skipped. A text document keeps
  // its bytes exactly, newlines included (separator lines excluded). Throws InputError naming
  // file:line for an unreadable file or an invalid JSON line.
  bool next_batch(size_t max_bytes, std::vector<std::string>& docs);

 private:
  bool open_next_file();
  // The next document of the open file; false at its end.
  bool read_document(std::string& doc);
  bool read_json_document(std::string& doc);

  std::vector<std::string> files_;
  DocumentFormat format_;
  size_t next_file_ = 0;
  std::ifstream in_;
  std::string path_;      // of the open file
  size_t line_no_ = 0;
  std::string line_;
};

}  // namespace trident
