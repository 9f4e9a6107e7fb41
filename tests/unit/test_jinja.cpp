// The Jinja interpreter of chat templates: whitespace control as transformers sets it (trim_blocks,
// lstrip_blocks), loops and their variables, namespaces, filters, tests and methods with Python's
// results, and refusals (one JinjaError naming the line and the construct) for what it does not run.
#include <gtest/gtest.h>

#include "trident/io/jinja.hpp"

namespace trident {
namespace {

using Json = nlohmann::ordered_json;

std::string render(const std::string& source, const Json& vars = Json::object()) {
  return JinjaTemplate(source).render(vars);
}

// The JinjaError message of parsing and rendering `source`; "" when it renders.
std::string error_of(const std::string& source, const Json& vars = Json::object()) {
  try {
    render(source, vars);
  } catch (const JinjaError& e) {
    return e.what();
  }
  return "";
}

const Json kChat = {{"messages", Json::array({{{"role", "system"}, {"content", " Be brief. "}},
                                              {{"role", "user"}, {"content", "2+3?"}},
                                              {{"role", "assistant"}, {"content", "5"}}})}};

TEST(Jinja, WhitespaceControlAsTransformersSetsIt) {
  // trim_blocks drops the newline after a block tag, lstrip_blocks the indentation before it; '-' strips
  // all whitespace on its side, '+' keeps the indentation; one trailing newline of the source goes.
  EXPECT_EQ(render("a\n  {% if true %}\n  x\n  {% endif %}\nb\n"), "a\n  x\nb");
  EXPECT_EQ(render("a  \n  {%- if true -%}  \n b \n {%- endif %}!"), "ab!");
  EXPECT_EQ(render("a\n  {# note #}\nb {{ 'c' -}}  \n d"), "a\nb cd");
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
  EXPECT_EQ(render("{{ {'a': {'b': 1}} | tojson }}"), "{\"a\": {\"b\": 1}}");   // }} inside braces
}

TEST(Jinja, LoopsAndTheirVariables) {
  EXPECT_EQ(render("{% for m in messages %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}"
                   "{{ loop.length }};{% endfor %}", kChat),
            "01TrueFalse3;12FalseFalse3;23FalseTrue3;");
  EXPECT_EQ(render("{% for m in messages[1:] if m.role == 'assistant' %}{{ m.content }}{% endfor %}", kChat), "5");
  EXPECT_EQ(render("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% elif i == 3 %}{% break %}{% endif %}"
                   "{{ i }}{% endfor %}{% for x in [] %}{% else %}empty{% endfor %}"),
            "02empty");
  EXPECT_EQ(render("{% for k, v in {'b': 1, 'a': 2} | items %}{{ k }}{{ v }}{% endfor %}"), "b1a2");
  // A set inside a loop is the iteration's own; a namespace carries values out.
  EXPECT_EQ(render("{% set a = 1 %}{% set ns = namespace(n=0) %}{% for m in messages %}{% set a = 2 %}"
                   "{% set ns.n = ns.n + a %}{% endfor %}{{ a }} {{ ns.n }}",
                   kChat),
            "1 6");
}

TEST(Jinja, ExpressionsWithPythonResults) {
  EXPECT_EQ(render("{{ messages[0]['content'] | trim }}|{{ messages[-1].content ~ 1 }}|{{ 'abc'[::-1] }}", kChat),
            "Be brief.|51|cba");
  EXPECT_EQ(render("{{ -7 // 2 }} {{ -7 % 3 }} {{ 'a' * 2 }} {{ 1 == true }} {{ 'y' if x else 'n' }} {{ x or 'o' }}"),
            "-4 2 aa True n o");
  EXPECT_EQ(render("{{ x is defined }}{{ x is not defined }}{{ none is none }}{{ 'a' is string }}{{ {} is mapping }}"),
            "FalseTrueTrueTrueTrue");
  EXPECT_EQ(render("{{ 'role' in messages[0] }}{{ 'ss' in 'class' }}{{ 3 not in [1, 2] }}", kChat), "TrueTrueTrue");
}

TEST(Jinja, FiltersAndMethods) {
  EXPECT_EQ(render("{{ ' x '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('b') }}"),
            "x|a|TrueFalse");
  EXPECT_EQ(render("{{ '<think>r</think>\\nans'.split('</think>')[-1].lstrip('\\n') }}"), "ans");
  EXPECT_EQ(render("{{ 'Hi' | upper }}{{ 'Hi' | lower }}{{ [3, 4] | first }}{{ [3, 4] | last }}{{ 'ça' | length }}"),
            "HIhi342");
  EXPECT_EQ(render("{{ y | default('d') }}{{ [1, none] | reject('none') | list | length }}{{ ['a', 'b'] | join('-') }}"),
            "d1a-b");
  EXPECT_EQ(render("{{ {'a': [1, 'é', none, true]} | tojson }}"), "{\"a\": [1, \"é\", null, true]}");
  EXPECT_EQ(render("{{ {'a': [1]} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(render("{{ {'a': 1}.get('b', 2) }}{{ {'a': 1}.get('a') }}"), "21");
  // Python's str.strip() removes Unicode whitespace (U+00A0, U+3000), not only ASCII.
  EXPECT_EQ(render("{{ s | trim }}|", {{"s", "\xc2\xa0x\xe3\x80\x80"}}), "x|");
}

TEST(Jinja, RefusesWhatItDoesNotRun) {
  EXPECT_EQ(error_of("a\n{% macro f() %}{% endmacro %}"), "line 2: the statement {% macro %} is not supported");
  EXPECT_EQ(error_of("{{ x | map('upper') }}"), "line 1: the filter 'map' is not supported");
  EXPECT_EQ(error_of("{{ x is divisibleby(3) }}"), "line 1: the test 'divisibleby' is not supported");
  EXPECT_EQ(error_of("{{ 1.5 }}"), "line 1: float literals are not supported");
  EXPECT_EQ(error_of("{{ 'é' | upper }}"), "line 1: upper of non-ASCII text is not supported");
  EXPECT_EQ(error_of("{{ [1] }}"), "line 1: printing a list, mapping or float is not supported (use tojson)");
  EXPECT_EQ(error_of("{{ strftime_now('%Y') }}"), "line 1: the function strftime_now() is not supported");
  EXPECT_EQ(error_of("{{ 'a'.title() }}"), "line 1: the string method title() with 0 argument(s) is not supported");
  EXPECT_EQ(error_of("{% if x %}a"), "line 1: this {% if %} has no {% endif %}");
  EXPECT_EQ(error_of("{% endfor %}"), "line 1: {% endfor %} closes no open statement");
  EXPECT_EQ(error_of("{{ x"), "line 1: the tag opened here has no }}");
  EXPECT_EQ(error_of("{{ y.a }}"), "line 1: 'y' is undefined");
  EXPECT_EQ(error_of("{{ 'a' + 1 }}"), "line 1: the operator + is not supported between string and number");
  EXPECT_EQ(error_of("{{ raise_exception('no system role') }}"), "line 1: the template raised: no system role");
  EXPECT_EQ(error_of("{{ '\\u00a0' }}"), "line 1: the string escape \\u is not supported");
}

TEST(Jinja, GenerationBlocksRenderTheirBody) {
  EXPECT_EQ(render("{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}"
                   "{% endgeneration %}{% endif %}{% endfor %}",
                   kChat),
            "5");
}

}  // namespace
}  // namespace trident
