#!/usr/bin/env python3
"""trident's Jinja interpreter (jinja_render) against Python's jinja2, set up the way transformers'
apply_chat_template renders chat templates; every render compared byte for byte.
   check_chat_templates.py JINJA_RENDER FIXTURE_DIR"""
import json
import os
import subprocess
import sys
import tempfile

import jinja2
import jinja2.ext
import jinja2.sandbox


def hf_environment():
    # As transformers' _compile_jinja_template: a sandbox with trim_blocks, lstrip_blocks, loop
    # controls, raise_exception and a tojson that keeps non-ASCII text.
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def msg(role, content):
    return {"role": role, "content": content}


CONVERSATIONS = [
    [msg("user", "What is 2 + 3?"), msg("assistant", "5")],
    [msg("system", "Answer with the number only."), msg("user", "2+3?"), msg("assistant", " 5 "),
     msg("user", "and 2+4?\n"), msg("assistant", "6\n\n")],
    [msg("user", "Hi"), msg("assistant", "Hello! How can I help?"), msg("user", "Tell me a joke."),
     msg("assistant", "Why did the chicken cross the road?")],
    [msg("system", "\u00a0Tu es bref.\u3000"), msg("user", "Ça va ? {{ not a tag }} {% if %}"),
     msg("assistant", "\tOui, \"très\" bien — merci ! 'quotes' \\ backslash\n")],
    [msg("user", "Only a question")],
]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                         "required": ["city"]}}}]
TOOL_CALL = [msg("user", "Weather in Paris?"),
             {"role": "assistant", "content": "",
              "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
             {"role": "tool", "content": "22 C, sunny"}, msg("assistant", "It is 22 C and sunny.")]

# Per real template: extra variable sets beyond the plain conversations.
EXTRA = {
    "llama3_1": [{"tools": TOOLS}, {"tools": TOOLS, "tools_in_user_message": False}, {"date_string": "01 Jan 2025"},
                 {"messages": TOOL_CALL}, {"messages": TOOL_CALL, "builtin_tools": ["get_weather", "code_interpreter"]}],
    "qwen2_5": [{"tools": TOOLS}, {"messages": TOOL_CALL}],
}

# Small templates, one or a few constructs each, rendered with `messages` = CONVERSATIONS[1] and x = 'xv'.
CONSTRUCTS = [
    "{{ messages[1:] | length }}|{{ messages[-1].content }}|{{ 'abc'[::-1] }}|{{ [1, 2, 3][1:] | join(',') }}"
    "|{{ messages[0]['role'] }}|{{ 'abcdef'[1:5:2] }}|{{ [1, 2, 3][-2:] | join }}|{{ messages[9] is defined }}",
    "{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
    "{{ loop.revindex }}{{ loop.revindex0 }};{% endfor %}",
    "{% set ns = namespace(n=0, s='') %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
    "{% set ns.s = ns.s ~ m.role[0:1] %}{% endfor %}{{ ns.n }} {{ ns.s }}",
    "{{ x is defined }}{{ y is defined }}{{ y is undefined }}{{ none is none }}{{ 'a' is string }}{{ 3 is number }}"
    "{{ 3 is odd }}{{ 4 is even }}{{ {} is mapping }}{{ x is not none }}{{ [] is iterable }}{{ true is boolean }}"
    "{{ 3 is integer }}{{ 1 is sameas true }}{{ 2 is equalto 2 }}{{ x is eq('xv') }}{{ messages is sequence }}",
    "{{ '  Hi \n' | trim }}|{{ 'Hi' | upper }}{{ 'Hi' | lower }}{{ 'hI' | capitalize }}|{{ [1, 2] | first }}"
    "{{ [1, 2] | last }}|{{ y | default('d') }}{{ '' | default('e', true) }}{{ x | d('no') }}|{{ 'xy' | length }}"
    "{{ 'ça' | count }}|{{ 3 | string }}{{ true | int }}|{{ 'a-b' | replace('-', '+') }}|{{ 'x' | safe }}",
    "{{ {'a': 1, 'b': [1, 'x', none, true]} | tojson }}|{{ {'a': {'b': [], 'c': {}}, 'd': [1]} | tojson(indent=2) }}"
    "|{{ 'a\"b\\n\u00e9\t' | tojson }}|{{ messages | tojson }}|{{ [] | tojson(indent=4) }}",
    "{{ ' x '.strip() }}|{{ 'xxaxx'.strip('x') }}{{ '  a'.lstrip() }}{{ 'a  '.rstrip() }}|{{ 'abc'.startswith('ab') }}"
    "{{ 'abc'.endswith('bc') }}{{ 'abc'.startswith('c') }}|{{ 'a,b,,c'.split(',') | join(';') }}"
    "|{{ '<think>r</think>\\nans'.split('</think>')[-1].lstrip('\\n') }}|{{ {'a': 1}.get('a') }}{{ {'a': 1}.get('b', 2) }}"
    "{{ {'a': 1}.get('b') }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}{{ 'aXa'.replace('a', 'b') }}"
    "|{{ {'a': 1, 'b': 2}.keys() | join }}{{ {'a': 1, 'b': 2}.values() | join }}",
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 'a' + 'b' }} {{ 'a' ~ 1 ~ true ~ none }} {{ 2 * 3 }} "
    "{{ 'ab' * 2 }} {{ 1 < 2 }} {{ 2 <= 1 }} {{ 'b' > 'a' }} {{ 'a' in 'cat' }} {{ 'x' not in ['y'] }} {{ 1 == true }} "
    "{{ 'role' in messages[0] }} {{ (1 if false) is defined }} {{ 'y' if x else 'n' }} {{ x or 'o' }} {{ y or 'o' }} "
    "{{ x and 'a' }} {{ not x }} {{ not y is defined }} {{ [1] + [2] | length }} {{ ([1] + [2]) | length }} {{ -3 + 1 }}",
    "a  \n  {%- if true -%}  \n b \n {%- endif %}\n\n{# c #}\n  {{- 'd' }} \n  {% if true %}\n   e\n  {% endif %}\n"
    "{%+ if true %}f{% endif %}\n g {{ 'h' -}}\n\ni\n{% if true +%}\nj{# k -#}  l\n  {#- m #}\nn",
    "{% for m in messages if m.role == 'user' %}{{ m.content }}{% if loop.last %}.{% endif %}{% else %}none{% endfor %}"
    "|{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}"
    "{% endfor %}|{% for k, v in {'b': 1, 'a': 2} | items %}{{ k }}={{ v }};{% endfor %}"
    "|{% for x in [] %}x{% else %}empty{% endfor %}|{% for k in {'q': 1, 'p': 2} %}{{ k }}{% endfor %}",
    "{% set a = 1 %}{% for i in [1] %}{% set a = 2 %}{{ a }}{% endfor %}{{ a }}{% if true %}{% set b = 3 %}{% endif %}{{ b }}",
    "{% for i in range(4) %}{% if i == 0 %}z{% elif i == 1 %}o{% elif i == 2 %}t{% else %}e{% endif %}{% endfor %}",
    "{{ [1, 'a'] | length }}{{ {'k': 'v'}['k'] }}{{ {'k': 'v'}.k }}{{ [[1, 2]][0][1] }}{{ messages.0.role }}",
    "{% for i in [1, 2, 3] %}{{ loop.previtem is defined }}{{ loop.nextitem | default('-') }}{% endfor %}",
    "{{ [1, none, 2] | reject('none') | list | length }}{{ ['a', 'b'] | select('equalto', 'a') | join }}"
    "{{ [1, 2, 3, 4] | select('odd') | join(',') }}",
    "{{ raise_exception('bad ' ~ x) }}",
    "{{ y.a }}",
    "{{ 'a' + 1 }}",
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set sys = messages[0]['content'] %}"
    "{% else %}{% set loop_messages = messages %}{% set sys = false %}{% endif %}{% for message in loop_messages %}"
    "{% if loop.index0 == 0 and sys != false %}{% set content = '<<SYS>>\\n' + sys + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
]

# Outside the subset: trident must refuse these (jinja2 may render them).
UNSUPPORTED = [
    "{% macro f(x) %}{{ x }}{% endmacro %}{{ f(1) }}",
    "{{ 1.5 }}",
    "{{ messages | map(attribute='role') | join }}",
    "{% set a, b = 1, 2 %}",
    "{{ strftime_now('%Y') }}",
    "{% filter upper %}a{% endfilter %}",
    "{{ 'é' | upper }}",
    "{{ messages }}",
    "{{ 'a' < 'b' < 'c' }}",
    "{% if true %}unclosed",
    "{{ 'abc'.title() }}",
]


def render_all(tool, source, cases):
    with tempfile.TemporaryDirectory() as d:
        tpl, cs = os.path.join(d, "t.jinja"), os.path.join(d, "c.json")
        with open(tpl, "w", encoding="utf-8", newline="") as f:
            f.write(source)
        with open(cs, "w", encoding="utf-8") as f:
            json.dump(cases, f)
        out = subprocess.run([tool, tpl, cs], check=True, capture_output=True, text=True, encoding="utf-8").stdout
    return json.loads(out)


def reference(env, source, variables):
    try:
        return {"text": env.from_string(source).render(**variables)}
    except (jinja2.exceptions.TemplateError, TypeError) as e:
        return {"error": str(e)}


def compare(tool, env, name, source, cases, failures):
    ours = render_all(tool, source, cases)
    for variables, got in zip(cases, ours):
        want = reference(env, source, variables)
        label = f"{name} with {json.dumps(variables, ensure_ascii=False)[:160]}"
        if "error" in want:
            if "error" not in got:
                failures.append(f"{label}: jinja2 fails ({want['error']}), trident renders {got['text']!r}")
            elif "raise" in source and want["error"] not in got["error"]:
                failures.append(f"{label}: trident's error {got['error']!r} does not carry {want['error']!r}")
        elif "error" in got:
            failures.append(f"{label}: trident fails: {got['error']}")
        elif got["text"] != want["text"]:
            failures.append(f"{label}:\n  jinja2:  {want['text']!r}\n  trident: {got['text']!r}")
    return len(cases)


def main():
    tool, fixtures = sys.argv[1], sys.argv[2]
    env = hf_environment()
    failures, renders = [], 0
    names = sorted(f[:-len(".jinja")] for f in os.listdir(fixtures) if f.endswith(".jinja"))
    for name in names:
        with open(os.path.join(fixtures, name + ".jinja"), encoding="utf-8", newline="") as f:
            source = f.read()
        cases = []
        for conv in CONVERSATIONS:
            for gen in (False, True):
                cases.append({"messages": conv, "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": gen})
        for extra in EXTRA.get(name, []):
            cases.append({"messages": CONVERSATIONS[1], "bos_token": "<s>", "eos_token": "</s>",
                          "add_generation_prompt": False, **extra})
        renders += compare(tool, env, name, source, cases, failures)
    base = {"messages": CONVERSATIONS[1], "x": "xv", "bos_token": "<s>", "eos_token": "</s>"}
    for k, source in enumerate(CONSTRUCTS):
        renders += compare(tool, env, f"construct {k}", source, [base], failures)
    for source in UNSUPPORTED:
        got = render_all(tool, source, [base])[0]
        if "error" not in got:
            failures.append(f"unsupported {source!r}: trident renders {got['text']!r} instead of refusing")
        else:
            print(f"refused as it should be: {source!r}: {got['error']}")
    print(f"{renders} renders of {len(names)} chat templates and {len(CONSTRUCTS)} construct templates compared "
          f"with jinja2 {jinja2.__version__}; {len(UNSUPPORTED)} unsupported templates refused")
    if failures:
        print(f"{len(failures)} mismatch(es):\n" + "\n".join(failures))
        sys.exit(1)
    print("check_chat_templates: ok")


if __name__ == "__main__":
    main()
