#!/usr/bin/env python3
"""Time to first token and inter-token gap of a warm `rocky serve` (python3 stdlib only).

  python3 lab/ttft.py --url http://127.0.0.1:8080 [--prompt-tokens 512] [--runs 10] [--gen 128]

TTFT: median over --runs streamed /v1/completions requests, each with a distinct prompt of exactly
--prompt-tokens tokens (sent as token ids; built with /tokenize), from sending the request to the
first `data:` event (the first generated token; /v1/completions sends no role chunk first).
Gap: one streamed request of --gen tokens (ignore_eos): mean time between consecutive token events.
Also prints the server's own timings (prompt_ms, predicted_per_token_ms) for the same requests.
Compare with `rocky bench -m MODEL -p 512 -n 128 -ub 512` on the same device: TTFT vs pp512 time,
gap vs tg's ms per token (the bar: TTFT within 5 %, gap within +0.2 ms).
Two warm-up requests run first, then --warm-s seconds of back-to-back requests (GPU clocks).
"""
import argparse
import http.client
import json
import statistics
import sys
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
        sys.exit(f"{path}: HTTP {r.status}: {data[:400]!r}")
    return json.loads(data)


def prompt_ids(host, port, i, n):
    ids = post(host, port, "/tokenize", {"content": f"Story {i}. " + TEXT * (n // 20 + 2), "add_special": True})["tokens"]
    if len(ids) < n:
        sys.exit(f"/tokenize gave {len(ids)} tokens, fewer than {n}")
    return ids[:n]


CACHE_PROMPT = True


def stream(host, port, ids, max_tokens, ignore_eos=False):
    """Returns (t_send, [event arrival times], final timings)."""
    body = {"prompt": ids, "max_tokens": max_tokens, "temperature": 0, "stream": True, "ignore_eos": ignore_eos,
            "cache_prompt": CACHE_PROMPT}
    c = http.client.HTTPConnection(host, port, timeout=600)
    c.connect()
    payload = json.dumps(body)
    t_send = time.perf_counter()
    c.request("POST", "/v1/completions", payload, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        sys.exit(f"HTTP {r.status}: {r.read()[:400]!r}")
    times, timings = [], None
    while True:
        line = r.readline()
        if not line:
            break
        if not line.startswith(b"data: "):
            continue
        now = time.perf_counter()
        data = line[6:].strip()
        if data == b"[DONE]":
            break
        j = json.loads(data)
        ch = j.get("choices") or []
        if ch and ch[0].get("finish_reason") is None:
            times.append(now)
        if "timings" in j:
            timings = j["timings"]
    c.close()
    return t_send, times, timings


def batch_metrics(host, port):
    """rocky:batch_* counters of /metrics as {name: value} ({} when the server has none)."""
    try:
        c = http.client.HTTPConnection(host, port, timeout=60)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        if line.startswith("rocky:batch_"):
            name, _, v = line.partition(" ")
            try:
                out[name[len("rocky:"):]] = float(v)
            except ValueError:
                pass
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--warm-s", type=float, default=2.0,
                    help="seconds of back-to-back warm-up requests before the timed ones (default 2)")
    ap.add_argument("--idle", type=float, default=0.0,
                    help="seconds of idle before each timed request (the GPU lowers its clock when idle; "
                         "the served turn's host time must not depend on it)")
    ap.add_argument("--no-cache-prompt", action="store_true", help="send cache_prompt: false (no prefix reuse)")
    a = ap.parse_args()
    global CACHE_PROMPT
    CACHE_PROMPT = not a.no_cache_prompt
    u = urllib.parse.urlparse(a.url)
    host, port = u.hostname, u.port
    prompts = [prompt_ids(host, port, i, a.prompt_tokens) for i in range(a.runs + 2)]
    for p in prompts[:2]:  # warm-up: the pipelines of these shapes
        stream(host, port, p, 2)
    # Then --warm-s seconds of back-to-back requests, as bench warms up ≥ 0.5 s before it times:
    # the GPU's clocks ramp only under sustained load (docs/perf-log: the SM clock sat below
    # 1,500 MHz in 70–84 % of the samples while two warm-up requests were the only load).
    t_end = time.perf_counter() + a.warm_s
    i = 0
    while time.perf_counter() < t_end:
        stream(host, port, prompts[i % 2], 16)
        i += 1
    ttft, server_prompt_ms, server_prompt_gpu_ms, host_ms = [], [], [], []
    for p in prompts[2:]:
        if a.idle > 0:
            time.sleep(a.idle)
        t_send, times, timings = stream(host, port, p, 1)
        if not times:
            sys.exit("no token event")
        ttft.append((times[0] - t_send) * 1000)
        if timings:
            server_prompt_ms.append(timings["prompt_ms"])
            server_prompt_gpu_ms.append(timings.get("prompt_gpu_ms", 0))
            # Host time: what the first token cost outside the GPU's own work and the prefix restore.
            host_ms.append(ttft[-1] - timings.get("prompt_gpu_ms", 0) - timings.get("cache_ms", 0))
    m0 = batch_metrics(host, port)
    _, times, timings = stream(host, port, prompts[0][:32], a.gen, ignore_eos=True)
    m1 = batch_metrics(host, port)
    gaps = [(b - x) * 1000 for x, b in zip(times, times[1:])]
    steps = m1.get("batch_steps_total", 0) - m0.get("batch_steps_total", 0)
    if steps > 0:  # where the gap's steps spent their time (ms per step)
        per = {k[len("batch_"):-len("_seconds_total")]: 1000 * (m1[k] - m0.get(k, 0)) / steps
               for k in m1 if k.endswith("_seconds_total")}
        print(f"gap steps: {steps:.0f}, replays {m1.get('batch_replays_total', 0) - m0.get('batch_replays_total', 0):.0f}; "
              "ms per step: " + ", ".join(f"{k} {v:.3f}" for k, v in per.items()))
    print(f"ttft: median {statistics.median(ttft):.2f} ms over {len(ttft)} requests of {a.prompt_tokens} tokens "
          f"(min {min(ttft):.2f}, max {max(ttft):.2f}); server prompt_ms median "
          f"{statistics.median(server_prompt_ms):.2f} ms, of it GPU (timestamps) "
          f"{statistics.median(server_prompt_gpu_ms):.2f} ms; per request (TTFT / GPU): "
          + " ".join(f"{t:.0f}/{g:.0f}" for t, g in zip(ttft, server_prompt_gpu_ms)) if server_prompt_ms else "")
    if host_ms:
        hs = sorted(host_ms)
        print(f"host time (TTFT - prompt_gpu_ms - cache_ms): median {statistics.median(hs):.2f} ms, "
              f"max {hs[-1]:.2f} ms over {len(hs)} requests" + (f" with {a.idle:g} s idle before each" if a.idle else ""))
    if gaps:
        print(f"gap: mean {statistics.mean(gaps):.3f} ms between {len(times)} streamed tokens "
              f"(median {statistics.median(gaps):.3f}); server predicted_per_token_ms "
              f"{timings['predicted_per_token_ms']:.3f}, of it in eval "
              f"{timings.get('predicted_eval_ms', 0) / max(1, timings.get('predicted_n', 1)):.3f}, of it GPU "
              f"{timings.get('predicted_gpu_ms', 0) / max(1, timings.get('predicted_n', 1)):.3f}" if timings else "")
    print(json.dumps({"prompt_tokens": a.prompt_tokens, "ttft_ms": ttft, "server_prompt_ms": server_prompt_ms, "ttft_median_ms": statistics.median(ttft),
                      "prompt_gpu_ms": server_prompt_gpu_ms, "host_ms": host_ms, "idle_s": a.idle,
                      "gap_mean_ms": statistics.mean(gaps) if gaps else None, "n_gen_events": len(times)}))


if __name__ == "__main__":
    main()
