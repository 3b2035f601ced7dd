// Generated from jinja2 3.1.6 with transformers' environment (ImmutableSandboxedEnvironment,
// trim_blocks, lstrip_blocks, loopcontrols, transformers' tojson); context k_context below.
// Each row: template, then the output or "!Type: message" when jinja2 raises.
#pragma once

namespace {
constexpr const char* k_context =
    R"J({"s": "Hello, World", "u": "héllo wörld ✓", "n": 7, "f": 2.5, "l": [3, 1, 2], "d": {"b": 1, "a": [1, "x", null, true]}, "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}, {"role": "user", "content": "bye"}], "none": null, "t": true, "ws": "  \t pad \n ", "e": ""})J";
struct ExprCase {
  const char* src;
  const char* want;
};
const ExprCase
    k_expr_cases[] =
        {
            {R"J({{ s }}|{{ n }}|{{ f }}|{{ none }}|{{ t }}|{{ undefined_thing }}|{{ l }}|{{ d }})J",
             R"J(Hello, World|7|2.5|None|True||[3, 1, 2]|{'b': 1, 'a': [1, 'x', None, True]})J"},
            {R"J({{ 1 + 2 * 3 - 4 / 8 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7.5 % 2 }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 1e-5 }} {{ 3.0 }} {{ 1/3 }})J",
             R"J(6.5 3 -4 2 1024 1.5 1e+20 0.30000000000000004 1e-05 3.0 0.3333333333333333)J"},
            {R"J({{ "a" ~ 1 ~ none ~ undefined_thing ~ [1] }}|{{ "ab" * 3 }}|{{ [1, 2] + [3] }}|{{ (1, 2) }}|{{ (1,) }}|{{ () }})J",
             R"J(a1None[1]|ababab|[1, 2, 3]|(1, 2)|(1,)|())J"},
            {R"J({{ s[0] }}{{ s[-1] }}{{ s[1:4] }}{{ s[::-1] }}{{ s[::2] }}{{ s[-3:] }}{{ s[:-3] }}|{{ l[1:] }}{{ l[::-1] }}{{ l[5] }}{{ u[1:4] }}{{ u[::-1] }})J",
             R"J(HdelldlroW ,olleHHlo olrldHello, Wo|[1, 2][2, 1, 3]éll✓ dlröw olléh)J"},
            {R"J({{ s.upper() }} {{ s.lower() }} {{ s.startswith("Hell") }} {{ s.endswith(("x", "ld")) }} {{ s.split(", ") }} {{ "a b  c ".split() }} {{ "a,b,c".split(",", 1) }} {{ "a,b,c".rsplit(",", 1) }})J",
             R"J(HELLO, WORLD hello, world True True ['Hello', 'World'] ['a', 'b', 'c'] ['a', 'b,c'] ['a,b', 'c'])J"},
            {R"J({{ ws.strip() }}|{{ ws.lstrip() }}|{{ ws.rstrip() }}|{{ "xxhixx".strip("x") }}|{{ s.replace("l", "L") }}|{{ s.replace("l", "L", 2) }}|{{ s.find("o") }}|{{ u.find("w") }}|{{ s.count("l") }}|{{ "-".join(["a", "b"]) }}|{{ "hello world".title() }}|{{ "hELLO".capitalize() }})J",
             R"J(pad|pad 
 |  	 pad|hi|HeLLo, WorLd|HeLLo, World|4|6|3|a-b|Hello World|Hello)J"},
            {R"J({{ l | length }} {{ s | length }} {{ u | length }} {{ d | length }} {{ undefined_thing | length }} {{ l | first }} {{ l | last }} {{ l | sort }} {{ l | sort(reverse=true) }} {{ l | max }} {{ l | min }} {{ l | sum }} {{ l | join("-") }} {{ l | reverse | list }})J",
             R"J(3 12 13 2 0 3 2 [1, 2, 3] [3, 2, 1] 3 1 6 3-1-2 [2, 1, 3])J"},
            {R"J({{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ u | tojson }}|{{ u | tojson(ensure_ascii=true) }}|{{ "q\"\n\t\\" | tojson }}|{{ {"z": 1, "a": 2} | tojson(sort_keys=true) }}|{{ [1, 2] | tojson(separators=(",", ":")) }}|{{ 2.0 | tojson }}|{{ [] | tojson(indent=4) }})J",
             R"J({"b": 1, "a": [1, "x", null, true]}|{
  "b": 1,
  "a": [
    1,
    "x",
    null,
    true
  ]
}|"héllo wörld ✓"|"h\u00e9llo w\u00f6rld \u2713"|"q\"\n\t\\"|{"a": 2, "z": 1}|[1,2]|2.0|[])J"},
            {R"J({{ d | items | list }}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{{ d.keys() | list }}|{{ d.get("b") }}|{{ d.get("zz", 5) }}|{{ d["a"][1] }}|{{ d.a.1 }})J",
             R"J([('b', 1), ('a', [1, 'x', None, True])]|b=1;a=[1, 'x', None, True];|['b', 'a']|1|5|x|x)J"},
            {R"J({{ "  x  " | trim }}|{{ [1, 'a'] | trim }}|{{ none | string }}|{{ 3 | string }}|{{ "x" | default("d") }}|{{ zz | default("d") }}|{{ "" | default("d", true) }}|{{ "ab" | upper }}|{{ "A B" | lower }}|{{ "x" | replace("x", "y") }})J",
             R"J(x|[1, 'a']|None|3|x|d|d|AB|a b|y)J"},
            {R"J({{ msgs | selectattr("role", "equalto", "user") | list | length }}|{{ msgs | rejectattr("role", "equalto", "user") | map(attribute="content") | join(",") }}|{{ [1, 2, 3, 4] | select("odd") | list }}|{{ [1, 2, 3] | reject("equalto", 2) | list }}|{{ ["a", "b"] | map("upper") | list }})J",
             R"J(2|yo|[1, 3]|[1, 3]|['A', 'B'])J"},
            {R"J({{ none is none }} {{ 1 is number }} {{ t is boolean }} {{ "x" is string }} {{ l is iterable }} {{ d is mapping }} {{ zz is defined }} {{ zz is undefined }} {{ n is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ false is false }} {{ 0 is false }} {{ t is true }} {{ 2 is integer }} {{ 2.0 is float }} {{ l is sequence }} {{ "ab" is lower }} {{ n is not none }} {{ 3 is gt 2 }} {{ 2 is in l }})J",
             R"J(True True True True True True False True True True True True False True True True True True True True True)J"},
            {R"J({{ "ll" in s }} {{ 3 in l }} {{ "b" in d }} {{ "zz" not in d }} {{ 1 in zz }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 5 }} {{ [1, 2] == [1, 2] }} {{ {"a": 1, "b": 2} == {"b": 2, "a": 1} }} {{ 1 == 1.0 }} {{ t == 1 }} {{ "a" < "b" }} {{ none == none }})J",
             R"J(True True True True False True False True True True True True True)J"},
            {R"J({{ 1 and 2 }} {{ 0 and 2 }} {{ 0 or "x" }} {{ "" or none }} {{ not 1 }} {{ "yes" if t else "no" }} {{ "yes" if none }}|{{ (1 if false) is defined }})J",
             R"J(2 0 x None False yes |False)J"},
            {R"J({% for m in msgs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.cycle("a", "b") }}{% if loop.previtem is defined %}<{{ loop.previtem.content }}{% endif %}{% if loop.nextitem is defined %}>{{ loop.nextitem.content }}{% endif %};{% endfor %})J",
             R"J(1032TrueFalse3a>yo;2121FalseFalse3b<hi>bye;3210FalseTrue3a<yo;)J"},
            {R"J({% for x in [] %}x{% else %}empty{% endfor %}|{% for x in l if x > 1 %}{{ x }}{{ loop.length }}{% endfor %}|{% for x in l %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}|{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}|{% for c in "héj" %}[{{ c }}]{% endfor %}|{% for k in d %}{{ k }}{% endfor %})J", R"J(empty|3222|3|37|[h][é][j]|ba)J"},
            {R"J({% set x = 1 %}{% for i in l %}{% set x = i %}{% endfor %}{{ x }}|{% set ns = namespace(x=1, y="a") %}{% for i in l %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}{{ ns.y }}|{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set blk %}inner {{ n }}{% endset %}[{{ blk }}]|{% if t %}{% set leaked = "L" %}{% endif %}{{ leaked }})J",
             R"J(1|7a|12|[inner 7]|L)J"},
            {R"J({% macro greet(name, punct="!") %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet("A") }} {{ greet("B", "?") }} {{ greet(name="C", punct=".") }} {{ greet() }}|{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k * fact(k - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }})J",
             R"J(Hi A! Hi B? Hi C. Hi !|120)J"},
            {R"J({% filter upper %}abc {{ s }}{% endfilter %}|{% raw %}{{ not parsed }}{% endraw %}|{# comment #}x|{{ range(3) | list }}{{ range(1, 7, 2) | list }}|{{ dict(a=1) }}|{{ strftime_now("%d %b %Y") }}|{{ strftime_now("%B %d, %Y") }})J",
             R"J(ABC HELLO, WORLD|{{ not parsed }}|x|[0, 1, 2][1, 3, 5]|{'a': 1}|15 Jan 2026|January 15, 2026)J"},
            {R"J(a
  {% if t %}
    yes
  {% endif %}
b {{ n }}
  {{ n }}
c)J",
             R"J(a
    yes
b 7
  7
c)J"},
            {R"J(a  {%- if t -%}  X  {%- endif -%}  b
{{- " c " -}}
   d {#- x -#}   e {%+ if t %}f{% endif +%}
g)J",
             R"J(aXb c de f
g)J"},
            {R"J(line1
{% for i in l %}
  item {{ i }}
{% endfor %}
end)J",
             R"J(line1
  item 3
  item 1
  item 2
end)J"},
            {R"J({{ "<a href='x'>&</a>" | e }}|{{ "a\nb" | indent(2) }}|{{ "a\nb" | indent(2, true) }}|{{ "abc" | center(9) }}|{{ 3.7 | int }}|{{ "42" | int }}|{{ "x" | int(5) }}|{{ "2.5" | float }}|{{ 2.567 | round(2) }}|{{ 2.5 | round }}|{{ -3 | abs }}|{{ "a b c" | wordcount }})J",
             R"J(&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;|a
  b|  a
  b|   abc   |3|42|5|2.5|2.57|2.0|3|3)J"},
            {R"J({{ [3, 1, 2] | unique | list }}|{{ ["b", "A", "a"] | sort }}|{{ ["b", "A", "a"] | sort(case_sensitive=true) }}|{{ msgs | map(attribute="role") | unique | list }}|{{ {"b": 1, "a": 2} | dictsort }}|{{ [1, 2, 3, 4, 5] | batch(2) | list }}|{{ msgs | sort(attribute="content") | map(attribute="content") | join }})J",
             R"J([3, 1, 2]|['A', 'a', 'b']|['A', 'a', 'b']|['user', 'assistant']|[('a', 2), ('b', 1)]|[[1, 2], [3, 4], [5]]|byehiyo)J"},
            {R"J({{ 'it\'s' }}|{{ "say \"hi\"" }}|{{ ["it's", 'say "x"', "both ' \""] }}|{{ "\u00e9\x41\101" }}|{{ {"k": ["v", 1.5, none, false]} }}|{{ "tab\there" ~ ["tab\there", "nl\n"] }})J",
             R"J(it's|say "hi"|["it's", 'say "x"', 'both \' "']|éAA|{'k': ['v', 1.5, None, False]}|tab	here['tab\there', 'nl\n'])J"},
            {R"J({{ 'x' + none }})J", R"J(!TypeError: can only concatenate str (not "NoneType") to str)J"},
            {R"J({{ 'x' + [1] }})J", R"J(!TypeError: can only concatenate str (not "list") to str)J"},
            {R"J({{ 1 + 'x' }})J", R"J(!TypeError: unsupported operand type(s) for +: 'int' and 'str')J"},
            {R"J({{ zz.attr }})J", R"J(!UndefinedError: 'zz' is undefined)J"},
            {R"J({{ none.split() }})J", R"J(!UndefinedError: 'None' has no attribute 'split')J"},
            {R"J({{ l.startswith("x") }})J", R"J(!UndefinedError: 'list object' has no attribute 'startswith')J"},
            {R"J({% for x in none %}{% endfor %})J", R"J(!TypeError: 'NoneType' object is not iterable)J"},
            {R"J({% for x in 5 %}{% endfor %})J", R"J(!TypeError: 'int' object is not iterable)J"},
            {R"J({{ "a" in none }})J", R"J(!TypeError: argument of type 'NoneType' is not iterable)J"},
            {R"J({{ 1 in "abc" }})J", R"J(!TypeError: 'in <string>' requires string as left operand, not int)J"},
            {R"J({{ raise_exception("custom message") }})J", R"J(!TemplateError: custom message)J"},
            {R"J({{ 1 / 0 }})J", R"J(!ZeroDivisionError: division by zero)J"},
            {R"J({{ 1 < "a" }})J", R"J(!TypeError: '<' not supported between instances of 'int' and 'str')J"},
            {R"J({{ zz + 1 }})J", R"J(!UndefinedError: 'zz' is undefined)J"},
            {R"J({{ zz() }})J", R"J(!UndefinedError: 'zz' is undefined)J"},
            {R"J({{ d | items | first }})J", R"J(('b', 1))J"},
            {R"J({% set x = 5 %}{% set x.y = 1 %})J",
             R"J(!TemplateRuntimeError: cannot assign attribute on non-namespace object)J"},
            {R"J({% for a, b in [[1, 2, 3]] %}{% endfor %})J",
             R"J(!ValueError: too many values to unpack (expected 2))J"},
            {R"J({{ len(l) }})J", R"J(!UndefinedError: 'len' is undefined)J"},
            {R"J({{ l.append(4) }})J", R"J(!SecurityError: access to attribute 'append' of 'list' object is unsafe.)J"},
            {R"J({{ s.splitlines() }}{{ "a\nb\r\nc".splitlines() }}{{ "ab".removeprefix("a") }})J",
             R"J(['Hello, World']['a', 'b', 'c']b)J"},
            {R"J({{ range(1000000) | length }})J",
             R"J(!OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).)J"},
            {R"J({{ none | length }})J", R"J(!TypeError: object of type 'NoneType' has no len())J"},
            {R"J({{ [none, 1] | tojson }}{{ zz | tojson }})J",
             R"J(!TypeError: Object of type Undefined is not JSON serializable)J"},
};
}  // namespace
