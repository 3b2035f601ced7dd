#!/usr/bin/env python3
"""Concurrent streams through a warm `rocky serve`, and what one request costs end to end
(python3 stdlib only).

  python3 lab/streams.py --url URL [--streams 1,4] [--prompt-tokens 512] [--gen 128]
  python3 lab/streams.py --url URL --turn --prompt-tokens 5050 --gen 16 [--runs 3]

Streams: for each N in --streams, N concurrent /v1/completions streams (distinct prompts of
--prompt-tokens tokens, --gen tokens each, ignore_eos); aggregate decode = tokens generated after
each stream's first token / the time from the first stream's first token to the last stream's last
(the later streams' prompts fall inside that window); steady decode = tokens that arrived while
every stream was decoding (from the last stream's first token to the first stream's last) / that
window: the batched decode step alone.
Turn: --runs requests of distinct prompts one after another; for each, the time to the last token
against TTFT + (gen − 1) × the mean gap between its tokens, and the wall time end to end.
"""
import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse

TEXT = ("Once upon a time there was a little girl named Lily. She liked to play in the park with her "
        "friends. One day she found a big red ball under a tree and she was very happy. ")


def post(host, port, path, body):
    c = http.client.HTTPConnection(host, port, timeout=600)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    if r.status != 200:
        raise SystemExit(f"{path}: HTTP {r.status}: {data[:300]!r}")
    return json.loads(data)


def prompt_ids(host, port, i, n):
    ids = post(host, port, "/tokenize", {"content": f"Request {i}. " + TEXT * (n // 20 + 2), "add_special": True})["tokens"]
    return ids[:n]


def stream(host, port, ids, gen):
    """(send time, token event times, final timings)."""
    c = http.client.HTTPConnection(host, port, timeout=600)
    body = {"prompt": ids, "max_tokens": gen, "stream": True, "ignore_eos": True, "temperature": 0,
            "cache_prompt": False}
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise SystemExit(f"/v1/completions: HTTP {r.status}: {r.read()[:300]!r}")
    times, timings = [], None
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        ev = json.loads(line[6:])
        if ev.get("choices") and ev["choices"][0].get("text"):
            times.append(time.perf_counter())
        if "timings" in ev:
            timings = ev["timings"]
    return t0, times, timings


def streams(host, port, n, prompt_tokens, gen, base):
    prompts = [prompt_ids(host, port, base + i, prompt_tokens) for i in range(n)]
    out = [None] * n

    def run(i):
        out[i] = stream(host, port, prompts[i], gen)

    th = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    first = min(o[1][0] for o in out)
    last = max(o[1][-1] for o in out)
    tokens = sum(len(o[1]) - 1 for o in out)
    seqs = max((o[2] or {}).get("batch_seqs_max", 1) for o in out)
    a, b = max(o[1][0] for o in out), min(o[1][-1] for o in out)
    inside = sum(1 for o in out for t in o[1] if a < t <= b)
    return tokens / (last - first), seqs, inside / (b - a) if b > a else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--streams", default="1,4")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--turn", action="store_true")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warm-s", type=float, default=2.0)
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    host, port = u.hostname, u.port
    warm = prompt_ids(host, port, 10_000, 64)
    t_end = time.perf_counter() + a.warm_s  # the GPU's clocks ramp under sustained load
    while time.perf_counter() < t_end:
        stream(host, port, warm, 16)
    result = {"prompt_tokens": a.prompt_tokens, "gen": a.gen}
    if a.turn:
        rows = []
        for i in range(a.runs):
            ids = prompt_ids(host, port, 20_000 + i, a.prompt_tokens)
            t0, times, timings = stream(host, port, ids, a.gen)
            ttft = times[0] - t0
            gaps = [b - x for x, b in zip(times, times[1:])]
            end = times[-1] - t0
            rows.append({"ttft_ms": 1000 * ttft, "end_ms": 1000 * end,
                         "gap_ms": 1000 * statistics.mean(gaps) if gaps else 0.0,
                         "cache_ms": (timings or {}).get("cache_ms", 0)})
            print(f"turn {i}: TTFT {1000 * ttft:.1f} ms, last token {1000 * end:.1f} ms, mean gap "
                  f"{rows[-1]['gap_ms']:.2f} ms")
        result["turns"] = rows
        result["end_ms_median"] = statistics.median(r["end_ms"] for r in rows)
        result["ttft_ms_median"] = statistics.median(r["ttft_ms"] for r in rows)
    else:
        agg, steady = {}, {}
        for k, n in enumerate(int(x) for x in a.streams.split(",")):
            tps, seqs, st = streams(host, port, n, a.prompt_tokens, a.gen, 1000 * (k + 1))
            agg[str(n)], steady[str(n)] = tps, st
            print(f"{n} stream(s): aggregate decode {tps:.1f} t/s, steady {st:.1f} t/s (batch_seqs_max {seqs})")
        result["aggregate_tps"] = agg
        result["steady_tps"] = steady
        if "1" in agg:
            for n, v in agg.items():
                if n != "1":
                    print(f"{n} streams / 1: {v / agg['1']:.2f}x aggregate, {steady[n] / steady['1']:.2f}x steady")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
