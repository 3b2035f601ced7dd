#!/usr/bin/env python3
"""The prefix KV cache through `rocky serve`'s HTTP API (standard library only).

usage: test_prefix_cache.py ROCKY_BIN MODEL OTHER_MODEL DEVICE SCRATCH_DIR [TEST ...]

Counts tokens, never time. Every server listens on a free port (--port 0), uses blocks of 16
tokens (--cache-block 16) and greedy sampling. Exit 0 when every test passes.
Environment: ROCKY_TEST_CTX (-c, default 512); ROCKY_TEST_HYBRID=1 when MODEL is a hybrid model
(qwen35: the cache resumes at block boundaries with a recurrent-state checkpoint).
"""
import os
import re
import shutil
import sys
import threading
import time
import traceback

import harness

BIN, MODEL, OTHER, DEVICE, SCRATCH = sys.argv[1:6]
ONLY = sys.argv[6:]
B = 16
CTX = os.environ.get("ROCKY_TEST_CTX", "512")
HYBRID = os.environ.get("ROCKY_TEST_HYBRID") == "1"

SYSTEM = ("You are a helpful assistant for a little girl named Lily. She likes to play in the park with her dog. "
          "Every day the sun is warm and the birds sing. Her mom makes cookies and her dad reads her stories. ") * 3


class Server(harness.Server):
    def __init__(self, *extra, model=MODEL, ctx=CTX, warmup=False):
        # --no-warmup except where a test asks for the warm-up (test_warmup_and_restore_timings): on
        # lavapipe each server's warm-up prefills a whole ubatch, and these tests start ~15 servers.
        super().__init__([BIN, "serve", "-m", model, "--port", "0", "-c", str(ctx), "--device", DEVICE,
                          "--cache-block", str(B), *([] if warmup else ["--no-warmup"]), *extra])

    def get(self, path):
        return self.ok("GET", path)

    def post(self, path, body):
        return self.ok("POST", path, body)

    def complete(self, prompt, n=8, **kw):
        body = {"prompt": prompt, "max_tokens": n, "temperature": 0, "ignore_eos": True, **kw}
        return self.post("/v1/completions", body)

    def cache(self):
        return self.get("/cache")


def cached(r):
    return r["usage"]["prompt_tokens_details"]["cached_tokens"]


def check_counts(r):
    u, t = r["usage"], r["timings"]
    assert t["cache_n"] == cached(r), r
    assert t["prompt_n"] == u["prompt_tokens"] - cached(r), r


def fresh_dir(name):
    d = os.path.join(SCRATCH, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def dir_bytes(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))


# --------------------------------------------------------------------------------------------
def test_agent_pattern_completions():
    """Each turn resends history + the model's completion + a new message."""
    s = Server("-np", "2", "--kv-unified")
    try:
        history = SYSTEM
        prev = None
        for turn in range(4):
            history += f"\nUser: tell me part {turn} of the story.\nAssistant:"
            r = s.complete(history, n=12)
            check_counts(r)
            if prev is None:
                assert cached(r) == 0, r
            else:
                want = prev["usage"]["prompt_tokens"] + prev["usage"]["completion_tokens"] - B
                assert cached(r) >= want, f"turn {turn}: cached {cached(r)} < {want}"
            prev = r
            history += r["choices"][0]["text"]
        m = s.get("/metrics")
        assert re.search(r'rocky:prefix_cache_hits_total\{tier="device"\} [1-9]', m) or \
            re.search(r'rocky:prefix_cache_hits_total\{tier="ram"\} [1-9]', m), m
    finally:
        s.kill()


def test_two_clients_share_a_system_prompt():
    s = Server("-np", "2", "--kv-unified")
    try:
        n_sys = len(s.post("/tokenize", {"content": SYSTEM, "add_special": True})["tokens"])
        first = s.complete(SYSTEM + "\nUser: who is Lily?\nAssistant:")
        assert cached(first) == 0
        if HYBRID:
            # The first prompt kept the state only at its own end; the second one that shares
            # the system prompt finds the chain's K/V without a checkpoint where it diverges, and
            # keeps the state at that boundary: every later client resumes there.
            second = s.complete(SYSTEM + "\nUser: where is the park?\nAssistant:")
            assert cached(second) == 0, second
        out = {}

        def client(name, q):
            out[name] = s.complete(SYSTEM + f"\nUser: {q}\nAssistant:")

        ts = [threading.Thread(target=client, args=("a", "what does the dog do?")),
              threading.Thread(target=client, args=("b", "what does mom make?"))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for name in "ab":
            check_counts(out[name])
            assert cached(out[name]) >= n_sys - B, f"client {name}: cached {cached(out[name])} of a {n_sys}-token system prompt"
        c = s.cache()
        assert c["tiers"]["ram"]["hits"] >= 1 or c["tiers"]["device"]["hits"] >= 1, c
    finally:
        s.kill()


def test_greedy_reuse_equals_no_reuse():
    s = Server("-np", "1")
    try:
        p1 = SYSTEM + "\nUser: a story about a cat.\nAssistant:"
        r1 = s.complete(p1, n=16)
        p2 = p1 + r1["choices"][0]["text"] + "\nUser: and then?\nAssistant:"
        warm = s.complete(p2, n=16)
        assert cached(warm) > 0
        cold = s.complete(p2, n=16, cache_prompt=False)
        assert cached(cold) == 0 and cold["timings"]["prompt_n"] == cold["usage"]["prompt_tokens"], cold
        assert warm["choices"][0]["text"] == cold["choices"][0]["text"], (warm, cold)
        # Chat too (the template renders the history verbatim for the next turn).
        msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]
        c1 = s.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 8, "temperature": 0})
        msgs += [{"role": "assistant", "content": c1["choices"][0]["message"]["content"]},
                 {"role": "user", "content": "more"}]
        c2 = s.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 8, "temperature": 0})
        c3 = s.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 8, "temperature": 0, "cache_prompt": False})
        assert cached(c2) >= len(s.post("/tokenize", {"content": SYSTEM})["tokens"]) - B, c2
        assert cached(c3) == 0
        assert c2["choices"][0]["message"]["content"] == c3["choices"][0]["message"]["content"]
    finally:
        s.kill()


def test_cont_batching_reuses_and_equals_no_reuse():
    """Under --cont-batching (the default) each slot's sequence keeps its cells and imports cached
    blocks (a hybrid model's: with their checkpoints); concurrent clients sharing a system prompt
    reuse it; greedy texts equal no reuse."""
    s = Server("-np", "2", "--kv-unified", "--cont-batching")
    try:
        n_sys = len(s.post("/tokenize", {"content": SYSTEM, "add_special": True})["tokens"])
        history = SYSTEM
        prev = None
        for turn in range(3):
            history += f"\nUser: tell me part {turn} of the story.\nAssistant:"
            r = s.complete(history, n=12)
            check_counts(r)
            if prev is not None:
                want = prev["usage"]["prompt_tokens"] + prev["usage"]["completion_tokens"] - B
                assert cached(r) >= want, f"turn {turn}: cached {cached(r)} < {want}"
            cold = s.complete(history, n=12, cache_prompt=False)
            assert cached(cold) == 0, cold
            assert r["choices"][0]["text"] == cold["choices"][0]["text"], (turn, r, cold)
            prev = r
            history += r["choices"][0]["text"]
        out = {}

        def client(name, q, **kw):
            out[name] = s.complete(SYSTEM + f"\nUser: {q}\nAssistant:", n=16, **kw)

        qs = {"a": "what does the dog do?", "b": "what does mom make?"}
        if HYBRID:
            # As in test_two_clients_share_a_system_prompt: a prompt that leaves the history's chain
            # after the system prompt keeps the state at that boundary, where the clients resume.
            s.complete(SYSTEM + "\nUser: where is the park?\nAssistant:", n=4)
        for cache_prompt in (True, False):
            ts = [threading.Thread(target=client, args=(k + str(cache_prompt), q), kwargs={"cache_prompt": cache_prompt})
                  for k, q in qs.items()]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
        for k in qs:
            warm, cold = out[k + "True"], out[k + "False"]
            check_counts(warm)
            assert cached(warm) >= n_sys - B, f"client {k}: cached {cached(warm)} of a {n_sys}-token system prompt"
            assert cached(cold) == 0, cold
            assert warm["choices"][0]["text"] == cold["choices"][0]["text"], (k, warm, cold)
        m = s.get("/metrics")
        assert re.search(r"rocky:batch_steps_total [1-9]", m), m
    finally:
        s.kill()


def test_restart_hits_from_disk():
    d = fresh_dir("restart")
    prompt = SYSTEM + "\nUser: once more.\nAssistant:"
    s = Server("--cache-dir", d)
    try:
        r1 = s.complete(prompt)
        assert cached(r1) == 0
    finally:
        log = s.stop()
    files = [f for f in os.listdir(d) if f.endswith(".rkv")]
    n_prompt = r1["usage"]["prompt_tokens"]
    assert len(files) >= n_prompt // B, (files, log)
    s = Server("--cache-dir", d)
    try:
        r2 = s.complete(prompt)
        check_counts(r2)
        assert cached(r2) >= n_prompt - B, (r2, s.cache(), "".join(s.log))
        assert r2["choices"][0]["text"] == r1["choices"][0]["text"]
        c = s.cache()
        assert c["tiers"]["disk"]["hits"] >= (n_prompt - B) // B, c
        assert c["tiers"]["disk"]["errors"] == 0, c
        m = s.get("/metrics")
        assert re.search(r'rocky:prefix_cache_hits_total\{tier="disk"\} [1-9]', m), m
        # DELETE /cache empties every tier (the files too).
        s.ok("DELETE", "/cache")
        c = s.cache()
        assert c["tiers"]["ram"]["blocks"] == 0 and c["tiers"]["disk"]["blocks"] == 0, c
        assert not [f for f in os.listdir(d) if f.endswith(".rkv")]
        r3 = s.complete(prompt)
        assert cached(r3) == 0 and r3["choices"][0]["text"] == r1["choices"][0]["text"]
    finally:
        s.kill()


def metric(s, name):
    m = re.search(r"^rocky:%s (\S+)$" % re.escape(name), s.get("/metrics"), re.M)
    assert m, f"/metrics has no rocky:{name}"
    return float(m.group(1))


def test_warmup_and_restore_timings():
    """The server warms up before /health says ok (the first request after a restart does not
    create the kernels' pipelines; --no-warmup skips it), and timings.cache_ms is the time the
    restore of the cached prefix took (0 ≤ cache_ms, reported with every response)."""
    vulkan = DEVICE.startswith("vulkan")
    prompt = SYSTEM + "\nUser: hi.\nAssistant:"
    s = Server(warmup=True)
    try:
        made = metric(s, "pipelines_created_total")
        assert made > 0 if vulkan else made == 0, made
        r1 = s.complete(prompt)
        r2 = s.complete(prompt)
        for r in (r1, r2):
            assert isinstance(r["timings"]["cache_ms"], (int, float)) and r["timings"]["cache_ms"] >= 0, r
        assert cached(r1) == 0 and cached(r2) > 0, (r1, r2)
    finally:
        log = s.stop()
    assert re.search(r"rocky: warm-up: \d+ \+ 1 tokens", log), log
    s = Server()  # the harness passes --no-warmup
    try:
        assert metric(s, "pipelines_created_total") == 0
        r = s.complete(prompt)
        assert r["choices"][0]["text"] == r1["choices"][0]["text"], (r, r1)
        made = metric(s, "pipelines_created_total")
        assert made > 0 if vulkan else made == 0, made
    finally:
        log = s.stop()
    assert "warm-up" not in log, log
    if not HYBRID:  # where -c holds them, the warm-up also runs short ubatches at depth 1280
        s = Server(ctx=2048, warmup=True)
        try:
            r = s.complete(prompt)
            assert r["choices"][0]["text"] == r1["choices"][0]["text"], (r, r1)
        finally:
            log = s.stop()
        assert re.search(r"rocky: warm-up: \d+ \+ 48 \+ 8 at depth 1280 \+ 1 tokens", log), log


def damage(kind, path):
    data = bytearray(open(path, "rb").read())
    if kind == "truncate":
        data = data[: len(data) - 7]
    elif kind == "header":
        data[20] ^= 0x40
    elif kind == "payload":
        data[-50] ^= 0x01
    elif kind == "zero":
        data = bytearray()
    open(path, "wb").write(bytes(data))


def test_damaged_entries_fall_back_to_recompute():
    prompt = SYSTEM + "\nUser: the end.\nAssistant:"
    ref = None
    # (On a hybrid model the kinds that reach its checkpoint, the payload's tail: the header and
    # zero-length checks do not depend on the model and run on the pure-attention one.)
    kinds = ["truncate", "payload", "wrong-model"] if HYBRID else ["truncate", "header", "payload", "zero", "wrong-model"]
    for kind in kinds:
        d = fresh_dir("damage-" + kind)
        s = Server("--cache-dir", d)
        try:
            r = s.complete(prompt)
            ref = ref or r["choices"][0]["text"]
        finally:
            s.stop()
        foreign = {}
        if kind == "wrong-model":
            # The same prompt's blocks as another model (same vocab, f16 weights) wrote them.
            d2 = fresh_dir("damage-other-model")
            s = Server("--cache-dir", d2, model=OTHER)
            try:
                s.complete(prompt)
            finally:
                s.stop()
            for f in os.listdir(d2):
                if f.endswith(".rkv"):
                    data = open(os.path.join(d2, f), "rb").read()
                    foreign[int.from_bytes(data[64:68], "little")] = data
        files = sorted(f for f in os.listdir(d) if f.endswith(".rkv"))
        assert files, kind
        s = Server("--cache-dir", d)
        try:
            for f in files:
                path = os.path.join(d, f)
                if kind == "wrong-model":
                    p0 = int.from_bytes(open(path, "rb").read()[64:68], "little")
                    open(path, "wb").write(foreign[p0])  # another model's entry under this model's name
                else:
                    damage(kind, path)
            r = s.complete(prompt)
            assert cached(r) == 0, (kind, r)
            if ref is None:
                ref = s.complete(prompt, cache_prompt=False)["choices"][0]["text"]
            assert r["choices"][0]["text"] == ref, (kind, r)
            c = s.cache()
            assert c["tiers"]["disk"]["errors"] >= 1, (kind, c)
            assert c["tiers"]["disk"]["enabled"], (kind, c)
            # Recomputed and rewritten: the next request hits (from RAM), and the files are good again.
            r2 = s.complete(prompt)
            assert cached(r2) >= r2["usage"]["prompt_tokens"] - B and r2["choices"][0]["text"] == ref, (kind, r2)
        finally:
            log = s.stop()
        assert "prefix cache" in log and "skipped (recomputing)" in log, (kind, log)
        s = Server("--cache-dir", d)
        try:
            r3 = s.complete(prompt)
            c = s.cache()
            assert cached(r3) >= r3["usage"]["prompt_tokens"] - B and c["tiers"]["disk"]["errors"] == 0, \
                (kind, r3, c, "".join(s.log))
        finally:
            s.kill()
    # A directory that cannot be written: no disk tier, a warning, correct output.
    blocker = os.path.join(fresh_dir("unwritable"), "a-file")
    open(blocker, "w").write("x")
    s = Server("--cache-dir", os.path.join(blocker, "sub"))
    try:
        r = s.complete(prompt)
        assert r["choices"][0]["text"] == ref
        assert not s.cache()["tiers"]["disk"]["enabled"]
    finally:
        log = s.stop()
    assert "without the disk tier" in log, log


def test_ram_and_disk_stay_within_their_flags():
    d = fresh_dir("limits")
    s = Server("--cache-ram", "1", "--cache-dir", d, "--cache-disk", "1")
    try:
        for i in range(6):
            ids = [1] + [(i * 131 + k * 7) % 500 + 3 for k in range(480)]
            r = s.complete(ids, n=2)
            c = s.cache()
            assert c["tiers"]["ram"]["bytes"] <= 1 << 20, c
            assert c["tiers"]["disk"]["bytes"] <= 1 << 20, c
            time.sleep(0.2)
            assert dir_bytes(d) <= 1 << 20, dir_bytes(d)
        c = s.cache()
        assert c["tiers"]["ram"]["evictions"] > 0 and c["tiers"]["disk"]["evictions"] > 0, c
        assert re.search(r'rocky:prefix_cache_evictions_total\{tier="ram"\} [1-9]', s.get("/metrics"))
    finally:
        s.stop()
    assert dir_bytes(d) <= 1 << 20


TESTS = [v for k, v in list(globals().items()) if k.startswith("test_")]


def main():
    failed = 0
    for t in TESTS:
        if ONLY and t.__name__ not in ONLY:
            continue
        t0 = time.time()
        try:
            t()
            print(f"ok   {t.__name__} ({time.time() - t0:.0f} s)", flush=True)
        except Exception:
            failed += 1
            print(f"FAIL {t.__name__}\n{traceback.format_exc()}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
