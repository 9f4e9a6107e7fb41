// A Jinja interpreter for the subset that Hugging Face chat templates (tokenizer_config.json's
// chat_template) use, rendered as transformers renders them: trim_blocks, lstrip_blocks, loopcontrols.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace trident {

// A template outside what the interpreter runs: a syntax error, a construct outside the subset
// (named), an undefined value used, or the template's own raise_exception('...'). what() starts
// with the template line.
class JinjaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The subset (docs/FINE_TUNING.md lists it for users):
//   tags {{ }}, {% %}, {# #} with '-' (and '+') whitespace control;
//   statements: for (several targets, an `if` filter, else, loop.index0/index/first/last/length/
//     revindex/revindex0/previtem/nextitem), if/elif/else, set (a name, or ns.attr of a namespace),
//     break, continue, generation (rendered as its body);
//   expressions: string, integer, boolean, none, list and dict literals, variables, a.b, a['b'],
//     a[i], slices a[i:j:k], + - * // %, ~, comparisons, and/or/not, in/not in, `x if c else y`,
//     tests (defined, undefined, none, string, number, integer, boolean, mapping, iterable,
//     sequence, true, false, odd, even, equalto, eq, sameas), filters (trim, length, count, tojson,
//     upper, lower, capitalize, first, last, join, default/d, string, int, list, items, select,
//     reject, replace, safe), string methods (strip, lstrip, rstrip, startswith, endswith, split,
//     upper, lower, replace), mapping methods (get, items, keys, values), and the functions
//     raise_exception, namespace and range.
// Anything else is a JinjaError: at construction for statements, filters and tests, while
// rendering for methods and functions (a name the parser cannot tell apart from a variable).
class JinjaTemplate {
 public:
  explicit JinjaTemplate(const std::string& source);
  ~JinjaTemplate();
  JinjaTemplate(JinjaTemplate&&) noexcept;
  JinjaTemplate& operator=(JinjaTemplate&&) noexcept;

  // `variables`: a JSON object of the template's global variables (key order kept, as Python's).
  std::string render(const nlohmann::ordered_json& variables) const;

  struct Program;   // the parsed statements

 private:
  std::unique_ptr<Program> program_;
};

// The trim filter: Python's str.strip(), which removes Unicode whitespace from both ends.
std::string jinja_trim(const std::string& text);

}  // namespace trident
