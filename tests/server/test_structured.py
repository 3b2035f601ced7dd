#!/usr/bin/env python3
"""Structured output through `rocky serve` (python3 + python3-jsonschema).

usage: test_structured.py ROCKY_BIN DEVICE SCHEMA_DIR QWEN_TEMPLATE MODEL [MODEL ...]

For every model: every JSON schema in SCHEMA_DIR as a constrained chat request (response_format
json_schema, temperature 0) must answer 200; a `stop` finish must be JSON valid against the schema
(formats checked strictly: real calendar dates, RFC 3339 times); at least 90 % must finish with
`stop`; every token of every reply must have been checked against its step's grammar mask
(timings.grammar_checked_n == completion tokens, so a `length` finish is a valid prefix). Then tool
calls (tool_choice "required" and a named function) through the model's own template or the
ChatML fallback and through the Qwen2.5 template (--chat-template-file), the GBNF samples on
/completion, and the errors (invalid grammar / schema, two constraints, a grammar that admits
nothing). Exit 0 when everything passes.
CTest (tests/server/CMakeLists.txt) runs it on stories260K on the CPU (every schema, max_tokens
1,024, floor 0.75) and on lavapipe (every 3rd schema: the whole set takes 11 min there, floor 0.80),
and on a synth model with Qwen2.5's 151,936-token vocabulary on the CPU, schemas only, every 12th
(10 of 120, max_tokens 256: random weights decode at ~0.1 s a token here, floor 0.50); each floor
is what that model holds (the goal, 0.90, is this script's default).
Environment: ROCKY_TEST_MAX_TOKENS (default 2048; the server's context: max_tokens + 512, at least 2,048),
ROCKY_TEST_SCHEMA_LIMIT (default 0: all schemas), ROCKY_TEST_SCHEMA_STRIDE (default 1: every schema;
k: every k-th in name order, from the first — a deterministic subset for slow models),
ROCKY_TEST_MIN_STOP (default 0.90: the share that must finish with stop), ROCKY_TEST_TEMPERATURE
(default 0), ROCKY_TEST_ONLY=schemas (the schema requests only: no tool calls, GBNF samples or errors).
"""
import datetime
import json
import os
import re
import sys
import time

import jsonschema

import harness

BIN, DEVICE, SCHEMA_DIR, QWEN_TEMPLATE = sys.argv[1:5]
MODELS = sys.argv[5:]
MAX_TOKENS = int(os.environ.get("ROCKY_TEST_MAX_TOKENS", "2048"))
SCHEMA_LIMIT = int(os.environ.get("ROCKY_TEST_SCHEMA_LIMIT", "0"))  # 0: every schema (a quick local run: a few)
SCHEMA_STRIDE = max(1, int(os.environ.get("ROCKY_TEST_SCHEMA_STRIDE", "1")))
ONLY_SCHEMAS = os.environ.get("ROCKY_TEST_ONLY", "") == "schemas"
# The share of schema requests that must finish with `stop`.
MIN_STOP = float(os.environ.get("ROCKY_TEST_MIN_STOP", "0.90"))
TEMPERATURE = float(os.environ.get("ROCKY_TEST_TEMPERATURE", "0"))
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what, flush=True)


class Server(harness.Server):
    def __init__(self, model, *extra):
        super().__init__([BIN, "serve", "-m", model, "--port", "0", "-c", str(max(2048, MAX_TOKENS + 512)), "--device", DEVICE, "--no-warmup",
                          *extra], timeout_s=600)

    def post(self, path, body):
        return self.request("POST", path, body)

    def close(self):
        self.proc.terminate()
        self.proc.wait(30)


# Strict formats (python3-jsonschema checks date-time / time only with rfc3339-validator).
FORMATS = jsonschema.FormatChecker()
TIME_RE = re.compile(r"^([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$")


@FORMATS.checks("date", raises=ValueError)
def _date(v):
    if not isinstance(v, str):
        return True
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
        raise ValueError("not YYYY-MM-DD")
    datetime.date.fromisoformat(v)
    return True


@FORMATS.checks("time")
def _time(v):
    return not isinstance(v, str) or bool(TIME_RE.match(v))


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(v):
    if not isinstance(v, str):
        return True
    d, sep, t = v.partition("T")
    if not sep:
        raise ValueError("no T")
    _date(d)
    if not TIME_RE.match(t):
        raise ValueError("bad time")
    return True


@FORMATS.checks("email")
def _email(v):
    return not isinstance(v, str) or re.fullmatch(r"[^@\s]+@[^@\s]+", v) is not None


@FORMATS.checks("uuid")
def _uuid(v):
    return not isinstance(v, str) or re.fullmatch(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}", v) is not None


def validate(instance, schema):
    v = jsonschema.Draft202012Validator(schema, format_checker=FORMATS)
    errors = list(v.iter_errors(instance))
    return "; ".join(e.message for e in errors[:3])


def schemas():
    out = []
    for name in sorted(os.listdir(SCHEMA_DIR)):
        if name.endswith(".json"):
            with open(os.path.join(SCHEMA_DIR, name)) as f:
                out.append((name, json.load(f)))
    out = out[::SCHEMA_STRIDE]
    return out[:SCHEMA_LIMIT] if SCHEMA_LIMIT > 0 else out


def all_checked(body, what):
    # Every kept token, plus the end-of-generation token when the reply stopped on it.
    t = body.get("timings", {})
    n = body["usage"]["completion_tokens"]
    check(t.get("grammar_checked_n") in (n, n + 1),
          f"{what}: {t.get('grammar_checked_n')} of {body['usage']['completion_tokens']} tokens checked against the mask")


def run_schemas(srv, label):
    stops = total = 0
    t0 = time.time()
    for name, schema in schemas():
        total += 1
        status, body = srv.post("/v1/chat/completions", {
            "messages": [{"role": "system", "content": "Reply with JSON only."},
                         {"role": "user", "content": f"Give me the {name[:-5]}."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}},
            "temperature": TEMPERATURE, "seed": 1, "max_tokens": MAX_TOKENS})
        check(status == 200, f"{label} {name}: HTTP {status}: {body}")
        if status != 200:
            continue
        choice = body["choices"][0]
        content = choice["message"]["content"] or ""
        all_checked(body, f"{label} {name}")
        if choice["finish_reason"] == "stop":
            stops += 1
            try:
                inst = json.loads(content)
            except json.JSONDecodeError as e:
                check(False, f"{label} {name}: not JSON ({e}): {content[:300]!r}")
                continue
            err = validate(inst, schema)
            check(not err, f"{label} {name}: invalid: {err}: {content[:300]!r}")
        else:
            check(choice["finish_reason"] == "length", f"{label} {name}: finish_reason {choice['finish_reason']}")
            print(f"{label} {name}: length after {body['usage']['completion_tokens']} tokens: ...{content[-120:]!r}",
                  flush=True)
    print(f"{label}: {stops}/{total} finished with stop ({time.time() - t0:.0f} s)", flush=True)
    check(stops >= total * MIN_STOP, f"{label}: only {stops} of {total} requests finished with stop (floor {MIN_STOP:.2f})")


TOOLS = []


def make_tools():
    for fn in ("001-Glaiveai2K-schedule_meeting_8546158f.json", "004-Glaiveai2K-track_calories_ecbd9766.json",
               "007-Glaiveai2K-calculate_gpa_11b0bca5.json"):
        with open(os.path.join(SCHEMA_DIR, fn)) as f:
            params = json.load(f)
        TOOLS.append({"type": "function", "function": {"name": fn.split("-")[2].split("_")[0] + "_" + fn[:3],
                                                       "description": "a tool", "parameters": params}})


def run_tools(srv, label):
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    for choice in ["required", {"type": "function", "function": {"name": TOOLS[1]["function"]["name"]}}]:
        for seed in (1, 2):
            status, body = srv.post("/v1/chat/completions", {
                "messages": [{"role": "user", "content": "Plan my day."}], "tools": TOOLS, "tool_choice": choice,
                "temperature": 0.7, "seed": seed, "max_tokens": 400})
            what = f"{label} tool_choice {json.dumps(choice)} seed {seed}"
            check(status == 200, f"{what}: HTTP {status}: {body}")
            if status != 200:
                continue
            msg = body["choices"][0]["message"]
            calls = msg.get("tool_calls") or []
            if body["choices"][0]["finish_reason"] == "length":
                all_checked(body, what)
                print(f"{what}: length (not a failure; valid prefix)", flush=True)
                continue
            check(len(calls) >= 1, f"{what}: no tool_calls: {msg}")
            for c in calls:
                name = c["function"]["name"]
                check(name in by_name, f"{what}: unknown function {name}")
                if isinstance(choice, dict):
                    check(name == choice["function"]["name"], f"{what}: called {name}")
                try:
                    args = json.loads(c["function"]["arguments"])
                except json.JSONDecodeError as e:
                    check(False, f"{what}: arguments not JSON: {e}")
                    continue
                if name in by_name:
                    err = validate(args, by_name[name])
                    check(not err, f"{what}: arguments invalid: {err}")


def run_grammars_and_errors(srv, label):
    samples = [
        ('root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= [0-9]{1,3} | "(" expr ")"\n',
         r"[0-9()+\-]+"),
        ('root ::= "[" item ("," item){0,3} "]"\nitem ::= "\\"" [a-z]{1,5} "\\""\n', r'\["[a-z]{1,5}"(,"[a-z]{1,5}"){0,3}\]'),
        ('root ::= "yes" | "no" | "maybe"\n', r"yes|no|maybe"),
    ]
    for g, pattern in samples:
        status, body = srv.post("/completion", {"prompt": "Once upon a time", "grammar": g, "n_predict": 64,
                                                "temperature": 0})
        check(status == 200, f"{label} grammar {g!r}: HTTP {status}: {body}")
        if status == 200 and body.get("stop_type", "eos") != "limit":
            check(re.fullmatch(pattern, body["content"]) is not None, f"{label} grammar {g!r}: {body['content']!r}")
    status, body = srv.post("/v1/completions", {"prompt": "x", "response_format": {"type": "json_object"},
                                                "max_tokens": 128, "temperature": 0})
    check(status == 200, f"{label} json_object: HTTP {status}")
    if status == 200 and body["choices"][0]["finish_reason"] == "stop":
        check(isinstance(json.loads(body["choices"][0]["text"]), dict), f"{label} json_object: not an object")
    bad = [
        ({"grammar": 'root ::= "a" @'}, "line 1:14"),
        ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object", "properties": {
            "n": {"type": "integer", "multipleOf": 2}}}}}}, "at /properties/n: unsupported keyword 'multipleOf'"),
        ({"json_schema": {"type": "string", "format": "ipv4"}}, "at /format"),
        ({"grammar": 'root ::= "a"', "response_format": {"type": "json_object"}}, "'grammar' and 'response_format'"),
        ({"grammar": 'root ::= "a" root'}, "admits no string"),
    ]
    for extra, want in bad:
        status, body = srv.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], **extra})
        msg = body.get("error", {}).get("message", "")
        check(status == 400 and want in msg, f"{label} {extra}: HTTP {status}, message {msg!r} (want {want!r})")


def main():
    make_tools()
    for model in MODELS:
        label = os.path.basename(model)
        srv = Server(model)
        try:
            if not ONLY_SCHEMAS:
                run_grammars_and_errors(srv, label)
                run_tools(srv, label + " (own template)")
            run_schemas(srv, label)
        finally:
            srv.close()
        if ONLY_SCHEMAS:
            continue
        srv = Server(model, "--jinja", "--chat-template-file", QWEN_TEMPLATE)
        try:
            run_tools(srv, label + " (qwen2.5 template)")
        finally:
            srv.close()
    if FAILS:
        print(f"{len(FAILS)} failures", flush=True)
        sys.exit(1)
    print("all passed", flush=True)


if __name__ == "__main__":
    main()
