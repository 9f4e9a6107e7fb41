// A JSON file read whole (nlohmann-json), for the io readers of Hugging Face files.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace trident {

// The parsed contents of `path`; an InputError naming the file when it cannot be opened or is
// not valid JSON.
nlohmann::json read_json_file(const std::string& path);

}  // namespace trident
