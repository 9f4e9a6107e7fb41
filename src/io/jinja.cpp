// The Jinja subset of Hugging Face chat templates: the source cut into text and tags (whitespace
// control applied), tags parsed into statements and expressions, and a renderer with Python semantics.
#include "trident/io/jinja.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "trident/core/error.hpp"

namespace trident {
namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void fail(int line, const std::string& what) { throw JinjaError(str("line ", line, ": ", what)); }

// ---- Source -> pieces: text, {{ expression }} and {% statement %}; comments only shape whitespace.

struct Piece {
  enum Kind { Text, Expr, Stmt } kind;
  std::string text;
  int line;
};

constexpr const char* kSpace = " \t\r\n";

std::vector<Piece> split_pieces(const std::string& src) {
  std::vector<Piece> out;
  size_t pos = 0;
  int line = 1;
  bool strip_next = false;   // the last tag ended with '-': the text after it loses its leading whitespace
  bool trim_newline = false;  // the last tag was a block or comment: trim_blocks drops one newline after it
  while (pos <= src.size()) {
    size_t open = pos;
    while ((open = src.find('{', open)) != std::string::npos &&
           (open + 1 >= src.size() || !std::strchr("{%#", src[open + 1])))
      ++open;
    const size_t text_end = open == std::string::npos ? src.size() : open;
    std::string text = src.substr(pos, text_end - pos);
    bool line_start = pos == 0 || src[pos - 1] == '\n';
    if (strip_next) {
      text.erase(0, std::min(text.find_first_not_of(kSpace), text.size()));
    } else if (trim_newline && !text.empty() && text[0] == '\n') {
      text.erase(0, 1);
      line_start = true;
    }
    const char kind = open == std::string::npos ? 0 : src[open + 1];
    const char left = kind && open + 2 < src.size() ? src[open + 2] : 0;
    if (left == '-') {
      text.erase(text.find_last_not_of(kSpace) + 1);
    } else if ((kind == '%' || kind == '#') && left != '+') {
      // lstrip_blocks: spaces and tabs between a line's start and a block tag go.
      const size_t nl = text.rfind('\n');
      const size_t from = nl == std::string::npos ? 0 : nl + 1;
      if ((nl != std::string::npos || line_start) && text.find_first_not_of(" \t", from) == std::string::npos)
        text.erase(from);
    }
    if (!text.empty()) out.push_back({Piece::Text, text, line});
    for (size_t i = pos; i < text_end; ++i) line += src[i] == '\n';
    if (!kind) break;

    // The tag's end, outside quoted strings and brackets (as Jinja's lexer balances them).
    const char* close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t end = open + 2;
    char quote = 0;
    int depth = 0;
    for (; end + 1 < src.size(); ++end) {
      const char c = src[end];
      if (kind == '#') {
        if (c == '#' && src[end + 1] == '}') break;
      } else if (quote) {
        if (c == '\\') ++end;
        else if (c == quote) quote = 0;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (depth == 0 && c == close[0] && src[end + 1] == close[1]) {
        break;
      } else {
        depth += std::strchr("([{", c) ? 1 : std::strchr(")]}", c) && depth > 0 ? -1 : 0;
      }
    }
    if (end + 1 >= src.size()) fail(line, str("the tag opened here has no ", close));
    std::string body = src.substr(open + 2, end - open - 2);
    if (!body.empty() && (body[0] == '-' || body[0] == '+')) body.erase(0, 1);
    const char right = body.empty() ? 0 : body.back();
    if (right == '-' || right == '+') body.pop_back();
    strip_next = right == '-';
    trim_newline = kind != '{' && right != '+';
    if (kind != '#') out.push_back({kind == '{' ? Piece::Expr : Piece::Stmt, body, line});
    for (size_t i = open; i < end + 2; ++i) line += src[i] == '\n';
    pos = end + 2;
  }
  return out;
}

// ---- Tag body -> tokens.

struct Tok {
  enum Kind { Name, Str, Int, Op, End } kind;
  std::string text;
  long long num = 0;
};

std::vector<Tok> tokenize(const std::string& s, int line) {
  std::vector<Tok> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::strchr(kSpace, c)) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Tok::Name, s.substr(i, j - i)});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      if (j < s.size() && (s[j] == '.' || s[j] == 'e') && j + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[j + 1])))
        fail(line, "float literals are not supported");
      out.push_back({Tok::Int, s.substr(i, j - i), std::stoll(s.substr(i, j - i))});
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string text;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] != '\\' || j + 1 == s.size()) {
          text += s[j];
          continue;
        }
        const char e = s[++j];
        const char* from = "ntr\\'\"abfv";
        const char* to = "\n\t\r\\'\"\a\b\f\v";
        const char* at = e ? std::strchr(from, e) : nullptr;
        if (std::strchr("uUxN01234567", e)) fail(line, str("the string escape \\", e, " is not supported"));
        if (at) text += to[at - from];
        else text += std::string("\\") + e;   // Python keeps an unknown escape as written
      }
      if (j >= s.size()) fail(line, "a string is not closed");
      out.push_back({Tok::Str, text});
      i = j + 1;
    } else {
      static const char* kTwo[] = {"==", "!=", "<=", ">=", "//", "**"};
      std::string op(1, c);
      for (const char* two : kTwo)
        if (s.compare(i, 2, two) == 0) op = two;
      if (op.size() == 1 && !std::strchr("+-*/%~|.,:()[]{}<>=", c)) fail(line, str("unexpected character '", c, "'"));
      out.push_back({Tok::Op, op});
      i += op.size();
    }
  }
  out.push_back({Tok::End, ""});
  return out;
}

// ---- Expressions and statements.

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum Kind { Literal, Var, Attr, Item, Slice, Call, Filter, Test, Not, Neg, Binary, Cond, List, Dict } kind;
  std::string name;           // Var, Attr: the name; Filter, Test: which; Binary: the operator
  Json value;                 // Literal
  std::vector<ExprPtr> args;  // the operands, the object first (Slice: object, start, stop, step; null when left out)
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negate = false;        // Test: `is not`
  int line = 0;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum Kind { Text, Output, If, For, Set, SetAttr, Break, Continue, Block } kind;
  std::string text;                                // Text
  ExprPtr expr;                                    // Output, Set, SetAttr: the value; For: the iterable
  ExprPtr filter;                                  // For: `for x in xs if cond`
  std::vector<std::string> names;                  // For: targets; Set: [name]; SetAttr: [name, attr]
  std::vector<std::pair<ExprPtr, Body>> branches;  // If: (condition, or null for else; body)
  Body body, otherwise;                            // For, Block: the body; For: its else
  int line = 0;
};

const std::set<std::string> kFilters = {"trim", "length", "count", "tojson", "upper", "lower", "capitalize", "first",
                                        "last", "join", "default", "d", "string", "int", "list", "items", "select",
                                        "reject", "replace", "safe"};
const std::set<std::string> kTests = {"defined", "undefined", "none", "string", "number", "integer", "boolean", "mapping",
                                      "iterable", "sequence", "true", "false", "odd", "even", "equalto", "eq", "sameas"};

// Recursive descent in Jinja's precedence: conditional, or, and, not, comparison, + -, ~, * // %,
// unary minus, then a primary with its postfixes (. [] ()) and filters and tests.
class ExprParser {
 public:
  ExprParser(const std::string& text, int line) : toks_(tokenize(text, line)), line_(line) {}

  ExprPtr expression(bool with_condition = true) {
    ExprPtr e = or_expr();
    if (!with_condition || !at_name("if")) return e;
    ++i_;
    ExprPtr cond = or_expr();
    ExprPtr otherwise = at_name("else") ? (++i_, expression()) : nullptr;   // none: undefined
    return make(Expr::Cond, "", std::move(cond), std::move(e), std::move(otherwise));
  }
  bool at_name(const char* n) const { return toks_[i_].kind == Tok::Name && toks_[i_].text == n; }
  bool at_op(const char* o) const { return toks_[i_].kind == Tok::Op && toks_[i_].text == o; }
  bool at_end() const { return toks_[i_].kind == Tok::End; }
  std::string name() {
    if (toks_[i_].kind != Tok::Name) fail(line_, str("expected a name, found '", toks_[i_].text, "'"));
    return toks_[i_++].text;
  }
  void expect_op(const char* o) {
    if (!at_op(o)) fail(line_, str("expected '", o, "', found '", toks_[i_].text, "'"));
    ++i_;
  }
  void expect_end() {
    if (!at_end()) fail(line_, str("unexpected '", toks_[i_].text, "'"));
  }

 private:
  template <class... E>
  ExprPtr make(Expr::Kind kind, std::string name, E&&... args) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->name = std::move(name);
    e->line = line_;
    (e->args.push_back(std::forward<E>(args)), ...);
    return e;
  }
  ExprPtr literal(Json v) {
    ExprPtr e = make(Expr::Literal, "");
    e->value = std::move(v);
    return e;
  }
  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (at_name("or")) ++i_, e = make(Expr::Binary, "or", std::move(e), and_expr());
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (at_name("and")) ++i_, e = make(Expr::Binary, "and", std::move(e), not_expr());
    return e;
  }
  ExprPtr not_expr() {
    if (!at_name("not")) return compare();
    ++i_;
    return make(Expr::Not, "", not_expr());
  }
  ExprPtr compare() {
    ExprPtr e = sum();
    std::string op;
    if (toks_[i_].kind == Tok::Op && std::set<std::string>{"==", "!=", "<", ">", "<=", ">="}.count(toks_[i_].text)) op = toks_[i_++].text;
    else if (at_name("in")) op = "in", ++i_;
    else if (at_name("not") && toks_[i_ + 1].kind == Tok::Name && toks_[i_ + 1].text == "in") op = "not in", i_ += 2;
    if (op.empty()) return e;
    e = make(Expr::Binary, op, std::move(e), sum());
    if (toks_[i_].kind == Tok::Op && std::strchr("=!<>", toks_[i_].text[0])) fail(line_, "chained comparisons are not supported");
    return e;
  }
  ExprPtr sum() {
    ExprPtr e = concat();
    while (at_op("+") || at_op("-")) {
      const std::string op = toks_[i_++].text;
      e = make(Expr::Binary, op, std::move(e), concat());
    }
    return e;
  }
  ExprPtr concat() {
    ExprPtr e = product();
    while (at_op("~")) ++i_, e = make(Expr::Binary, "~", std::move(e), product());
    return e;
  }
  ExprPtr product() {
    ExprPtr e = unary();
    while (at_op("*") || at_op("//") || at_op("%") || at_op("/") || at_op("**")) {
      const std::string op = toks_[i_++].text;
      if (op == "/" || op == "**") fail(line_, str("the operator ", op, " is not supported"));
      e = make(Expr::Binary, op, std::move(e), unary());
    }
    return e;
  }
  ExprPtr unary() {
    if (at_op("-")) {
      ++i_;
      return filters(make(Expr::Neg, "", postfix(primary())));
    }
    return filters(postfix(primary()));
  }
  ExprPtr primary() {
    const Tok t = toks_[i_++];
    if (t.kind == Tok::Str) {
      std::string s = t.text;
      while (toks_[i_].kind == Tok::Str) s += toks_[i_++].text;
      return literal(s);
    }
    if (t.kind == Tok::Int) return literal(t.num);
    if (t.kind == Tok::Name) {
      if (t.text == "true" || t.text == "True") return literal(true);
      if (t.text == "false" || t.text == "False") return literal(false);
      if (t.text == "none" || t.text == "None") return literal(Json());
      return make(Expr::Var, t.text);
    }
    if (t.text == "(") {
      ExprPtr e = expression();
      if (at_op(",")) fail(line_, "tuples are not supported");
      expect_op(")");
      return e;
    }
    if (t.text == "[" || t.text == "{") {
      const bool list = t.text == "[";
      ExprPtr e = make(list ? Expr::List : Expr::Dict, "");
      while (!at_op(list ? "]" : "}")) {
        e->args.push_back(expression());
        if (!list) expect_op(":"), e->args.push_back(expression());
        if (!at_op(",")) break;
        ++i_;
      }
      expect_op(list ? "]" : "}");
      return e;
    }
    fail(line_, t.kind == Tok::End ? "an expression ends early" : str("unexpected '", t.text, "'"));
  }
  ExprPtr postfix(ExprPtr e) {
    while (true) {
      if (at_op(".")) {
        ++i_;
        if (toks_[i_].kind == Tok::Int) e = make(Expr::Item, "", std::move(e), literal(toks_[i_++].num));
        else e = make(Expr::Attr, name(), std::move(e));
      } else if (at_op("[")) {
        ++i_;
        ExprPtr parts[3];
        int n = 0;
        for (; n < 3; ++n) {
          if (!at_op(":") && !at_op("]")) parts[n] = expression();
          if (!at_op(":")) break;
          ++i_;
        }
        expect_op("]");
        if (n == 0) e = make(Expr::Item, "", std::move(e), std::move(parts[0]));
        else e = make(Expr::Slice, "", std::move(e), std::move(parts[0]), std::move(parts[1]), std::move(parts[2]));
      } else if (at_op("(")) {
        e = make(Expr::Call, "", std::move(e));
        call_args(*e);
      } else {
        return e;
      }
    }
  }
  void call_args(Expr& e) {
    expect_op("(");
    while (!at_op(")")) {
      if (toks_[i_].kind == Tok::Name && toks_[i_ + 1].kind == Tok::Op && toks_[i_ + 1].text == "=") {
        std::string key = name();
        ++i_;
        e.kwargs.emplace_back(std::move(key), expression());
      } else {
        e.args.push_back(expression());
      }
      if (!at_op(",")) break;
      ++i_;
    }
    expect_op(")");
  }
  ExprPtr filters(ExprPtr e) {
    while (true) {
      if (at_op("|")) {
        ++i_;
        const std::string f = name();
        if (!kFilters.count(f)) fail(line_, str("the filter '", f, "' is not supported"));
        e = make(Expr::Filter, f, std::move(e));
        if (at_op("(")) call_args(*e);
      } else if (at_name("is")) {
        ++i_;
        const bool negate = at_name("not") ? (++i_, true) : false;
        const std::string test = name();
        if (!kTests.count(test)) fail(line_, str("the test '", test, "' is not supported"));
        e = make(Expr::Test, test, std::move(e));
        e->negate = negate;
        if (at_op("(")) call_args(*e);
        else if ((toks_[i_].kind == Tok::Str || toks_[i_].kind == Tok::Int || toks_[i_].kind == Tok::Name) &&
                 !at_name("else") && !at_name("or") && !at_name("and") && !at_name("if") && !at_name("in") && !at_name("not"))
          e->args.push_back(postfix(primary()));
      } else {
        return e;
      }
    }
  }

  std::vector<Tok> toks_;
  size_t i_ = 0;
  int line_;
};

// Statements up to a statement named in `stops`; returns its keyword ("" at the end of the source)
// and leaves the rest of that tag in `tail`.
std::string parse_body(const std::vector<Piece>& pieces, size_t& i, Body& body, const std::set<std::string>& stops,
                       std::unique_ptr<ExprParser>& tail);

// parse_body where the end of the source is an error: the `opener` statement is not closed.
std::string parse_until(const std::vector<Piece>& pieces, size_t& i, Body& body, const std::set<std::string>& stops,
                        std::unique_ptr<ExprParser>& tail, int line, const char* opener) {
  const std::string word = parse_body(pieces, i, body, stops, tail);
  if (word.empty()) fail(line, str("this {% ", opener, " %} has no {% end", opener, " %}"));
  return word;
}

std::unique_ptr<Stmt> parse_statement(const std::vector<Piece>& pieces, size_t& i, ExprParser& p, const std::string& word,
                                      int line) {
  auto s = std::make_unique<Stmt>();
  s->line = line;
  std::unique_ptr<ExprParser> tail;
  if (word == "if") {
    s->kind = Stmt::If;
    ExprPtr cond = p.expression();
    p.expect_end();
    while (true) {
      Body body;
      const std::string stop = parse_until(pieces, i, body, {"elif", "else", "endif"}, tail, line, "if");
      s->branches.emplace_back(std::move(cond), std::move(body));
      if (stop == "endif") break;
      if (stop == "else") {
        tail->expect_end();
        Body rest;
        if (parse_until(pieces, i, rest, {"endif"}, tail, line, "if") != "endif") fail(line, "{% else %} after {% else %}");
        s->branches.emplace_back(nullptr, std::move(rest));
        break;
      }
      cond = tail->expression();
      tail->expect_end();
    }
  } else if (word == "for") {
    s->kind = Stmt::For;
    do s->names.push_back(p.name());
    while (p.at_op(",") && (p.expect_op(","), true));
    if (!p.at_name("in")) fail(line, "expected 'in' in the for statement");
    p.name();
    s->expr = p.expression(false);
    if (p.at_name("if")) p.name(), s->filter = p.expression(false);
    if (p.at_name("recursive")) fail(line, "recursive for loops are not supported");
    p.expect_end();
    if (parse_until(pieces, i, s->body, {"else", "endfor"}, tail, line, "for") == "else") {
      tail->expect_end();
      parse_until(pieces, i, s->otherwise, {"endfor"}, tail, line, "for");
    }
  } else if (word == "set") {
    s->names.push_back(p.name());
    s->kind = p.at_op(".") ? Stmt::SetAttr : Stmt::Set;
    if (s->kind == Stmt::SetAttr) p.expect_op("."), s->names.push_back(p.name());
    if (!p.at_op("=")) fail(line, "only {% set name = value %} and {% set ns.attr = value %} are supported");
    p.expect_op("=");
    s->expr = p.expression();
    p.expect_end();
    return s;
  } else if (word == "break" || word == "continue") {
    s->kind = word == "break" ? Stmt::Break : Stmt::Continue;
    p.expect_end();
    return s;
  } else if (word == "generation") {
    s->kind = Stmt::Block;
    p.expect_end();
    parse_until(pieces, i, s->body, {"endgeneration"}, tail, line, "generation");
  } else {
    fail(line, str("the statement {% ", word, " %} is not supported"));
  }
  tail->expect_end();
  return s;
}

std::string parse_body(const std::vector<Piece>& pieces, size_t& i, Body& body, const std::set<std::string>& stops,
                       std::unique_ptr<ExprParser>& tail) {
  while (i < pieces.size()) {
    const Piece& piece = pieces[i++];
    auto s = std::make_unique<Stmt>();
    s->line = piece.line;
    if (piece.kind == Piece::Text) {
      s->kind = Stmt::Text;
      s->text = piece.text;
    } else if (piece.kind == Piece::Expr) {
      ExprParser p(piece.text, piece.line);
      s->kind = Stmt::Output;
      s->expr = p.expression();
      p.expect_end();
    } else {
      auto p = std::make_unique<ExprParser>(piece.text, piece.line);
      const std::string word = p->name();
      if (stops.count(word)) {
        tail = std::move(p);
        return word;
      }
      if (word.rfind("end", 0) == 0 || word == "elif" || word == "else")
        fail(piece.line, str("{% ", word, " %} closes no open statement"));
      s = parse_statement(pieces, i, *p, word, piece.line);
    }
    body.push_back(std::move(s));
  }
  return "";
}

// ---- Values and rendering.

struct Value {
  Value() = default;
  Value(Json v) : j(std::move(v)) {}   // NOLINT: values convert implicitly, as in Python
  Json j;
  bool undefined = false;
  std::string name;   // what was undefined, for the error when it is used
};

Value undefined(std::string name) {
  Value v;
  v.undefined = true;
  v.name = std::move(name);
  return v;
}

// Python's str.isspace for the code point at s[i] (UTF-8); its length through `len`.
bool py_space_at(const std::string& s, size_t i, size_t& len) {
  const unsigned char c = s[i];
  len = 1;
  if (c < 0x80) return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20);
  uint32_t cp = 0;
  len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
  if (i + len > s.size()) return false;
  cp = c & (0x3f >> (len - 1));
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (s[i + k] & 0x3f);
  return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

bool is_ascii(const std::string& s) {
  for (const char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

// Python's str.strip/lstrip/rstrip: whitespace, or the (ASCII) characters of `chars`.
std::string py_strip(const std::string& s, bool left, bool right, const std::string* chars, int line) {
  if (chars && !is_ascii(*chars)) fail(line, "strip() with non-ASCII characters is not supported");
  size_t a = 0, b = s.size(), len = 0;
  const auto strippable = [&](size_t i, size_t& n) {
    n = 1;
    return chars ? std::strchr(chars->c_str(), s[i]) != nullptr && s[i] != 0 : py_space_at(s, i, n);
  };
  while (left && a < b && strippable(a, len)) a += len;
  while (right && b > a) {
    size_t start = b - 1;
    while (start > a && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
    if (!strippable(start, len) || start + len != b) break;
    b = start;
  }
  return s.substr(a, b - a);
}

// json.dumps(v, ensure_ascii=False, indent=indent) as transformers' tojson writes it.
void dump_python(const Json& v, int indent, int depth, std::string& out) {
  const bool nested = v.is_array() || v.is_object();
  if (!nested) {
    if (v.is_number_float()) fail(0, "tojson of a float is not supported");
    out += v.dump(-1, ' ', false, Json::error_handler_t::strict);
    return;
  }
  if (v.empty()) {
    out += v.is_array() ? "[]" : "{}";
    return;
  }
  out += v.is_array() ? '[' : '{';
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    out += first ? "" : indent >= 0 ? "," : ", ";
    first = false;
    if (indent >= 0) out += '\n' + std::string(static_cast<size_t>(indent * (depth + 1)), ' ');
    if (v.is_object()) out += Json(it.key()).dump() + ": ";
    dump_python(*it, indent, depth + 1, out);
  }
  if (indent >= 0) out += '\n' + std::string(static_cast<size_t>(indent * depth), ' ');
  out += v.is_array() ? ']' : '}';
}

enum class Flow { Normal, Break, Continue };

class Renderer {
 public:
  explicit Renderer(const Json& globals) {
    scopes_.emplace_back();
    for (auto it = globals.begin(); it != globals.end(); ++it) scopes_[0][it.key()] = Value{it.value()};
  }

  Flow exec(const Body& body) {
    for (const auto& s : body) {
      const Flow f = exec(*s);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  std::string out;

 private:
  Flow exec(const Stmt& s) {
    switch (s.kind) {
      case Stmt::Text: out += s.text; break;
      case Stmt::Output: out += text_of(eval(*s.expr), s.line); break;
      case Stmt::If:
        for (const auto& [cond, body] : s.branches)
          if (!cond || truthy(eval(*cond))) return exec(body);
        break;
      case Stmt::For: return exec_for(s);
      case Stmt::Set: scopes_.back()[s.names[0]] = eval(*s.expr); break;
      case Stmt::SetAttr: {
        Value* ns = lookup(s.names[0]);
        if (!ns || !ns->j.is_object()) fail(s.line, str("'", s.names[0], "' is not a namespace"));
        ns->j[s.names[1]] = eval(*s.expr).j;
        break;
      }
      case Stmt::Break: return Flow::Break;
      case Stmt::Continue: return Flow::Continue;
      case Stmt::Block: return exec(s.body);
    }
    return Flow::Normal;
  }

  Flow exec_for(const Stmt& s) {
    const Value seq = eval(*s.expr);
    std::vector<Json> items;
    if (!seq.undefined) {
      if (seq.j.is_array()) items.assign(seq.j.begin(), seq.j.end());
      else if (seq.j.is_object())
        for (auto it = seq.j.begin(); it != seq.j.end(); ++it) items.push_back(it.key());
      else fail(s.line, "for loops over a string or a number are not supported");
    }
    std::vector<std::map<std::string, Value>> frames;
    for (const Json& item : items) {   // the `if` filter runs before loop.* is known, as in Jinja
      std::map<std::string, Value> frame;
      if (s.names.size() == 1) {
        frame[s.names[0]] = Value{item};
      } else {
        if (!item.is_array() || item.size() != s.names.size())
          fail(s.line, str("cannot unpack a loop item into ", s.names.size(), " names"));
        for (size_t k = 0; k < s.names.size(); ++k) frame[s.names[k]] = Value{item[k]};
      }
      scopes_.push_back(frame);
      const bool keep = !s.filter || truthy(eval(*s.filter));
      scopes_.pop_back();
      if (keep) frames.push_back(std::move(frame));
    }
    const long long n = static_cast<long long>(frames.size());
    for (long long k = 0; k < n; ++k) {
      Json loop = {{"index0", k},           {"index", k + 1},           {"first", k == 0},  {"last", k == n - 1},
                   {"length", n},           {"revindex", n - k},        {"revindex0", n - k - 1}, {"depth", 1},
                   {"depth0", 0}};
      if (k > 0) loop["previtem"] = frames[k - 1].begin()->second.j;
      if (k + 1 < n) loop["nextitem"] = frames[k + 1].begin()->second.j;
      if (s.names.size() > 1) loop.erase("previtem"), loop.erase("nextitem");   // tuples: not tracked
      scopes_.push_back(frames[k]);
      scopes_.back()["loop"] = Value{loop};
      const Flow f = exec(s.body);
      scopes_.pop_back();
      if (f == Flow::Break) break;
    }
    if (n == 0) return exec(s.otherwise);
    return Flow::Normal;
  }

  Value* lookup(const std::string& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      const auto found = it->find(name);
      if (found != it->end()) return &found->second;
    }
    return nullptr;
  }

  static bool truthy(const Value& v) {
    const Json& j = v.j;
    if (v.undefined || j.is_null()) return false;
    if (j.is_boolean()) return j.get<bool>();
    if (j.is_number_integer()) return j.get<long long>() != 0;
    if (j.is_string()) return !j.get_ref<const std::string&>().empty();   // json::empty() is false for any string
    if (j.is_array() || j.is_object()) return !j.empty();
    return j.get<double>() != 0;
  }

  static std::string text_of(const Value& v, int line) {
    const Json& j = v.j;
    if (v.undefined) return "";
    if (j.is_string()) return j.get<std::string>();
    if (j.is_boolean()) return j.get<bool>() ? "True" : "False";
    if (j.is_null()) return "None";
    if (j.is_number_integer()) return std::to_string(j.get<long long>());
    fail(line, "printing a list, mapping or float is not supported (use tojson)");
  }

  static void need_defined(const Value& v, int line) {
    if (v.undefined) fail(line, str("'", v.name, "' is undefined"));
  }

  static const std::string& as_string(const Value& v, int line, const char* what) {
    need_defined(v, line);
    if (!v.j.is_string()) fail(line, str(what, " needs a string"));
    return v.j.get_ref<const std::string&>();
  }

  static long long as_int(const Value& v, int line, const char* what) {
    need_defined(v, line);
    if (!v.j.is_number_integer()) fail(line, str(what, " needs an integer"));
    return v.j.get<long long>();
  }

  static bool equal(const Value& a, const Value& b) {
    if (a.undefined || b.undefined) return a.undefined && b.undefined;
    if (a.j.is_boolean() && b.j.is_number_integer()) return static_cast<long long>(a.j.get<bool>()) == b.j.get<long long>();
    if (b.j.is_boolean() && a.j.is_number_integer()) return static_cast<long long>(b.j.get<bool>()) == a.j.get<long long>();
    return a.j == b.j;
  }

  Value item(const Value& obj, const Value& key, int line) {
    need_defined(obj, line);
    const Json& o = obj.j;
    if (o.is_object() && key.j.is_string()) {
      const auto it = o.find(key.j.get<std::string>());
      return it == o.end() ? undefined(key.j.get<std::string>()) : Value{*it};
    }
    if (o.is_array() && key.j.is_number_integer()) {
      long long k = key.j.get<long long>();
      if (k < 0) k += static_cast<long long>(o.size());
      return k < 0 || k >= static_cast<long long>(o.size()) ? undefined("an index out of range") : Value{o[k]};
    }
    if (o.is_string()) fail(line, "indexing a string is not supported");
    return undefined(key.j.is_string() ? key.j.get<std::string>() : key.j.dump());
  }

  Value slice(const Expr& e) {
    const Value obj = eval(*e.args[0]);
    need_defined(obj, e.line);
    const bool text = obj.j.is_string();
    if (!obj.j.is_array() && !(text && is_ascii(obj.j.get<std::string>())))
      fail(e.line, "slicing needs a list or an ASCII string");
    const long long n = text ? static_cast<long long>(obj.j.get<std::string>().size()) : static_cast<long long>(obj.j.size());
    const long long step = e.args[3] ? as_int(eval(*e.args[3]), e.line, "a slice step") : 1;
    if (step == 0) fail(e.line, "a slice step of 0");
    // Python's slice bounds: negatives count from the end, then clamp to the range the step walks.
    const auto bound = [&](const ExprPtr& x, long long fallback) {
      if (!x) return fallback;
      long long v = as_int(eval(*x), e.line, "a slice bound");
      if (v < 0) v += n;
      return step > 0 ? std::clamp(v, 0LL, n) : std::clamp(v, -1LL, n - 1);
    };
    const long long start = bound(e.args[1], step > 0 ? 0 : n - 1), stop = bound(e.args[2], step > 0 ? n : -1);
    Json out = text ? Json("") : Json::array();
    for (long long k = start; step > 0 ? k < stop : k > stop; k += step) {
      if (text) out.get_ref<std::string&>() += obj.j.get<std::string>()[k];
      else out.push_back(obj.j[k]);
    }
    return Value{out};
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    const Value a = eval(*e.args[0]);
    if (op == "and") return truthy(a) ? eval(*e.args[1]) : a;
    if (op == "or") return truthy(a) ? a : eval(*e.args[1]);
    const Value b = eval(*e.args[1]);
    if (op == "~") return Value{text_of(a, e.line) + text_of(b, e.line)};
    if (op == "==") return Value{equal(a, b)};
    if (op == "!=") return Value{!equal(a, b)};
    if (op == "in" || op == "not in") {
      bool found = false;
      if (b.j.is_string()) found = b.j.get<std::string>().find(as_string(a, e.line, "'in' a string")) != std::string::npos;
      else if (b.j.is_array())
        for (const Json& x : b.j) found = found || equal(a, Value{x});
      else if (b.j.is_object()) found = a.j.is_string() && b.j.contains(a.j.get<std::string>());
      else if (!b.undefined) fail(e.line, "'in' needs a string, list or mapping");
      return Value{found == (op == "in")};
    }
    need_defined(a, e.line);
    need_defined(b, e.line);
    const Json &x = a.j, &y = b.j;
    if (x.is_number_integer() && y.is_number_integer()) {
      const long long p = x.get<long long>(), q = y.get<long long>();
      if (op == "+") return Value{p + q};
      if (op == "-") return Value{p - q};
      if (op == "*") return Value{p * q};
      if (op == "<") return Value{p < q};
      if (op == ">") return Value{p > q};
      if (op == "<=") return Value{p <= q};
      if (op == ">=") return Value{p >= q};
      if (q == 0) fail(e.line, "division by zero");
      const long long d = p / q - ((p % q != 0) && ((p < 0) != (q < 0)));   // Python's floor division
      return Value{op == "//" ? d : p - d * q};
    }
    if (x.is_string() && y.is_string()) {
      const std::string &p = x.get_ref<const std::string&>(), &q = y.get_ref<const std::string&>();
      if (op == "+") return Value{p + q};
      if (op == "<") return Value{p < q};
      if (op == ">") return Value{p > q};
      if (op == "<=") return Value{p <= q};
      if (op == ">=") return Value{p >= q};
    }
    if (op == "+" && x.is_array() && y.is_array()) {
      Json out = x;
      out.insert(out.end(), y.begin(), y.end());
      return Value{out};
    }
    if (op == "*" && x.is_string() && y.is_number_integer()) {
      std::string out;
      for (long long k = 0; k < y.get<long long>(); ++k) out += x.get<std::string>();
      return Value{out};
    }
    fail(e.line, str("the operator ", op, " is not supported between ", x.type_name(), " and ", y.type_name()));
  }

  bool test(const std::string& t, const Value& v, const std::vector<Value>& args, int line) {
    const Json& j = v.j;
    if (t == "defined") return !v.undefined;
    if (t == "undefined") return v.undefined;
    if (v.undefined) return false;
    if (t == "none") return j.is_null();
    if (t == "string") return j.is_string();
    if (t == "number") return j.is_number();
    if (t == "integer") return j.is_number_integer();
    if (t == "boolean") return j.is_boolean();
    if (t == "mapping") return j.is_object();
    if (t == "iterable" || t == "sequence") return j.is_string() || j.is_array() || j.is_object();
    if (t == "true" || t == "false") return j.is_boolean() && j.get<bool>() == (t == "true");
    if (t == "odd" || t == "even") return as_int(v, line, "the test odd/even") % 2 == (t == "odd" ? 1 : 0);
    if (args.size() != 1) fail(line, str("the test '", t, "' takes one argument"));
    if (t == "sameas") return !args[0].undefined && j.type() == args[0].j.type() && j == args[0].j;
    return equal(v, args[0]);
  }

  Value filter(const Expr& e) {
    const std::string& f = e.name;
    const Value v = eval(*e.args[0]);
    std::vector<Value> args;
    for (size_t k = 1; k < e.args.size(); ++k) args.push_back(eval(*e.args[k]));
    const auto no_kwargs = [&] {
      if (!e.kwargs.empty()) fail(e.line, str("the filter '", f, "' takes no keyword arguments here"));
    };
    if (f == "tojson") {
      int indent = -1;
      for (const auto& [key, x] : e.kwargs) {
        if (key != "indent") fail(e.line, str("tojson(", key, "=...) is not supported"));
        indent = static_cast<int>(as_int(eval(*x), e.line, "tojson's indent"));
      }
      if (!args.empty()) indent = static_cast<int>(as_int(args[0], e.line, "tojson's indent"));
      need_defined(v, e.line);
      std::string out;
      dump_python(v.j, indent, 0, out);
      return Value{out};
    }
    no_kwargs();
    if (f == "default" || f == "d") {
      const bool boolean = args.size() > 1 && truthy(args[1]);
      return v.undefined || (boolean && !truthy(v)) ? (args.empty() ? Value{""} : args[0]) : v;
    }
    if (f == "safe") return v;
    if (f == "length" || f == "count") {
      if (v.undefined) return Value{0};
      if (v.j.is_string()) {
        long long n = 0;
        for (const char c : v.j.get<std::string>()) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
        return Value{n};
      }
      if (!v.j.is_array() && !v.j.is_object()) fail(e.line, "length needs a string, list or mapping");
      return Value{static_cast<long long>(v.j.size())};
    }
    if (f == "first" || f == "last") {
      need_defined(v, e.line);
      if (!v.j.is_array()) fail(e.line, str(f, " needs a list"));
      return v.j.empty() ? undefined(f) : Value{f == "first" ? v.j.front() : v.j.back()};
    }
    if (f == "list" || f == "items" || f == "join" || f == "select" || f == "reject") {
      need_defined(v, e.line);
      Json items = Json::array();
      if (v.j.is_array()) items = v.j;
      else if (v.j.is_object())
        for (auto it = v.j.begin(); it != v.j.end(); ++it) items.push_back(f == "items" ? Json{it.key(), it.value()} : Json(it.key()));
      else fail(e.line, str(f, " needs a list or mapping"));
      if (f == "items" && !v.j.is_object()) fail(e.line, "items needs a mapping");
      if (f == "join") {
        std::string out, sep = args.empty() ? "" : as_string(args[0], e.line, "join's separator");
        for (size_t k = 0; k < items.size(); ++k) out += (k ? sep : "") + text_of(Value{items[k]}, e.line);
        return Value{out};
      }
      if (f == "select" || f == "reject") {
        if (args.empty()) fail(e.line, str(f, " needs a test name"));
        const std::string t = as_string(args[0], e.line, f.c_str());
        if (!kTests.count(t)) fail(e.line, str("the test '", t, "' is not supported"));
        Json kept = Json::array();
        for (const Json& x : items)
          if (test(t, Value{x}, std::vector<Value>(args.begin() + 1, args.end()), e.line) == (f == "select")) kept.push_back(x);
        return Value{kept};
      }
      return Value{items};
    }
    if (f == "string") return Value{text_of(v, e.line)};
    if (f == "int") {
      if (v.j.is_number_integer()) return v;
      if (v.j.is_boolean()) return Value{static_cast<long long>(v.j.get<bool>())};
      fail(e.line, "int needs an integer or boolean");
    }
    const std::string s = text_of(v, e.line);
    if (f == "trim") return Value{py_strip(s, true, true, args.empty() ? nullptr : &as_string(args[0], e.line, "trim"), e.line)};
    if (f == "replace") {
      if (args.size() != 2) fail(e.line, "replace takes two arguments");
      return Value{replace_all(s, as_string(args[0], e.line, "replace"), as_string(args[1], e.line, "replace"))};
    }
    return Value{change_case(s, f, e.line)};
  }

  static std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    if (from.empty()) return s;
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
    return s;
  }

  // upper, lower, capitalize: ASCII text only, where C and Python agree.
  static std::string change_case(std::string s, const std::string& how, int line) {
    if (!is_ascii(s)) fail(line, str(how, " of non-ASCII text is not supported"));
    for (size_t k = 0; k < s.size(); ++k) {
      const bool up = how == "upper" || (how == "capitalize" && k == 0);
      s[k] = static_cast<char>(up ? std::toupper(static_cast<unsigned char>(s[k])) : std::tolower(static_cast<unsigned char>(s[k])));
    }
    return s;
  }

  Value call(const Expr& e) {
    const Expr& callee = *e.args[0];
    std::vector<Value> args;
    for (size_t k = 1; k < e.args.size(); ++k) args.push_back(eval(*e.args[k]));
    if (callee.kind == Expr::Var && !lookup(callee.name)) {
      if (callee.name == "raise_exception")
        throw JinjaError(str("line ", e.line, ": the template raised: ",
                             args.empty() ? std::string("(no message)") : text_of(args[0], e.line)));
      if (callee.name == "namespace") {
        Json ns = Json::object();
        for (const auto& [key, x] : e.kwargs) ns[key] = eval(*x).j;
        return Value{ns};
      }
      if (callee.name == "range" && e.kwargs.empty() && args.size() == 1) {
        Json out = Json::array();
        for (long long k = 0; k < as_int(args[0], e.line, "range"); ++k) out.push_back(k);
        return Value{out};
      }
      fail(e.line, str("the function ", callee.name, "() is not supported"));
    }
    if (callee.kind != Expr::Attr || !e.kwargs.empty()) fail(e.line, "this call is not supported");
    const Value obj = eval(*callee.args[0]);
    need_defined(obj, e.line);
    const std::string& m = callee.name;
    if (obj.j.is_object() && (m == "get" || m == "items" || m == "keys" || m == "values")) {
      if (m == "get") {
        if (args.empty()) fail(e.line, "get needs a key");
        const Value got = item(obj, args[0], e.line);
        return got.undefined ? (args.size() > 1 ? args[1] : Value{Json()}) : got;
      }
      Json out = Json::array();
      for (auto it = obj.j.begin(); it != obj.j.end(); ++it)
        out.push_back(m == "items" ? Json{it.key(), it.value()} : m == "keys" ? Json(it.key()) : it.value());
      return Value{out};
    }
    if (!obj.j.is_string()) fail(e.line, str("the method ", m, "() is not supported on a ", obj.j.type_name()));
    const std::string& s = obj.j.get_ref<const std::string&>();
    const auto arg = [&](size_t k) { return as_string(args.at(k), e.line, m.c_str()); };
    if (m == "strip" || m == "lstrip" || m == "rstrip") {
      const std::string chars = args.empty() || args[0].j.is_null() ? "" : arg(0);
      return Value{py_strip(s, m != "rstrip", m != "lstrip", args.empty() || args[0].j.is_null() ? nullptr : &chars, e.line)};
    }
    if ((m == "startswith" || m == "endswith") && args.size() == 1) {
      const std::string& x = arg(0);
      const bool at = x.size() <= s.size() && s.compare(m == "startswith" ? 0 : s.size() - x.size(), x.size(), x) == 0;
      return Value{at};
    }
    if (m == "split" && args.size() == 1) {
      const std::string& sep = arg(0);
      if (sep.empty()) fail(e.line, "split with an empty separator");
      Json out = Json::array();
      size_t from = 0;
      for (size_t at; (at = s.find(sep, from)) != std::string::npos; from = at + sep.size()) out.push_back(s.substr(from, at - from));
      out.push_back(s.substr(from));
      return Value{out};
    }
    if (m == "replace" && args.size() == 2) return Value{replace_all(s, arg(0), arg(1))};
    if ((m == "upper" || m == "lower") && args.empty()) return Value{change_case(s, m, e.line)};
    fail(e.line, str("the string method ", m, "() with ", args.size(), " argument(s) is not supported"));
  }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Literal: return Value{e.value};
      case Expr::Var: {
        const Value* v = lookup(e.name);
        return v ? *v : undefined(e.name);
      }
      case Expr::Attr: {
        const Value obj = eval(*e.args[0]);
        if (!obj.undefined && obj.j.is_null()) return undefined(e.name);
        return item(obj, Value{e.name}, e.line);
      }
      case Expr::Item: return item(eval(*e.args[0]), eval(*e.args[1]), e.line);
      case Expr::Slice: return slice(e);
      case Expr::Call: return call(e);
      case Expr::Filter: return filter(e);
      case Expr::Test: {
        std::vector<Value> args;
        for (size_t k = 1; k < e.args.size(); ++k) args.push_back(eval(*e.args[k]));
        return Value{test(e.name, eval(*e.args[0]), args, e.line) != e.negate};
      }
      case Expr::Not: return Value{!truthy(eval(*e.args[0]))};
      case Expr::Neg: return Value{-as_int(eval(*e.args[0]), e.line, "unary minus")};
      case Expr::Binary: return binary(e);
      case Expr::Cond:
        if (truthy(eval(*e.args[0]))) return eval(*e.args[1]);
        return e.args[2] ? eval(*e.args[2]) : undefined("the missing else");
      case Expr::List: {
        Json out = Json::array();
        for (const auto& x : e.args) out.push_back(eval(*x).j);
        return Value{out};
      }
      case Expr::Dict: {
        Json out = Json::object();
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) out[as_string(eval(*e.args[k]), e.line, "a dict key")] = eval(*e.args[k + 1]).j;
        return Value{out};
      }
    }
    return undefined("");
  }

  std::vector<std::map<std::string, Value>> scopes_;
};

}  // namespace

struct JinjaTemplate::Program {
  Body body;
};

JinjaTemplate::JinjaTemplate(const std::string& source) : program_(std::make_unique<Program>()) {
  // As Jinja loads a template: newlines normalized to \n, one trailing newline dropped.
  std::string text;
  for (size_t k = 0; k < source.size(); ++k) {
    if (source[k] != '\r') text += source[k];
    else if (k + 1 == source.size() || source[k + 1] != '\n') text += '\n';
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  const std::vector<Piece> pieces = split_pieces(text);
  size_t i = 0;
  std::unique_ptr<ExprParser> tail;
  parse_body(pieces, i, program_->body, {}, tail);
}

JinjaTemplate::~JinjaTemplate() = default;
JinjaTemplate::JinjaTemplate(JinjaTemplate&&) noexcept = default;
JinjaTemplate& JinjaTemplate::operator=(JinjaTemplate&&) noexcept = default;

std::string jinja_trim(const std::string& text) { return py_strip(text, true, true, nullptr, 0); }

std::string JinjaTemplate::render(const nlohmann::ordered_json& variables) const {
  Renderer r(variables);
  if (r.exec(program_->body) != Flow::Normal) throw JinjaError("{% break %} or {% continue %} outside a for loop");
  return std::move(r.out);
}

}  // namespace trident
