#!/usr/bin/env python3
"""llama-server parity of `rocky serve` through live servers (standard library only).

usage: test_parity.py ROCKY_BIN MODEL DEVICE SCRATCH_DIR [TEST ...]

Each test starts its own server on a free port (--port 0) and asserts what llama-server does:
the context table (-c split over an explicit -np, unified otherwise) in /slots, /props and the
exceed_context_size_error 400; --seed / -n / sampling flags as the requests' defaults; refused
flags (exit 2 with a reason); logit_bias; X-Api-Key; enable_thinking in the template context;
--verbose. Exit 0 when every test passes.
"""
import json
import math
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import harness

BIN, MODEL, DEVICE, SCRATCH = sys.argv[1:5]
ONLY = sys.argv[5:]


class Server(harness.Server):
    def __init__(self, *extra):
        super().__init__([BIN, "serve", "-m", MODEL, "--port", "0", "--device", DEVICE, "--no-warmup", *extra])


def serve_exit(*extra):
    """(exit code, stderr) of a `rocky serve` that is expected to refuse its flags."""
    r = subprocess.run([BIN, "serve", "-m", MODEL, "--port", "0", "--device", DEVICE, "--no-warmup", *extra],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stderr


LONG = [1] + [100 + (i % 300) for i in range(1099)]  # a 1,100-token prompt (ids valid in any test vocab)


def check_table(s, n_slots, per_request):
    slots = s.ok("GET", "/slots")
    assert len(slots) == n_slots, slots
    assert all(x["n_ctx"] == per_request for x in slots), slots
    assert [x["id"] for x in slots] == list(range(n_slots)), slots
    props = s.ok("GET", "/props")
    assert props["n_ctx"] == per_request, props
    assert props["default_generation_settings"]["n_ctx"] == per_request, props
    assert props["total_slots"] == n_slots, props
    status, j = s.request("POST", "/v1/completions", {"prompt": LONG, "max_tokens": 2, "temperature": 0})
    if per_request >= len(LONG):
        assert status == 200, j
        assert j["usage"]["prompt_tokens"] == len(LONG), j
    else:
        # llama-server's answer, field for field.
        assert status == 400, j
        e = j["error"]
        assert e["type"] == "exceed_context_size_error" and e["param"] == "prompt", e
        assert e["code"] == 400, e
        assert e["n_prompt_tokens"] == len(LONG), e
        assert e["n_ctx"] == per_request, e
        assert e["message"] == (f"request ({len(LONG)} tokens) exceeds the available context size "
                                f"({per_request} tokens), try increasing it"), e


def check_defaults(s):
    # Two temperature-1 requests without a seed draw the same tokens (--seed 42 is their seed).
    body = {"prompt": "Once upon a time", "temperature": 1.0, "max_tokens": 24, "ignore_eos": True}
    a, b = s.ok("POST", "/v1/completions", body), s.ok("POST", "/v1/completions", body)
    assert a["choices"][0]["text"] == b["choices"][0]["text"], (a, b)
    # A request's own seed still wins: another seed, other tokens (over 24 tokens at temperature 1).
    c = s.ok("POST", "/v1/completions", {**body, "seed": 7})
    assert c["choices"][0]["text"] != a["choices"][0]["text"], (a, c)
    # A request without max_tokens stops at -n 64.
    r = s.ok("POST", "/v1/completions", {"prompt": "Once", "temperature": 0, "ignore_eos": True})
    assert r["usage"]["completion_tokens"] == 64, r
    assert r["choices"][0]["finish_reason"] == "length", r
    # Chat too.
    r = s.ok("POST", "/v1/chat/completions",
             {"messages": [{"role": "user", "content": "hi"}], "temperature": 0, "ignore_eos": True})
    assert r["usage"]["completion_tokens"] == 64, r
    # /props and /slots report the defaults.
    params = s.ok("GET", "/props")["default_generation_settings"]["params"]
    assert params["seed"] == 42 and params["n_predict"] == 64, params


def test_context_table_explicit_np():
    """-c 4096 -np 4: each slot has 1,024; a 1,100-token prompt is the 400 of the table."""
    s = Server("-c", "4096", "-np", "4", "--seed", "42", "-n", "64")
    try:
        check_table(s, 4, 1024)
        check_defaults(s)
        assert s.ok("GET", "/props")["kv_unified"] is False
    finally:
        s.stop()


def test_context_table_default_np():
    """-c 4096 with -np at its default (auto: 4 slots, as llama-server): unified, one request may use all 4,096."""
    s = Server("-c", "4096", "--seed", "42", "-n", "64")
    try:
        check_table(s, 4, 4096)
        check_defaults(s)
        assert s.ok("GET", "/props")["kv_unified"] is True
    finally:
        s.stop()


def test_context_table_kv_unified():
    """-np 2 --kv-unified: both slots may take all of -c."""
    s = Server("-c", "2048", "-np", "2", "--kv-unified")
    try:
        check_table(s, 2, 2048)
    finally:
        s.stop()


def test_sampling_flags_are_defaults():
    """--temp 0 makes requests without a temperature greedy; a request's own temperature wins."""
    s = Server("-c", "512", "--temp", "0", "--top-k", "1", "-n", "12")
    try:
        body = {"prompt": "Once upon a time", "ignore_eos": True}
        greedy = s.ok("POST", "/v1/completions", {**body, "temperature": 0})["choices"][0]["text"]
        dflt = s.ok("POST", "/v1/completions", body)["choices"][0]["text"]
        assert dflt == greedy, (dflt, greedy)
        p = s.ok("GET", "/props")["default_generation_settings"]["params"]
        assert p["temperature"] == 0 and p["top_k"] == 1 and p["n_predict"] == 12, p
    finally:
        s.stop()


def test_refused_and_noted_flags():
    """Flags rocky cannot honour exit 2 saying why; -ngl/-t/-fa are accepted with a note."""
    rc, err = serve_exit("--context-shift")
    assert rc == 2 and "context" in err and "shift" in err, (rc, err)
    rc, err = serve_exit("--reasoning-budget", "512")
    assert rc == 2 and "reasoning-budget" in err, (rc, err)
    for gone in (["--mlock"], ["--numa", "distribute"], ["--log-format", "json"],
                 ["--no-mmap"], ["--keep", "4"]):
        rc, err = serve_exit(*gone)
        assert rc == 2 and f"{gone[0]}: is not supported: " in err, (gone, rc, err)
    # llama-server's download flags (two-letter forms too): refused, naming -m.
    for gone in (["-hf", "org/model"], ["--hf-repo", "org/model"], ["-mu", "http://x/m.gguf"]):
        rc, err = serve_exit(*gone)
        assert rc == 2 and "does not download models" in err and "-m" in err, (gone, rc, err)
    rc, err = serve_exit("--reranking", "--pooling", "mean")
    assert rc == 2 and "--pooling" in err and "rank" in err, (rc, err)
    # --no-context-shift (llama-server's default) and -cram (--cache-ram) are accepted.
    s = Server("-c", "256", "-ngl", "99", "-t", "4", "-fa", "on", "--swa-full", "--metrics", "--jinja",
               "--no-context-shift", "-cram", "0", "-ctk", "f32", "-ctv", "f32")
    try:
        log = "".join(s.log)
        for f in ("--ngl", "--threads", "--fa"):
            assert re.search(rf"note: {f}\b.*does not apply", log), (f, log)
        assert "RAM ≤ 0 MiB" in log, log
        # The KV cache type is the GPU's: on the CPU backend the flags say they do nothing.
        assert ("note: -ctk/-ctv/--kv-f16 have no effect on the CPU backend" in log) == (DEVICE == "cpu"), log
    finally:
        s.stop()


def test_port_in_use():
    """A second server on a port in use fails to bind, naming it (as llama-server), rather than
    sharing the port's connections with the first."""
    s = Server("-c", "64")
    try:
        port = s.url.rsplit(":", 1)[1]
        r = subprocess.run([BIN, "serve", "-m", MODEL, "--port", port, "--device", DEVICE, "--no-warmup"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in r.stderr, (r.returncode, r.stderr)
    finally:
        s.stop()


def test_batch_size_caps_ubatch():
    """-b below -ub caps it (llama-server: n_ubatch = min(n_ubatch, n_batch))."""
    s = Server("-c", "256", "-b", "32", "-ub", "512", "--verbose")
    try:
        r = s.ok("POST", "/v1/completions", {"prompt": LONG[:100], "max_tokens": 1, "temperature": 0})
        assert r["usage"]["prompt_tokens"] == 100, r
        log = s.stop()
        # --verbose: a line per request with method, path and status.
        assert re.search(r"POST /v1/completions \d+ → 200", log), log
    finally:
        s.kill()


def test_logit_bias():
    """A bias of -inf (llama-server's false) removes the greedy token; OpenAI's form by id."""
    s = Server("-c", "256")
    try:
        body = {"prompt": "Once upon a time", "temperature": 0, "max_tokens": 1, "ignore_eos": True}
        first = s.ok("POST", "/v1/completions", body)["choices"][0]["text"]
        # The greedy token's id: what the prompt and its text tokenize to beyond the prompt alone.
        base = s.ok("POST", "/tokenize", {"content": body["prompt"]})["tokens"]
        ids = s.ok("POST", "/tokenize", {"content": body["prompt"] + first})["tokens"]
        assert ids[:len(base)] == base and len(ids) == len(base) + 1, (first, base, ids)
        t = ids[-1]
        for bias in ([[t, False]], {str(t): -1e9}):
            other = s.ok("POST", "/v1/completions", {**body, "logit_bias": bias})["choices"][0]["text"]
            assert other != first, (bias, first, other)
        # A positive bias makes a token the greedy one.
        forced = s.ok("POST", "/v1/completions", {**body, "logit_bias": {"300": 1000}})["choices"][0]["text"]
        want = s.ok("POST", "/detokenize", {"tokens": [300]})["content"]
        assert forced.strip() == want.strip() and want.strip(), (forced, want)  # SPM: a leading space
        status, j = s.request("POST", "/v1/completions", {**body, "logit_bias": {"999999": 1}})
        assert status == 400 and j["error"]["param"] == "logit_bias.999999", j
        # Presence/frequency penalties are accepted and change a greedy run that repeats.
        long = {**body, "max_tokens": 48}
        plain = s.ok("POST", "/v1/completions", long)["choices"][0]["text"]
        pen = s.ok("POST", "/v1/completions", {**long, "frequency_penalty": 2.0, "presence_penalty": 2.0})
        assert pen["choices"][0]["text"] != plain, plain
    finally:
        s.stop()


def test_api_key_header():
    """--api-key: 'X-Api-Key: KEY' works as well as 'Authorization: Bearer KEY'."""
    s = Server("-c", "256", "--api-key", "sekrit")
    try:
        assert s.request("GET", "/props")[0] == 401
        assert s.request("GET", "/props", headers={"X-Api-Key": "wrong"})[0] == 401
        assert s.request("GET", "/props", headers={"X-Api-Key": "sekrit"})[0] == 200
        assert s.request("GET", "/props", headers={"Authorization": "Bearer sekrit"})[0] == 200
    finally:
        s.stop()


def test_slots_endpoint_flags():
    """--no-slots turns GET /slots off; ?fail_on_no_slot answers 200 while a slot is free."""
    s = Server("-c", "256", "--no-slots")
    try:
        assert s.request("GET", "/slots")[0] == 404
    finally:
        s.stop()
    s = Server("-c", "256", "--slots")
    try:
        assert s.request("GET", "/slots?fail_on_no_slot=1")[0] == 200
        slot = s.ok("GET", "/slots")[0]
        assert slot["is_processing"] is False, slot
    finally:
        s.stop()


def test_enable_thinking_in_template_context():
    """enable_thinking is true unless reasoning is off; chat_template_kwargs win."""
    tmpl = os.path.join(SCRATCH, "thinking.jinja")
    os.makedirs(SCRATCH, exist_ok=True)
    with open(tmpl, "w") as f:
        f.write("{% for m in messages %}{{ m['content'] }}{% endfor %}"
                "{{ '[think]' if enable_thinking else '[nothink]' }}")
    msgs = {"messages": [{"role": "user", "content": "hi"}]}
    s = Server("-c", "256", "--chat-template-file", tmpl)
    try:
        assert s.ok("POST", "/apply-template", msgs)["prompt"] == "hi[think]"
        off = {**msgs, "chat_template_kwargs": {"enable_thinking": False}}
        assert s.ok("POST", "/apply-template", off)["prompt"] == "hi[nothink]"
    finally:
        s.stop()
    for flags in (["--reasoning-budget", "0"], ["--reasoning", "off"]):
        s = Server("-c", "256", "--chat-template-file", tmpl, *flags)
        try:
            assert s.ok("POST", "/apply-template", msgs)["prompt"] == "hi[nothink]", flags
        finally:
            s.stop()


def raw(url, method, path, headers=None, body=None):
    """(status, headers, body text) of one request, any status."""
    req = urllib.request.Request(url + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def test_cors():
    """CORS as llama-server: the Origin is echoed; a preflight is answered; --cors-origins filters."""
    s = Server("-c", "256")
    try:
        st, h, _ = raw(s.url, "OPTIONS", "/v1/chat/completions",
                       {"Origin": "http://a.example", "Access-Control-Request-Method": "POST"})
        assert st == 200, st
        assert h["Access-Control-Allow-Origin"] == "http://a.example", dict(h)
        assert "POST" in h["Access-Control-Allow-Methods"] and h["Access-Control-Allow-Headers"] == "*", dict(h)
        assert h["Access-Control-Allow-Credentials"] == "true", dict(h)
        st, h, _ = raw(s.url, "GET", "/props", {"Origin": "http://b.example"})
        assert st == 200 and h["Access-Control-Allow-Origin"] == "http://b.example", dict(h)
        st, h, _ = raw(s.url, "GET", "/props")
        assert "Access-Control-Allow-Origin" not in h, dict(h)
    finally:
        s.stop()
    s = Server("-c", "256", "--cors-origins", "http://ok.example,http://also.example")
    try:
        st, h, _ = raw(s.url, "GET", "/props", {"Origin": "http://also.example"})
        assert h["Access-Control-Allow-Origin"] == "http://also.example", dict(h)
        st, h, _ = raw(s.url, "GET", "/props", {"Origin": "http://evil.example"})
        assert "Access-Control-Allow-Origin" not in h, dict(h)
        st, h, body = raw(s.url, "OPTIONS", "/v1/completions", {"Origin": "http://evil.example"})
        assert st == 403 and "cors-origins" in body, (st, body)
    finally:
        s.stop()


def test_metrics_names_and_fingerprint():
    """/metrics also under llamacpp:, Process-Start-Time-Unix; system_fingerprint b<build>-<commit>;
    /completions (no /v1) is the native endpoint."""
    s = Server("-c", "256", "--test-token-delay-ms", "20")
    try:
        t0 = int(time.time())
        r = s.ok("POST", "/v1/completions", {"prompt": "Once", "max_tokens": 3, "temperature": 0, "ignore_eos": True})
        assert re.fullmatch(r"b\d+-[0-9a-f]+|b0-unknown", r["system_fingerprint"]), r
        assert s.ok("GET", "/props")["build_info"] == r["system_fingerprint"]
        st, h, text = raw(s.url, "GET", "/metrics")
        assert st == 200
        assert abs(int(h["Process-Start-Time-Unix"]) - t0) < 120, dict(h)
        vals = dict(re.findall(r"^(llamacpp:\w+) (\S+)$", text, re.M))
        assert float(vals["llamacpp:tokens_predicted_total"]) == 3, vals
        assert float(vals["llamacpp:prompt_tokens_total"]) == r["usage"]["prompt_tokens"], vals
        for k in ("prompt_seconds_total", "tokens_predicted_seconds_total", "kv_cache_usage_ratio",
                  "requests_processing", "requests_deferred"):
            assert "llamacpp:" + k in vals, k
        n = s.ok("POST", "/completions", {"prompt": "Once", "n_predict": 3, "temperature": 0, "ignore_eos": True})
        assert "content" in n and "choices" not in n, n
        assert float(vals["llamacpp:n_decode_total"]) >= 3, vals
        # kv_cache_usage_ratio is over -c's cells (the KV is unified here: not n_ctx x slots).
        th = threading.Thread(target=lambda: s.ok("POST", "/completion", {
            "prompt": "Once", "n_predict": 60, "temperature": 0, "ignore_eos": True}))
        th.start()
        used = 0
        for _ in range(200):
            vals = dict(re.findall(r"^(llamacpp:\w+) (\S+)$", raw(s.url, "GET", "/metrics")[2], re.M))
            used = float(vals["llamacpp:kv_cache_tokens"])
            if used > 0:
                break
            time.sleep(0.01)
        th.join()
        assert used > 0 and float(vals["llamacpp:kv_cache_usage_ratio"]) == used / 256, vals
    finally:
        s.stop()


def test_logprobs():
    """OpenAI logprobs / top_logprobs and llama-server n_probs: the greedy token is the top one and
    its logprob the largest; the three endpoints agree; the probabilities sum to at most 1."""
    s = Server("-c", "256")
    try:
        body = {"prompt": "Once upon a time", "temperature": 0, "max_tokens": 6, "ignore_eos": True}
        c = s.ok("POST", "/v1/completions", {**body, "logprobs": 5})
        lp = c["choices"][0]["logprobs"]
        assert len(lp["content"]) == 6 and len(lp["tokens"]) == 6, lp
        assert "".join(lp["tokens"]) == c["choices"][0]["text"], (lp["tokens"], c["choices"][0]["text"])
        for e, legacy in zip(lp["content"], lp["token_logprobs"]):
            assert len(e["top_logprobs"]) == 5, e
            top = e["top_logprobs"][0]
            assert top["token"] == e["token"] and top["logprob"] == e["logprob"] == legacy, e
            assert e["logprob"] <= 0
            ps = [x["logprob"] for x in e["top_logprobs"]]
            assert ps == sorted(ps, reverse=True) and sum(math.exp(p) for p in ps) <= 1 + 1e-5, ps
            assert bytes(e["bytes"]).decode() == e["token"], e
        n = s.ok("POST", "/completion", {**body, "n_probs": 5})
        probs = n["completion_probabilities"]
        # Equal up to the GPU's rounding (the second request's prompt comes from the prefix cache).
        assert all(abs(p["logprob"] - e["logprob"]) < 1e-3 and p["token"] == e["token"]
                   for p, e in zip(probs, lp["content"])) and len(probs) == len(lp["content"]), (probs, lp)
        assert all(isinstance(p["id"], int) and p["top_logprobs"][0]["id"] == p["id"] for p in probs), probs
        ch = s.ok("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "temperature": 0,
                                                   "max_tokens": 3, "logprobs": True, "top_logprobs": 2})
        content = ch["choices"][0]["logprobs"]["content"]
        assert len(content) == ch["usage"]["completion_tokens"] and len(content[0]["top_logprobs"]) == 2, ch
        off = s.ok("POST", "/v1/completions", body)
        assert off["choices"][0]["logprobs"] is None, off
    finally:
        s.stop()


def test_usage_chunk_has_timings():
    """stream_options.include_usage: the usage chunk also carries llama-server's timings."""
    s = Server("-c", "256")
    try:
        body = {"prompt": "Once", "max_tokens": 4, "temperature": 0, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}}
        st, h, text = raw(s.url, "POST", "/v1/completions", {"Content-Type": "application/json"},
                          json.dumps(body).encode())
        assert st == 200, text
        events = [json.loads(l[6:]) for l in text.splitlines() if l.startswith("data: {")]
        usage = [e for e in events if e.get("usage")]
        assert len(usage) == 1 and usage[0]["timings"]["predicted_n"] == 4, usage
    finally:
        s.stop()


def test_template_context():
    """Unguarded tools/functions render a plain chat; a prefill is continued by /apply-template too;
    llama-server's 400s for two trailing assistant messages and for add_generation_prompt together
    with continue_final_message."""
    os.makedirs(SCRATCH, exist_ok=True)
    tmpl = os.path.join(SCRATCH, "unguarded.jinja")
    with open(tmpl, "w") as f:
        f.write("{% for t in tools %}T{% endfor %}{% for f in functions %}F{% endfor %}"
                "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}"
                "{% if not (loop.last and m['role'] == 'assistant') %}</{{ m['role'] }}>{% endif %}{% endfor %}"
                "{% if add_generation_prompt %}<assistant>{% endif %}")
    s = Server("-c", "256", "--chat-template-file", tmpl)
    try:
        user = [{"role": "user", "content": "hi"}]
        assert s.ok("POST", "/apply-template", {"messages": user})["prompt"] == "<user>hi</user><assistant>"
        r = s.ok("POST", "/v1/chat/completions", {"messages": user, "max_tokens": 2, "temperature": 0})
        assert r["choices"][0]["finish_reason"] in ("length", "stop"), r
        prefill = user + [{"role": "assistant", "content": "Once"}]
        assert s.ok("POST", "/apply-template", {"messages": prefill})["prompt"] == "<user>hi</user><assistant>Once"
        both = {"messages": prefill, "add_generation_prompt": True, "continue_final_message": True}
        for path in ("/apply-template", "/v1/chat/completions"):
            st, j = s.request("POST", path, both)
            assert st == 400 and j["error"]["param"] == "continue_final_message", (path, j)
        # Chat completions render what /apply-template shows for the same body (prefill continued,
        # add_generation_prompt honoured either way).
        for body in ({"messages": prefill}, {"messages": prefill, "add_generation_prompt": True},
                     {"messages": user, "add_generation_prompt": False}):
            p = s.ok("POST", "/apply-template", body)["prompt"]
            n = len(s.ok("POST", "/tokenize", {"content": p, "add_special": True})["tokens"])
            r = s.ok("POST", "/v1/chat/completions", {**body, "max_tokens": 1, "temperature": 0})
            assert r["usage"]["prompt_tokens"] == n, (body, p, n, r["usage"])
        assert s.ok("POST", "/apply-template", {"messages": prefill, "add_generation_prompt": True})["prompt"] == \
            "<user>hi</user><assistant>Once<assistant>"  # this template closes no final assistant turn
        two = prefill + [{"role": "assistant", "content": "upon"}]
        for path, body in (("/apply-template", {"messages": two}),
                           ("/v1/chat/completions", {"messages": two, "max_tokens": 2})):
            st, j = s.request("POST", path, body)
            assert st == 400, (path, j)
            assert j["error"]["message"] == "Cannot have 2 or more assistant messages at the end of the list.", j
    finally:
        s.stop()


def test_native_fields():
    """Native answers: tokens with return_tokens, has_new_line, truncated when the context filled,
    generation_settings (the seed used), a streamed chunk's real id_slot and its tokens."""
    s = Server("-c", "64", "-np", "2", "--kv-unified", "--seed", "9")
    try:
        body = {"prompt": "Once upon a time", "n_predict": 5, "temperature": 0, "ignore_eos": True}
        r = s.ok("POST", "/completion", {**body, "return_tokens": True})
        assert len(r["tokens"]) == 5 and all(isinstance(t, int) for t in r["tokens"]), r
        assert s.ok("POST", "/detokenize", {"tokens": r["tokens"]})["content"].strip() == r["content"].strip(), r
        assert r["has_new_line"] == ("\n" in r["content"]) and r["truncated"] is False, r
        g = r["generation_settings"]
        assert g["seed"] == 9 and g["n_predict"] == 5 and g["temperature"] == 0, g
        assert s.ok("POST", "/completion", body)["tokens"] == [], "tokens without return_tokens"
        full = s.ok("POST", "/completion", {**body, "n_predict": 200})
        assert full["truncated"] is True and full["stop_type"] == "limit", full
        # Streamed: every chunk names the slot that ran the request (both slots serve in turn).
        st, h, text = raw(s.url, "POST", "/completion", {"Content-Type": "application/json"},
                          json.dumps({**body, "stream": True}).encode())
        events = [json.loads(l[6:]) for l in text.splitlines() if l.startswith("data: {")]
        final = events[-1]
        assert final["stop"] is True and all(e["id_slot"] == final["id_slot"] for e in events), events
        # ... and the ids of its text (llama-server's "tokens"): together the greedy answer's ids.
        assert all(isinstance(e["tokens"], list) for e in events), events
        assert [t for e in events[:-1] for t in e["tokens"]] == r["tokens"], (events, r["tokens"])
        assert all(e["tokens"] for e in events[:-1]) and final["tokens"] == [], events
    finally:
        s.stop()


def test_samplers():
    """typical_p, DRY, XTC, mirostat, top_n_sigma and the samplers order through the server: each
    changes the tokens in the way its definition predicts; bad values are 400s naming the field."""
    s = Server("-c", "512", "--seed", "3")
    try:
        body = {"prompt": "Once upon a time", "n_predict": 24, "ignore_eos": True, "return_tokens": True,
                "n_probs": 1}
        greedy = s.ok("POST", "/completion", {**body, "temperature": 0})
        # A chain that ends in top_k 1 (no temperature step) is greedy at any temperature.
        k1 = s.ok("POST", "/completion", {**body, "temperature": 1.5, "top_k": 1, "samplers": ["top_k"]})
        assert k1["tokens"] == greedy["tokens"], (k1["tokens"], greedy["tokens"])
        assert s.ok("POST", "/completion", {**body, "temperature": 0, "samplers": "kt"})["tokens"] == greedy["tokens"]
        # XTC at probability 1 and threshold 0 removes every token but the least likely (the other
        # filters off, so that more than one token reaches it): never the greedy one.
        x = s.ok("POST", "/completion", {**body, "temperature": 0, "xtc_probability": 1, "xtc_threshold": 0,
                                          "top_k": 0, "top_p": 1, "min_p": 0, "n_probs": 3})
        for p in x["completion_probabilities"]:
            assert p["logprob"] < p["top_logprobs"][0]["logprob"], p
        # DRY with a huge multiplier: no generated token extends a repeat of dry_allowed_length (2)
        # tokens or more (the one breaker names a byte no text has: nothing resets the repeats).
        dry = {**body, "prompt": "The cat sat. The cat sat. The cat sat. The cat", "temperature": 0, "n_predict": 40,
               "dry_multiplier": 1e4, "dry_allowed_length": 2, "dry_sequence_breakers": ["\u0001"]}
        d = s.ok("POST", "/completion", dry)
        prompt = s.ok("POST", "/tokenize", {"content": dry["prompt"], "add_special": True})["tokens"]
        ctx = prompt + d["tokens"]

        def longest_repeat_extended(seq, t):
            best = 0
            for j in range(t - 1):  # the token after j is seq[j + 1]; the repeat ends at j
                if seq[j + 1] != seq[t]:
                    continue
                n = 0
                while n < j + 1 and seq[j - n] == seq[t - 1 - n]:
                    n += 1
                best = max(best, n)
            return best

        for t in range(len(prompt), len(ctx)):
            assert longest_repeat_extended(ctx, t) < 2, (t, ctx)
        g40 = s.ok("POST", "/completion", {**dry, "dry_multiplier": 0})["tokens"]
        assert any(longest_repeat_extended(prompt + g40, t) >= 2 for t in range(len(prompt), len(prompt) + 40)), \
            "greedy without DRY repeats itself (else this test shows nothing)"
        # Mirostat and typical at temperature 0 stay greedy-shaped requests that run; mirostat 2 with a
        # tiny tau keeps only the most likely token.
        m = s.ok("POST", "/completion", {**body, "temperature": 1, "mirostat": 2, "mirostat_tau": 0.01,
                                          "mirostat_eta": 0})
        assert m["tokens"] == greedy["tokens"], (m["tokens"], greedy["tokens"])
        g = m["generation_settings"]
        assert g["mirostat"] == 2 and abs(g["mirostat_tau"] - 0.01) < 1e-6, g
        # top_n_sigma 0.0001 keeps only the largest logit.
        ns = s.ok("POST", "/completion", {**body, "temperature": 1, "top_n_sigma": 1e-4})
        assert ns["tokens"] == greedy["tokens"]
        for field, value in (("typical_p", 2), ("mirostat", 3), ("dry_sequence_breakers", []),
                             ("samplers", ["top_k", "infill"]), ("xtc_threshold", "x"), ("id_slot", 5),
                             # llama-server fields rocky does not implement: refused, never ignored
                             ("dynatemp_range", 0.5), ("dynatemp_exponent", 2), ("min_keep", 3),
                             ("post_sampling_probs", True)):
            st, j = s.request("POST", "/completion", {**body, field: value})
            assert st == 400 and j["error"]["param"].startswith(field), (field, j)
        neutral = {"dynatemp_range": 0, "dynatemp_exponent": 1, "min_keep": 0, "post_sampling_probs": False}
        assert s.ok("POST", "/completion", {**body, **neutral, "temperature": 0})["tokens"] == greedy["tokens"]
        props = s.ok("GET", "/props")["default_generation_settings"]["params"]
        assert props["samplers"] == ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc",
                                     "temperature"], props
        assert props["dry_sequence_breakers"] == ["\n", ":", "\"", "*"] and props["typical_p"] == 1, props
    finally:
        s.stop()
    # The flags are the requests' defaults.
    s = Server("-c", "256", "--samplers", "top_k;temperature", "--top-k", "1", "--temp", "1.5", "--mirostat-ent", "4",
               "--dry-sequence-breaker", "\\n", "--dry-sequence-breaker", "###")
    try:
        p = s.ok("GET", "/props")["default_generation_settings"]["params"]
        assert p["samplers"] == ["top_k", "temperature"] and p["mirostat_tau"] == 4, p
        assert p["dry_sequence_breakers"] == ["\n", "###"], p
    finally:
        s.stop()
    rc, err = serve_exit("--samplers", "top_k;bogus")
    assert rc != 0 and "bogus" in err, (rc, err)


def test_slot_and_time_limit():
    """id_slot runs a request on that slot (its chunks and answer name it); t_max_predict_ms stops a
    generation after its first new line once the time is up (finish "length")."""
    s = Server("-c", "512", "-np", "2", "--test-token-delay-ms", "20")
    try:
        body = {"prompt": "Once upon a time", "n_predict": 4, "temperature": 0, "ignore_eos": True}
        for slot in (1, 0, 1):
            assert s.ok("POST", "/completion", {**body, "id_slot": slot})["id_slot"] == slot
            st, h, text = raw(s.url, "POST", "/completion", {"Content-Type": "application/json"},
                              json.dumps({**body, "id_slot": slot, "stream": True}).encode())
            events = [json.loads(l[6:]) for l in text.splitlines() if l.startswith("data: {")]
            assert events and all(e["id_slot"] == slot for e in events), events
        long = {**body, "n_predict": 300}
        full = s.ok("POST", "/completion", long)
        r = s.ok("POST", "/completion", {**long, "t_max_predict_ms": 1, "return_tokens": True})
        text = r["content"]
        if "\n" in full["content"]:
            # Stops at the first token after the text's first new line (every token takes > 1 ms).
            assert r["stop_type"] == "limit" and "\n" in text, r
            assert len(text) <= len(full["content"]) and full["content"].startswith(text), (text, full["content"])
            assert r["tokens_predicted"] < full["tokens_predicted"], r
        else:
            assert r["content"] == full["content"], "no new line: no time limit (llama-server)"
    finally:
        s.stop()


def metric(s, name):
    st, h, text = raw(s.url, "GET", "/metrics")
    return float(dict(re.findall(r"^(llamacpp:\w+) (\S+)$", text, re.M))["llamacpp:" + name])


def test_n_choices():
    """n > 1: that many choices with their index; at temperature 0 they are equal; the prompt is
    evaluated once (the later choices find it in the slot's KV: one token each is evaluated again);
    completion tokens add up. Streaming and the native endpoint refuse n > 1."""
    s = Server("-c", "512", "-np", "2")
    try:
        before = metric(s, "prompt_tokens_total")
        msgs = [{"role": "user", "content": "Tell me a story about a cat and a dog"}]
        r = s.ok("POST", "/v1/chat/completions", {"messages": msgs, "n": 3, "temperature": 0, "max_tokens": 6,
                                                   "ignore_eos": True})
        ch = r["choices"]
        assert [c["index"] for c in ch] == [0, 1, 2], ch
        assert ch[0]["message"]["content"] == ch[1]["message"]["content"] == ch[2]["message"]["content"], ch
        assert r["usage"]["completion_tokens"] == 18, r["usage"]
        n_prompt = r["usage"]["prompt_tokens"]
        assert r["usage"]["total_tokens"] == n_prompt + 18, r["usage"]
        evaluated = metric(s, "prompt_tokens_total") - before
        assert n_prompt <= evaluated <= n_prompt + 2, (evaluated, n_prompt)
        c = s.ok("POST", "/v1/completions", {"prompt": "Once upon a time", "n": 2, "temperature": 1, "max_tokens": 8,
                                             "ignore_eos": True})
        assert [x["index"] for x in c["choices"]] == [0, 1] and c["usage"]["completion_tokens"] == 16, c
        for path, body in (("/v1/chat/completions", {"messages": msgs, "n": 2, "stream": True}),
                           ("/completion", {"prompt": "x", "n": 2}),
                           ("/v1/chat/completions", {"messages": msgs, "n": 0})):
            st, j = s.request("POST", path, body)
            assert st == 400 and j["error"]["param"] == "n", (path, j)
    finally:
        s.stop()


def test_streamed_logprobs():
    """Streamed logprobs in OpenAI's chunk shape (choices[0].logprobs.content) and llama-server's
    (completion_probabilities per chunk): the same entries as the answer without streaming."""
    s = Server("-c", "256")
    try:
        body = {"prompt": "Once upon a time", "temperature": 0, "max_tokens": 6, "ignore_eos": True, "logprobs": 2}
        whole = s.ok("POST", "/v1/completions", body)["choices"][0]["logprobs"]["content"]

        def events(path, b):
            st, h, text = raw(s.url, "POST", path, {"Content-Type": "application/json"}, json.dumps(b).encode())
            assert st == 200, text
            return [json.loads(l[6:]) for l in text.splitlines() if l.startswith("data: {")]

        got = []
        for e in events("/v1/completions", {**body, "stream": True}):
            for c in e["choices"]:
                if c.get("logprobs"):
                    got += c["logprobs"]["content"]
        assert [g["token"] for g in got] == [w["token"] for w in whole], (got, whole)
        assert all(abs(g["logprob"] - w["logprob"]) < 1e-3 and len(g["top_logprobs"]) == 2
                   for g, w in zip(got, whole)), (got, whole)
        chat = []
        for e in events("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "temperature": 0,
                                                 "max_tokens": 5, "ignore_eos": True, "logprobs": True,
                                                 "top_logprobs": 1, "stream": True,
                                                 "stream_options": {"include_usage": True}}):
            for c in e["choices"]:
                if c.get("logprobs"):
                    chat += c["logprobs"]["content"]
            if e.get("usage"):
                assert e["usage"]["completion_tokens"] == len(chat) == 5, (e, chat)
        nat = []
        for e in events("/completion", {"prompt": body["prompt"], "temperature": 0, "n_predict": 6,
                                        "ignore_eos": True, "n_probs": 2, "stream": True}):
            nat += e.get("completion_probabilities", [])
        assert [p["id"] for p in nat] == [p["top_logprobs"][0]["id"] for p in nat] and len(nat) == 6, nat
    finally:
        s.stop()


def test_builtin_chat_template():
    """--chat-template NAME: llama.cpp's built-in templates (its output); a Jinja source works too; an
    unknown name is refused with the list."""
    s = Server("-c", "256", "--chat-template", "llama3")
    try:
        p = s.ok("POST", "/apply-template", {"messages": [{"role": "user", "content": "hi "}]})["prompt"]
        assert p == ("<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
                     "<|start_header_id|>assistant<|end_header_id|>\n\n"), p
    finally:
        s.stop()
    s = Server("-c", "256", "--chat-template", "{% for m in messages %}[{{ m.content }}]{% endfor %}")
    try:
        assert s.ok("POST", "/apply-template", {"messages": [{"role": "user", "content": "a"}]})["prompt"] == "[a]"
    finally:
        s.stop()
    rc, err = serve_exit("--chat-template", "no-such-template")
    assert rc == 2 and "no-such-template" in err and "mistral-v7" in err, (rc, err)


if __name__ == "__main__":
    sys.exit(harness.run_tests(globals(), ONLY))
