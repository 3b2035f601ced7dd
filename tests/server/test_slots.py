#!/usr/bin/env python3
"""Slot save / restore / erase of `rocky serve` through live servers (standard library only).

usage: test_slots.py ROCKY_BIN DEVICE SCRATCH_DIR MODEL OTHER_MODEL [TEST ...]

llama-server's POST /slots/{id}?action=save|restore|erase with --slot-save-path: a slot saved
after a request, erased (the next request computes everything), restored into the same slot and
into another one (the next request finds the saved tokens cached and gives the same greedy text);
the errors (no --slot-save-path: 501; bad file names, slot ids, actions; missing, damaged,
truncated and foreign files: 400 naming the file, the slot unchanged); an action on a busy slot
waits for its generation. OTHER_MODEL is a different model file of the same architecture (the
foreign model). ROCKY_TEST_HYBRID=1: MODEL has recurrent layers (a prompt is reused only when it
extends what the slot holds, so the same-request check is left out).
Exit 0 when every test passes.
"""
import os
import shutil
import sys
import threading
import time

import harness

BIN, DEVICE, SCRATCH, MODEL, OTHER = sys.argv[1:6]
ONLY = sys.argv[6:]
HYBRID = os.environ.get("ROCKY_TEST_HYBRID") == "1"
P = [1] + [200 + (i * 7) % 250 for i in range(40)]  # a 41-token prompt (ids valid in every test vocab)
N_GEN = 12


class Server(harness.Server):
    def __init__(self, *extra, model=None, device=None):
        super().__init__([BIN, "serve", "-m", model or MODEL, "--port", "0", "--device", device or DEVICE, "--no-warmup",
                          *extra])


def fresh_dir(name):
    d = os.path.join(SCRATCH, name)
    shutil.rmtree(d, ignore_errors=True)  # a run before may have left files and directories
    os.makedirs(d)
    return d


def slot_server(d, *extra, model=None):
    # The RAM tier is off: a cached prompt token can only come from the slot's own cells.
    return Server("-c", "1024", "-np", "2", "--cache-ram", "0", "--slot-save-path", d, *extra, model=model)


def gen(s, prompt, slot, n=N_GEN):
    """(generated token ids, text, cached prompt tokens) of a greedy native completion on `slot`
    (ignore_eos: it always ends at the limit, so the slot holds the prompt and all tokens but the last)."""
    j = s.ok("POST", "/completion", {"prompt": prompt, "n_predict": n, "temperature": 0, "id_slot": slot,
                                     "return_tokens": True, "cache_prompt": True, "ignore_eos": True})
    assert len(j["tokens"]) == n, j
    assert j["id_slot"] == slot, j
    assert j["tokens_cached"] == j["timings"]["cache_n"], j
    assert j["timings"]["prompt_n"] == len(prompt) - j["tokens_cached"], j
    return j["tokens"], j["content"], j["tokens_cached"]


def action(s, slot, what, filename=None):
    body = {"filename": filename} if filename is not None else {}
    return s.request("POST", f"/slots/{slot}?action={what}", body)


def act(s, slot, what, filename=None):
    status, j = action(s, slot, what, filename)
    assert status == 200, (slot, what, filename, status, j)
    assert j["id_slot"] == slot, j
    return j


def bad(s, slot, what, filename, status=400, *words):
    st, j = action(s, slot, what, filename)
    assert st == status, (slot, what, filename, st, j)
    msg = j["error"]["message"]
    for w in words:
        assert w in msg, (w, msg)
    return msg


def saved_state(s, d):
    """Slot 0 after a request, saved to d/a.bin: (prompt that extends it, n_saved, its text there)."""
    toks, _, _ = gen(s, P, 0)
    q = P + toks  # extends what the slot holds (the prompt and every generated token fed back)
    j = act(s, 0, "save", "a.bin")
    assert j["filename"] == "a.bin", j
    assert j["n_saved"] == len(P) + len(toks) - 1, (j, len(toks))  # the last token was never fed back
    assert j["n_written"] == os.path.getsize(os.path.join(d, "a.bin")), j
    assert j["timings"]["save_ms"] >= 0, j
    return q, j["n_saved"]


def test_no_slot_save_path():
    """Without --slot-save-path the actions are llama-server's 501; GET /slots is still served."""
    s = Server("-c", "256")
    try:
        st, j = action(s, 0, "save", "x.bin")
        assert st == 501, (st, j)
        assert j["error"]["type"] == "not_supported_error", j
        assert "--slot-save-path" in j["error"]["message"], j
        assert len(s.ok("GET", "/slots")) >= 1
    finally:
        s.stop()


def test_save_erase_restore():
    """Save, erase (nothing cached after), restore into the same and another slot (all cached, same text)."""
    d = fresh_dir("roundtrip")
    s = slot_server(d)
    try:
        first_toks, first_text, _ = gen(s, P, 0)
        q, n_saved = saved_state(s, d)
        assert act(s, 0, "erase")["n_erased"] == n_saved
        _, ref_text, cached = gen(s, q, 0)  # computed from nothing: the reference text
        assert cached == 0, cached
        assert act(s, 0, "erase")["n_erased"] > 0
        assert act(s, 0, "erase")["n_erased"] == 0  # erasing an empty slot is no error
        j = act(s, 0, "restore", "a.bin")
        assert j["n_restored"] == n_saved, j
        assert j["n_read"] == os.path.getsize(os.path.join(d, "a.bin")), j
        assert j["filename"] == "a.bin" and j["timings"]["restore_ms"] >= 0, j
        _, text, cached = gen(s, q, 0)
        assert cached == n_saved, (cached, n_saved)
        assert text == ref_text, (text, ref_text)
        # Into the other slot.
        assert act(s, 1, "restore", "a.bin")["n_restored"] == n_saved
        _, text, cached = gen(s, q, 1)
        assert cached == n_saved, (cached, n_saved)
        assert text == ref_text, (text, ref_text)
        # The OpenAI shape reports the restored tokens as usage.prompt_tokens_details.cached_tokens.
        act(s, 0, "restore", "a.bin")
        j = s.ok("POST", "/v1/completions", {"prompt": q, "max_tokens": N_GEN, "temperature": 0, "id_slot": 0,
                                             "ignore_eos": True})
        assert j["usage"]["prompt_tokens_details"]["cached_tokens"] == n_saved, j["usage"]
        assert j["choices"][0]["text"] == ref_text, (j["choices"][0]["text"], ref_text)
        if not HYBRID:
            # The first request again: its prompt minus the last token is cached, the same text.
            act(s, 1, "restore", "a.bin")
            toks, text, cached = gen(s, P, 1)
            assert cached == len(P) - 1, cached
            assert (toks, text) == (first_toks, first_text), (text, first_text)
        # Saving an empty slot: a file of 0 tokens that restores to an empty slot.
        act(s, 0, "erase")
        assert act(s, 0, "save", "empty.bin")["n_saved"] == 0
        assert act(s, 1, "restore", "empty.bin")["n_restored"] == 0
        _, _, cached = gen(s, q, 1)
        assert cached == 0, cached
    finally:
        s.stop()


def test_errors_leave_the_slot_unchanged():
    """Bad names, ids, actions and files are 400s naming what is wrong; the slot keeps its tokens."""
    d = fresh_dir("errors")
    s = slot_server(d)
    try:
        q, n_saved = saved_state(s, d)
        for name in ("../a.bin", "sub/a.bin", "/etc/passwd", "", ".", "..", "a..b", " a", "a.", "a\\b", "a\nb"):
            bad(s, 0, "save", name, 400, "Invalid filename")
            bad(s, 0, "restore", name, 400, "Invalid filename")
        st, j = s.request("POST", "/slots/0?action=save", {"filename": 7})
        assert st == 400 and j["error"]["param"] == "filename", (st, j)
        st, j = s.request("POST", "/slots/0?action=save", {})
        assert st == 400 and j["error"]["param"] == "filename", (st, j)
        for sid in ("2", "-1", "abc", "99999999999"):
            st, j = s.request("POST", f"/slots/{sid}?action=erase", {})
            assert st == 400 and "Invalid slot ID" in j["error"]["message"], (sid, st, j)
        st, j = s.request("POST", "/slots/0?action=load", {"filename": "a.bin"})
        assert st == 400 and "Invalid action" in j["error"]["message"], (st, j)
        st, j = s.request("POST", "/slots/0", {"filename": "a.bin"})
        assert st == 400 and "Invalid action" in j["error"]["message"], (st, j)
        bad(s, 0, "restore", "missing.bin", 400, "missing.bin", "No such file")
        good = open(os.path.join(d, "a.bin"), "rb").read()
        damaged = {
            "trunc.bin": (good[: len(good) - 5], "truncated"),
            "short.bin": (good[:50], "truncated"),
            "empty.bin": (b"", "truncated"),
            "magic.bin": (b"X" + good[1:], "bad magic"),
            "header.bin": (good[:20] + bytes([good[20] ^ 1]) + good[21:], "header checksum"),
            "payload.bin": (good[:-1] + bytes([good[-1] ^ 0x40]), "payload checksum"),
            "padded.bin": (good + b"\0" * 8, "padded"),
            "huge.bin": (good + b"\0" * (64 << 20), "larger than any state"),
        }
        for name, (data, why) in damaged.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
            msg = bad(s, 0, "restore", name, 400, name, why)
            assert "Unable to restore slot 0" in msg, msg
        os.mkdir(os.path.join(d, "dir.bin"))
        bad(s, 0, "restore", "dir.bin", 400, "dir.bin")
        # Slot 0 still holds what it held: the saved tokens are cached.
        _, _, cached = gen(s, q, 0)
        assert cached == n_saved, (cached, n_saved)
    finally:
        s.stop()


def test_foreign_file():
    """A file saved with another model (same architecture, another file) is refused by name."""
    d = fresh_dir("foreign")
    s = slot_server(d)
    try:
        saved_state(s, d)
    finally:
        s.stop()
    s = slot_server(d, model=OTHER)
    try:
        bad(s, 0, "restore", "a.bin", 400, "a.bin", "another model")
        assert act(s, 0, "save", "b.bin")["n_saved"] == 0
    finally:
        s.stop()
    if DEVICE == "vulkan":
        # The same model on the CPU backend: the KV is f32 there (f16 here), another layout.
        s = Server("-c", "1024", "-np", "2", "--cache-ram", "0", "--slot-save-path", d, device="cpu")
        try:
            bad(s, 0, "restore", "a.bin", 400, "a.bin", "KV layout")
        finally:
            s.stop()


def test_busy_slot_waits():
    """An action on a busy slot waits for its generation (llama-server defers it), then saves all of it."""
    d = fresh_dir("busy")
    s = slot_server(d, "--test-token-delay-ms", "100")
    try:
        box = {}
        t = threading.Thread(target=lambda: box.update(r=gen(s, P, 0, n=10)))
        t.start()
        for _ in range(100):
            if s.ok("GET", "/slots")[0]["is_processing"]:
                break
            time.sleep(0.02)
        t0 = time.time()
        j = act(s, 0, "save", "busy.bin")
        t.join()
        toks = box["r"][0]
        assert time.time() - t0 > 0.3, "the save did not wait for the generation"
        assert j["n_saved"] == len(P) + len(toks) - 1, (j, len(toks))
    finally:
        s.stop()


if __name__ == "__main__":
    sys.exit(harness.run_tests(globals(), ONLY))
