// Renders a Jinja template with trident's interpreter for check_chat_templates.py:
//   jinja_render TEMPLATE CASES.json   (a list of variable objects) -> stdout: a JSON list of
//   {"text": ...} or {"error": ...}, one per case.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "trident/io/jinja.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: jinja_render TEMPLATE CASES.json\n";
    return 2;
  }
  std::ifstream source_file(argv[1], std::ios::binary), cases_file(argv[2]);
  std::stringstream source;
  source << source_file.rdbuf();
  const nlohmann::ordered_json cases = nlohmann::ordered_json::parse(cases_file);
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  try {
    const trident::JinjaTemplate tmpl(source.str());
    for (const auto& vars : cases) {
      try {
        out.push_back({{"text", tmpl.render(vars)}});
      } catch (const trident::JinjaError& e) {
        out.push_back({{"error", e.what()}});
      }
    }
  } catch (const trident::JinjaError& e) {
    for (size_t i = 0; i < cases.size(); ++i) out.push_back({{"error", e.what()}});
  }
  std::cout << out.dump() << "\n";
  return 0;
}
