// A JSON file read whole (nlohmann-json), for the io readers of Hugging Face files.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace trident {

// The parsed contents of `path`; an InputError naming the file when it cannot be opened or is
// not valid JSON.
nlohmann::json read_json_file(const std::string& path);
// The same for text held in memory (a file kept in a checkpoint); `where` names it in errors.
nlohmann::json parse_json_text(const std::string& text, const std::string& where);

}  // namespace trident
