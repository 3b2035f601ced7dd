#!/usr/bin/env python3
"""Speculative decoding in `rocky serve` through live servers (standard library only).

usage: test_spec_http.py ROCKY_BIN DEVICE SCRATCH_DIR SHARED_MODELS_DIR [TEST ...]

Models: stories260K (SHARED_MODELS_DIR; real text, so prompt lookup drafts are partly kept) with
stories260K-f16 as a near-copy draft model; and `rocky synth` llama-test models (kept in
SCRATCH_DIR): the 4-block target (seed 1) and a 1-block draft (the same vocabulary, few of its
drafts kept). Random weights of qwen2.5's shape (tied embeddings) only repeat the last token, which
every drafter guesses: they would test nothing.

greedy:  at temperature 0 the texts with speculation (--spec-type ngram-simple; -md DRAFT) equal
         the texts of a server without it, for each prompt alone and for 4 requests at once (-np 4;
         on the CPU batched steps carry several slots' drafts: timings.batch_seqs_max > 1); timings
         report draft_n > 0 and draft_n_accepted ≤ draft_n (llama-server's names) and /metrics the
         totals; speculative.n_max 0 turns it off for one request (no draft_n drafted).
follow:  after a request whose drafts were partly rejected (n-gram, and draft model), a follow-up
         on the same slot (its prompt: the first prompt + the generated text + more; the slot's
         cells reused, cache_n past the first reply) equals the same request on a fresh server:
         rejected drafts left no KV behind.
fields:  bad speculative.* fields are 400s naming the field (unknown name, wrong type, out of range,
         n_min above n_max, p_min on an n-gram server, any of them on a server without a drafter).
         Valid ones show in generation_settings, the server's defaults in /props.
fault:   device faults (lost computes, the draft contexts' included) answer 503 and later requests
         are served, drafting, with their plain texts.
flags:   --draft-max without a drafter, --spec-type with -md, a hybrid (recurrent) target with
         --spec-type, and draft contexts past --kv-budget are refused at start naming why; -ngld is
         accepted with a note.
Exit 0 when every test passes.
"""
import os
import re
import subprocess
import sys

import harness

BIN, DEVICE, SCRATCH, SHARED_MODELS = sys.argv[1:5]
ONLY = sys.argv[5:]
STORIES = os.path.join(SHARED_MODELS, "stories260K.gguf")
STORIES_F16 = os.path.join(SHARED_MODELS, "stories260K-f16.gguf")
N_GEN = 40


def synth(name, *args):
    path = os.path.join(SCRATCH, name + ".gguf")
    if not os.path.exists(path):
        os.makedirs(SCRATCH, exist_ok=True)
        subprocess.run([BIN, "synth", "-q", "-o", path, *args], check=True)
    return path


def target():
    return synth("llama-test-seed1", "--preset", "llama-test", "--seed", "1")


def draft():
    return synth("llama-test-seed1-1block", "--preset", "llama-test", "--seed", "1", "--layers", "1")


class Server(harness.Server):
    def __init__(self, *extra, model=None):
        super().__init__([BIN, "serve", "-m", model or target(), "--port", "0", "--device", DEVICE, "--no-warmup",
                          "-np", "4", "-c", "2048", "--kv-unified", *extra], ready_s=120, timeout_s=600)

    def metric(self, name):
        _, text = self.request("GET", "/metrics")
        m = re.search(r"^rocky:" + name + r" (\S+)$", text, re.M)
        assert m, f"/metrics has no rocky:{name}"
        return float(m.group(1))


# Prompts that repeat themselves (the n-gram drafter finds matches), each its own.
PROMPTS = [
    "Once upon a time there was a little dog. Once upon a time there was a little cat. Once upon a",
    "Lily saw a big red ball. Lily saw a big red ball. She",
    "Tom had a toy car. He liked the toy car. Tom had a toy boat. He liked the",
    "The sun was hot. The bird was happy. The sun was hot. The bird was",
]


def complete(s, p, **extra):
    body = {"prompt": p, "n_predict": N_GEN, "temperature": 0, "ignore_eos": True, "return_tokens": True,
            "cache_prompt": True, **extra}
    return s.ok("POST", "/completion", body)


_plain = {}


def plain_texts(model):
    """Each prompt's greedy text and ids on a server without speculation (computed once per model)."""
    if model not in _plain:
        s = Server(model=model)
        try:
            _plain[model] = []
            for p in PROMPTS:
                r = complete(s, p)
                assert "draft_n" not in r["timings"], r["timings"]
                _plain[model].append((r["content"], r["tokens"]))
        finally:
            s.stop()
    return _plain[model]


def check_spec_server(model, extra, what):
    """Texts with speculation equal the plain server's, alone and 4 at once; draft counts reported."""
    plain = plain_texts(model)
    s = Server(*extra, model=model)
    try:
        drafted = accepted = 0
        for i, p in enumerate(PROMPTS):
            r = complete(s, p)
            assert (r["content"], r["tokens"]) == plain[i], f"{what}: prompt {i} alone differs:\n{r['content']!r}\n" \
                                                            f"vs\n{plain[i][0]!r}"
            t = r["timings"]
            assert 0 <= t["draft_n_accepted"] <= t["draft_n"], t
            drafted += t["draft_n"]
            accepted += t["draft_n_accepted"]
        assert drafted > 0, f"{what}: nothing was drafted"
        rs = harness.concurrently([lambda p=p: complete(s, p, cache_prompt=False) for p in PROMPTS])
        seqs_max = 0
        for i, r in enumerate(rs):
            assert (r["content"], r["tokens"]) == plain[i], f"{what}: prompt {i} under batching differs"
            seqs_max = max(seqs_max, r["timings"]["batch_seqs_max"])
            drafted += r["timings"]["draft_n"]
            accepted += r["timings"]["draft_n_accepted"]
        # On the CPU verifications share steps; on Vulkan each has a step of its own
        # (Backend::mixed_verify_tokens), other slots' single tokens still batch.
        if DEVICE == "cpu":
            assert seqs_max > 1, f"{what}: the 4 requests never shared a step"
        assert s.metric("draft_tokens_total") == drafted
        assert s.metric("draft_tokens_accepted_total") == accepted
        # speculative.n_max 0: this request without speculation, the same text.
        r = complete(s, PROMPTS[0], **{"speculative.n_max": 0})
        assert "draft_n" not in r["timings"] and r["content"] == plain[0][0], r["timings"]
        print(f"  {what}: {accepted} of {drafted} drafted tokens accepted", flush=True)
    finally:
        s.stop()


def test_greedy_ngram():
    check_spec_server(STORIES, ["--spec-type", "ngram-simple", "--spec-ngram-size-n", "2", "--draft-max", "8"],
                      "ngram-simple")


def test_greedy_draft_model():
    # A draft of other weights (llama-test, 1 block of the target's 4: few drafts kept), and a
    # near-copy of the target (stories260K in f16: most kept).
    check_spec_server(target(), ["-md", draft(), "--draft-max", "6", "--draft-p-min", "0"], "draft model (1 block)")
    check_spec_server(STORIES, ["-md", STORIES_F16, "--draft-max", "6", "--draft-p-min", "0"], "draft model (f16 copy)")


def check_follow_up(model, extra, what):
    p = PROMPTS[1]
    s = Server(*extra, model=model)
    try:
        r = complete(s, p, id_slot=0)
        t = r["timings"]
        assert t["draft_n_accepted"] < t["draft_n"], f"{what}: no draft was rejected: {t}"
        follow = p + r["content"] + " And then"
        f = complete(s, follow, id_slot=0, n_predict=16)
        # The reused cells reach into the first reply, where the rejected drafts' cells were.
        assert f["timings"]["cache_n"] > t["prompt_n"], f"{what}: the slot's cells were not reused: {f['timings']}"
    finally:
        s.stop()
    fresh = Server(model=model)
    try:
        g = complete(fresh, follow, n_predict=16)
    finally:
        fresh.stop()
    assert f["tokens"] == g["tokens"], f"{what}: follow-up {f['tokens']} vs fresh {g['tokens']}"


def test_follow_up():
    check_follow_up(STORIES, ["--spec-type", "ngram-simple", "--spec-ngram-size-n", "2", "--draft-max", "8"], "ngram")
    check_follow_up(target(), ["-md", draft(), "--draft-max", "6", "--draft-p-min", "0"], "draft model")


def test_fault():
    """Device faults (ROCKY_FAULT=lost@N: the Nth compute lost, a draft context's or the target's)
    fail their request with a 503; the slot's draft context is made again and later requests are
    served with their plain texts, still drafting."""
    plain = plain_texts(target())
    env = dict(os.environ, ROCKY_FAULT="lost@25,lost@700")
    s = harness.Server([BIN, "serve", "-m", target(), "--port", "0", "--device", DEVICE, "--no-warmup", "-np", "1",
                        "-c", "1024", "-md", draft(), "--draft-max", "6", "--draft-p-min", "0"], env=env)
    try:
        statuses = []
        for k in range(8):
            i = k % len(PROMPTS)
            st, r = s.request("POST", "/completion", {"prompt": PROMPTS[i], "n_predict": N_GEN, "temperature": 0,
                                                      "ignore_eos": True, "return_tokens": True})
            statuses.append(st)
            if st == 200:
                assert (r["content"], r["tokens"]) == plain[i], f"prompt {i} after a fault differs"
                if 503 in statuses[:-1]:
                    assert r["timings"]["draft_n"] > 0, r["timings"]
            else:
                assert st == 503 and "VK_ERROR_DEVICE_LOST" in r["error"]["message"], (st, r)
        print("  statuses:", statuses, flush=True)
        assert 503 in statuses and 200 in statuses[statuses.index(503):], statuses
        assert s.proc.poll() is None, "the server died"
    finally:
        s.stop()


def test_fields():
    s = Server("--spec-type", "ngram-simple")
    try:
        cases = [
            ({"speculative.n_maxx": 4}, "speculative.n_maxx"),
            ({"speculative": {"draft": 4}}, "speculative.draft"),
            ({"speculative": 4}, "speculative"),
            ({"speculative.n_max": "four"}, "speculative.n_max"),
            ({"speculative.n_max": -1}, "speculative.n_max"),
            ({"speculative.n_max": 999}, "speculative.n_max"),
            ({"speculative.n_max": 2, "speculative.n_min": 3}, "speculative.n_min"),
            ({"speculative.p_min": 0.5}, "speculative.p_min"),
            ({"speculative.n_max": 4, "speculative": {"n_max": 4}}, "speculative.n_max"),
        ]
        for body, param in cases:
            for path in ("/completion", "/v1/completions"):
                status, j = s.request("POST", path, {"prompt": "hi", "max_tokens": 2, **body})
                assert status == 400, f"{path} {body}: HTTP {status}: {j}"
                assert j["error"]["param"] == param and param in j["error"]["message"], (body, j)
        # Valid ones, nested or dotted.
        for body, n_max in (({"speculative.n_max": 4, "speculative.n_min": 1}, 4), ({"speculative": {"n_max": 3}}, 3)):
            r = s.ok("POST", "/completion", {"prompt": [1, 5, 6, 5, 6, 5], "n_predict": 4, "temperature": 0, **body})
            assert "draft_n" in r["timings"], r
            assert r["generation_settings"]["speculative.n_max"] == n_max, r["generation_settings"]
        props = s.ok("GET", "/props")["default_generation_settings"]["params"]
        assert props["speculative.n_max"] == 16 and props["speculative.n_min"] == 0, props
    finally:
        s.stop()
    plain = Server()
    try:
        status, j = plain.request("POST", "/completion", {"prompt": "hi", "n_predict": 2, "speculative.n_max": 4})
        assert status == 400 and j["error"]["param"] == "speculative.n_max", j
        assert "--spec-type" in j["error"]["message"], j
    finally:
        plain.stop()


def refused(args, needle, model=None):
    r = subprocess.run([BIN, "serve", "-m", model or target(), "--port", "0", "--device", DEVICE, "--no-warmup", *args],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and needle in r.stderr, f"{args}: exit {r.returncode}:\n{r.stderr}"


def test_flags():
    refused(["--draft-max", "4"], "--draft-max")
    refused(["--spec-type", "ngram-simple", "-md", draft()], "-md")
    refused(["--spec-ngram-size-n", "2"], "--spec-type ngram-simple")
    refused(["--spec-type", "ngram-simple", "--draft-p-min", "0.5"], "-md")
    refused(["-cd", "64"], "-md")
    refused(["-md", draft(), "-devd", "vulkan"], "target's device")
    hybrid = synth("qwen35-test-seed1", "--preset", "qwen35-test", "--seed", "1")
    r = subprocess.run([BIN, "serve", "-m", hybrid, "--port", "0", "--device", DEVICE, "--no-warmup", "--spec-type",
                        "ngram-simple"], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "recurrent" in r.stderr, r.stderr
    # The slots' draft contexts count toward --kv-budget: the target's KV alone (-c 1024: 5 MiB on
    # the CPU's f32, 2.5 MiB in f16) fits the budget, with the draft contexts it does not.
    budget = "8" if DEVICE == "cpu" else "4"
    refused(["-md", STORIES_F16, "--kv-budget", budget, "-c", "1024"], "draft context", model=STORIES)
    # -cd: a draft context of 128 positions (the prompt is 69 tokens); a longer text drafts nothing.
    s = Server("-md", draft(), "-ngld", "99", "-cd", "128", "--draft-p-min", "0")
    try:
        assert "ngld" in s.log_text() and "ignored" in s.log_text(), s.log_text()
        assert "a context of 128 per slot" in s.log_text(), s.log_text()
        r = complete(s, PROMPTS[0])
        assert (r["content"], r["tokens"]) == plain_texts(target())[0] and r["timings"]["draft_n"] > 0, r["timings"]
        r = complete(s, PROMPTS[0], n_predict=80)
        assert r["timings"]["predicted_n"] == 80, r["timings"]
    finally:
        s.stop()


if __name__ == "__main__":
    sys.exit(harness.run_tests(dict(globals()), ONLY))
