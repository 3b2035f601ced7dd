#!/usr/bin/env bash
# Checks the size rules for the C++ and shader sources under src/ and apps/ (tracked, and untracked
# files git does not ignore):
#   - no file over 900 lines (*.cpp *.hpp *.h *.cc *.comp *.glsl);
#   - no function over 200 lines.
#
# How functions are measured (python3 below, no compiler needed): comments, string and character
# literals (raw strings too) are blanked out; of each #if/#ifdef … #elif/#else … #endif only the
# first branch is kept (so both branches' braces are not counted twice); then braces are matched.
# A `{` at namespace or class scope opens a function body when the text since the previous `;`,
# `{` or `}` has a `(` and is not a class/struct/union/enum/namespace head or an `=` initializer;
# a constructor's member initializers (`) : a_{x}, b_(y) {`) are part of its head. A function's
# length is the line of its closing `}` minus the line of its opening `{`, plus one; lambdas and
# local classes count toward the function that holds them. Shader functions are measured the same.
#
# Usage: scripts/check-size.sh [--exclude DIR]... [--max-file N] [--max-function N]
#   --exclude DIR  report what is over the limits under DIR, but do not fail for it (repeatable;
#                  e.g. an area another change is splitting).
# Exit status 1 when a file or function outside the excluded areas is over its limit.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'PY'
import re, subprocess, sys

args = sys.argv[1:]
excludes, max_file, max_fn = [], 900, 200
i = 0
while i < len(args):
    a = args[i]
    if a in ("--exclude", "--max-file", "--max-function") and i + 1 < len(args):
        v = args[i + 1]
        if a == "--exclude":
            excludes.append(v.rstrip("/") + "/")
        elif not v.isdigit():
            sys.exit(f"check-size: {a} wants a number, got '{v}'")
        elif a == "--max-file":
            max_file = int(v)
        else:
            max_fn = int(v)
        i += 2
    else:
        sys.exit(f"check-size: unknown argument '{a}' (usage: check-size.sh [--exclude DIR]... "
                 "[--max-file N] [--max-function N])")

exts = ("*.cpp", "*.hpp", "*.h", "*.cc", "*.comp", "*.glsl")
files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--"] + [f"{d}/**/{e}" for d in ("src", "apps") for e in exts] +
                       [f"{d}/{e}" for d in ("src", "apps") for e in exts],
                       check=True, capture_output=True, text=True).stdout.split()
files = sorted(set(files))
if not files:
    sys.exit("check-size: no files under src/ or apps/")


def blank(text):
    """Comments and literals as spaces (newlines kept, so line numbers hold)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c == "R" and i + 1 < n and text[i + 1] == '"' and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^()\\ ]{0,16})\(', text[i:])
            if not m:
                out.append(c); i += 1; continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                out.append(" "); i += 1; continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        else:
            out.append(c); i += 1
    return "".join(out)


def first_branches(text):
    """Keeps the first branch of each #if…#endif; the other branches and directives become blank."""
    lines, out, stack = text.split("\n"), [], []  # stack: is this #if's later branch being skipped
    for ln in lines:
        s = ln.strip()
        d = re.match(r"#\s*(\w+)", s)
        kw = d.group(1) if d else ""
        if kw in ("if", "ifdef", "ifndef"):
            stack.append(False); out.append(""); continue
        if kw in ("elif", "else") and stack:
            stack[-1] = True; out.append(""); continue
        if kw == "endif" and stack:
            stack.pop(); out.append(""); continue
        if s.startswith("#") or any(stack):
            out.append(""); continue
        out.append(ln)
    return "\n".join(out)


HEAD_SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b")


def functions(text):
    """(name, first line, last line) of each function body at namespace or class scope."""
    code = first_branches(blank(text))
    res, stack = [], []  # stack entries: "ns" (namespace/class/extern), "fn", "other"
    head_start, i, n = 0, 0, len(code)
    line_of = lambda pos: code.count("\n", 0, pos) + 1
    in_body = lambda: any(k in ("fn", "other") for k in stack)
    while i < n:
        c = code[i]
        if c == ";" and not in_body():
            head_start = i + 1
        elif c == "}":
            k = stack.pop() if stack else "ns"
            if k == "fn":
                res[-1][2] = line_of(i)
            if not in_body():
                head_start = i + 1
        elif c == "{":
            if in_body():
                stack.append("inner")
            else:
                head = code[head_start:i]
                flat = " ".join(head.split())
                if re.search(r"\)\s*(const\s*)?(noexcept\s*)?:\s*[^:]", flat) and re.search(r"[\w>]\s*$", flat):
                    # a member initializer's braces inside a constructor's head: skip them
                    depth, j = 0, i
                    while j < n:
                        depth += {"{": 1, "}": -1}.get(code[j], 0)
                        if depth == 0:
                            break
                        j += 1
                    i = j + 1
                    continue
                if re.search(r'\bextern\s*$', flat) or re.match(r"^(\w+\s+)*namespace\b", flat) or (
                        HEAD_SCOPE.search(flat) and "(" not in flat.split("{")[0]):
                    stack.append("ns")
                    head_start = i + 1
                elif "(" in flat and not re.search(r"=\s*$|=\s*[^=(]*$", flat.split("(")[0]):
                    name = re.findall(r"([~\w:<>]+)\s*\(", flat)
                    res.append([name[0] if name else flat[:40], line_of(i), line_of(i)])
                    stack.append("fn")
                else:
                    stack.append("other")
        i += 1
    return [(nm, a, b) for nm, a, b in res]


bad = 0
for f in files:
    text = open(f, encoding="utf-8", errors="replace").read()
    excluded = any(f.startswith(e) for e in excludes)
    tag = " (excluded)" if excluded else ""
    n_lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if n_lines > max_file:
        print(f"{f}: {n_lines} lines (file limit {max_file}){tag}")
        bad += 0 if excluded else 1
    for name, a, b in functions(text):
        if b - a + 1 > max_fn:
            print(f"{f}:{a}: {name}: {b - a + 1} lines (function limit {max_fn}){tag}")
            bad += 0 if excluded else 1
print(f"check-size: {len(files)} files; {bad} over the limits" +
      (f" outside {', '.join(excludes)}" if excludes else ""))
sys.exit(1 if bad else 0)
PY
