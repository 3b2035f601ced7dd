#!/usr/bin/env python3
"""/infill, embeddings and rerank of `rocky serve` through live servers (standard library only).

usage: test_retrieval_http.py ROCKY_BIN STORIES_MODEL SCRATCH_DIR [TEST ...]

Models are made here with `rocky synth` (f32): qwen2.5-coder-test (FIM keys), qwen3-embedding-test
(pooling last), qwen3-reranker-test (pooling rank, cls.output.weight); stories260K is the model
without FIM tokens. Each test starts its own servers (--port 0):
  infill: llama-server's fields, the second keystroke reuses the prefix cache (timings.cache_n),
          streamed like /completion, a model without FIM tokens is a 400 naming the keys, bad
          fields named, completions refused by an --embedding server and embeddings by a chat one;
  embeddings: /v1/embeddings float and base64 are the same L2-normalised vector, inputs as a
          string, a list and token ids, /embedding with --pooling none returns every token and its
          mean normalised equals --pooling mean's answer, the CPU and Vulkan servers agree
          (cosine >= 0.999), bad fields named;
  rerank: scores sorted and equal to the one-document runs, top_n and return_documents, CPU and
          Vulkan scores within 2 %, an embedding model refused by --reranking at start.
"""
import base64
import json
import math
import os
import struct
import subprocess
import sys

import harness

BIN, STORIES, SCRATCH = sys.argv[1:4]
ONLY = sys.argv[4:]
os.makedirs(SCRATCH, exist_ok=True)


def synth(preset):
    path = os.path.join(SCRATCH, preset + ".gguf")
    if not os.path.exists(path):
        subprocess.run([BIN, "synth", "--preset", preset, "--type", "f32", "-q", "-o", path + ".tmp"], check=True)
        os.rename(path + ".tmp", path)
    return path


class Server(harness.Server):
    def __init__(self, model, *extra, device="cpu"):
        super().__init__([BIN, "serve", "-m", model, "--port", "0", "--device", device, "--no-warmup", "-c", "1024",
                          "--shutdown-drain", "0", *extra])

    def post_ok(self, path, body):
        return self.ok("POST", path, body)

    def error(self, path, body, status, param=None):
        st, j = self.request("POST", path, body)
        assert st == status, f"POST {path} {body}: HTTP {st} (want {status}): {j}"
        if param is not None:
            assert j["error"]["param"] == param, j
        return j["error"]


def serve_exit(model, *extra):
    r = subprocess.run([BIN, "serve", "-m", model, "--port", "0", "--device", "cpu", "--no-warmup", *extra],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stderr


def test_infill():
    s = Server(synth("qwen2.5-coder-test"))
    try:
        prefix = "def fib(n):\n    if n < 2:\n        return n\n" * 8 + "    return "
        body = {"input_prefix": prefix, "input_suffix": "\n\nprint(fib(10))\n",
                "input_extra": [{"filename": "util.py", "text": "def add(a, b):\n    return a + b\n"}],
                "prompt": "", "n_predict": 4, "temperature": 0}
        first = s.post_ok("/infill", body)
        assert isinstance(first["content"], str) and first["tokens_predicted"] >= 1, first
        n_prompt = first["timings"]["prompt_n"] + first["timings"]["cache_n"]
        # The next keystroke: one more character typed at the cursor. Everything before the
        # cursor's end of prefix is the cached prefix, and the suffix follows: most of the prompt
        # is reused.
        second = s.post_ok("/infill", {**body, "input_prefix": prefix + "f"})
        assert second["timings"]["cache_n"] > 0.5 * n_prompt, (first["timings"], second["timings"])
        # Streamed as /completion streams.
        st, text = s.request("POST", "/infill", {**body, "stream": True})
        assert st == 200, text
        events = [json.loads(l[6:]) for l in text.splitlines() if l.startswith("data: {")]
        assert events[-1]["stop"] is True and "".join(e["content"] for e in events) == first["content"], events
        s.error("/infill", {**body, "input_extra": [{"filename": "a", "text": 3}]}, 400, "input_extra[0].text")
        s.error("/infill", {**body, "input_extra": [{"name": "a"}]}, 400, "input_extra[0]")
        s.error("/infill", {**body, "input_extra": "x"}, 400, "input_extra")
        s.error("/infill", {**body, "input_prefix": 7}, 400, "input_prefix")
        s.error("/infill", {**body, "n_predict": "x"}, 400, "n_predict")
        s.error("/v1/embeddings", {"input": "x"}, 501)
    finally:
        s.stop()
    s = Server(STORIES)
    try:
        e = s.error("/infill", {"input_prefix": "a", "input_suffix": "b"}, 400)
        assert "tokenizer.ggml.fim_pre_token_id" in e["message"] and "fim_mid" in e["message"], e
    finally:
        s.stop()


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / (norm(a) * norm(b))


def test_embeddings():
    model = synth("qwen3-embedding-test")
    texts = ["The quick brown fox jumps over the lazy dog.", "A panda eats bamboo."]
    vecs = {}
    for dev in ("cpu", "vulkan"):
        s = Server(model, "--embedding", device=dev)
        try:
            r = s.post_ok("/v1/embeddings", {"input": texts, "model": "emb"})
            assert r["object"] == "list" and r["model"] == "emb", r
            assert [d["index"] for d in r["data"]] == [0, 1] and r["data"][0]["object"] == "embedding", r
            assert r["usage"]["prompt_tokens"] == r["usage"]["total_tokens"] > 0, r
            v = [d["embedding"] for d in r["data"]]
            assert all(abs(norm(x) - 1) < 1e-4 for x in v), [norm(x) for x in v]
            b = s.post_ok("/v1/embeddings", {"input": texts[0], "encoding_format": "base64"})["data"][0]["embedding"]
            raw = base64.b64decode(b)
            assert list(struct.unpack(f"<{len(raw) // 4}f", raw)) == [struct.unpack("<f", struct.pack("<f", x))[0] for x in v[0]]
            ids = s.post_ok("/tokenize", {"content": texts[0], "add_special": True})["tokens"]
            by_ids = s.post_ok("/v1/embeddings", {"input": ids})["data"][0]["embedding"]
            assert max(abs(x - y) for x, y in zip(by_ids, v[0])) < 1e-6
            s.error("/v1/embeddings", {"input": []}, 400, "input")
            s.error("/v1/embeddings", {"input": [1, "a"]}, 400, "input[1]")
            s.error("/v1/embeddings", {"input": "a", "encoding_format": "hex"}, 400, "encoding_format")
            s.error("/v1/embeddings", {"input": [[5, 99999999]]}, 400, "input[0][1]")
            s.error("/v1/embeddings", {}, 400, "input")
            s.error("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}, 501)
            s.error("/rerank", {"query": "q", "documents": ["d"]}, 501)
            vecs[dev] = v
        finally:
            s.stop()
    for a, b in zip(vecs["cpu"], vecs["vulkan"]):
        assert cosine(a, b) >= 0.999, cosine(a, b)
    # pooling none: every token's state, unnormalised; their mean, L2-normalised, is --pooling mean.
    s = Server(model, "--embedding", "--pooling", "none")
    try:
        rows = s.post_ok("/embedding", {"content": texts[1]})[0]["embedding"]
        n = len(s.post_ok("/tokenize", {"content": texts[1], "add_special": True})["tokens"])
        assert len(rows) == n, (len(rows), n)
        mean = [sum(c) / n for c in zip(*rows)]
        mean = [x / norm(mean) for x in mean]
        s.error("/v1/embeddings", {"input": "x"}, 400)
    finally:
        s.stop()
    s = Server(model, "--embedding", "--pooling", "mean")
    try:
        got = s.post_ok("/v1/embeddings", {"input": texts[1]})["data"][0]["embedding"]
        assert max(abs(x - y) for x, y in zip(got, mean)) < 1e-5
        native = s.post_ok("/embedding", {"content": texts[1]})
        assert len(native) == 1 and len(native[0]["embedding"]) == 1, native
        assert max(abs(x - y) for x, y in zip(native[0]["embedding"][0], got)) < 1e-6
        raw = s.post_ok("/embedding", {"content": texts[1], "embd_normalize": -1})[0]["embedding"][0]
        assert abs(norm(raw) - 1) > 1e-3  # not normalised
    finally:
        s.stop()


def test_rerank():
    s = Server(synth("qwen3-reranker-test"), "--reranking")
    try:
        docs = ["hi", "The giant panda is a bear native to China.", "Paris is in France.", "bamboo"]
        r = s.post_ok("/rerank", {"query": "What is a panda?", "documents": docs})
        res = r["results"]
        assert sorted(x["index"] for x in res) == [0, 1, 2, 3], r
        scores = [x["relevance_score"] for x in res]
        assert scores == sorted(scores, reverse=True), scores
        assert all(x["document"]["text"] == docs[x["index"]] for x in res), res
        assert r["usage"]["prompt_tokens"] > 0, r
        # One document at a time gives the same score (each pair is its own sequence).
        for x in res:
            one = s.post_ok("/v1/rerank", {"query": "What is a panda?", "documents": [docs[x["index"]]]})
            assert abs(one["results"][0]["relevance_score"] - x["relevance_score"]) < 1e-4, (one, x)
        top = s.post_ok("/rerank", {"query": "What is a panda?", "documents": docs, "top_n": 2,
                               "return_documents": False})["results"]
        assert [x["index"] for x in top] == [x["index"] for x in res[:2]] and "document" not in top[0], top
        s.error("/rerank", {"documents": docs}, 400, "query")
        s.error("/rerank", {"query": "q", "documents": [1]}, 400, "documents[0]")
        s.error("/rerank", {"query": "q", "documents": docs, "top_n": 0}, 400, "top_n")
        s.error("/v1/embeddings", {"input": "x"}, 400)
    finally:
        s.stop()
    # Vulkan gives the same scores (within the backends' rounding) and so the same order here.
    s = Server(synth("qwen3-reranker-test"), "--reranking", device="vulkan")
    try:
        v = s.post_ok("/rerank", {"query": "What is a panda?", "documents": docs})["results"]
        by_index = {x["index"]: x["relevance_score"] for x in res}
        for x in v:
            assert abs(x["relevance_score"] - by_index[x["index"]]) < 2e-2 * max(1, abs(by_index[x["index"]])), (v, res)
    finally:
        s.stop()
    # --embedding --pooling rank is the same server as --reranking.
    s = Server(synth("qwen3-reranker-test"), "--embedding", "--pooling", "rank")
    try:
        same = s.post_ok("/rerank", {"query": "What is a panda?", "documents": docs})["results"]
        assert [x["index"] for x in same] == [x["index"] for x in res], (same, res)
    finally:
        s.stop()
    rc, err = serve_exit(synth("qwen3-embedding-test"), "--reranking")
    assert rc != 0 and "cls.output.weight" in err, (rc, err)


if __name__ == "__main__":
    sys.exit(harness.run_tests(globals(), ONLY))
