#!/usr/bin/env python3
"""The prefix KV cache's time to first token (python3 stdlib only; runs on the device too).

A shared prefix of --prefix tokens + --new new tokens, streamed /v1/completions with max_tokens 1:
  cold            first request (nothing cached)
  warm            same process, same slot (-np 1): the prefix stays in the slot's KV (device tier)
  ram             same process after the slot's KV was replaced by another prompt: the RAM tier
  restart_pc      a new server on the same --cache-dir, its files in the page cache: disk tier
  restart         the same with the page cache dropped (where the machine allows it)
  restart_nowarm  the same with --no-warmup (the request creates the kernels' pipelines)
The goal: warm ≤ cold/20, restart ≤ cold/10. On a hybrid model (qwen3.5) the prefix resumes from
recurrent-state checkpoints at block boundaries, so warm/ram recompute the tail past the last block.

  python3 lab/prefix_cache.py --rocky '.devpack/run rocky' --model /tmp/q3b.gguf [--serve-flags ...]

Prints a table, then one JSON line (what lab/run.py records).
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--rocky", required=True, help="the command that runs rocky (e.g. '.devpack/run rocky')")
ap.add_argument("--model", required=True)
ap.add_argument("--cache-dir", default="/tmp/rocky-prefix-cache", help="emptied first")
ap.add_argument("--serve-flags", default="", help="extra `rocky serve` flags")
ap.add_argument("--prefix", type=int, default=5000)
ap.add_argument("--new", type=int, default=50)
ap.add_argument("--reps", type=int, default=3, help="each figure is the median of REPS requests")
ap.add_argument("--spin-s", type=float, default=1.5)
a = ap.parse_args()
run, model, cdir, flags = a.rocky, a.model, a.cache_dir, a.serve_flags
n_prefix, n_new, reps, preset = a.prefix, a.new, a.reps, os.path.basename(a.model)
shutil.rmtree(cdir, ignore_errors=True)
os.makedirs(cdir, exist_ok=True)

def start():
    args = run.split() + ["serve", "-m", model, "--port", "0", "-c", str(n_prefix + n_new + 64), "-np", "1",
                          "--cache-dir", cdir, *flags.split()]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    log, url = [], []
    ev = threading.Event()
    def pump():
        for line in p.stderr:
            log.append(line)
            m = re.search(r"listening on (http://\S+)", line)
            if m: url.append(m.group(1)); ev.set()
        ev.set()
    threading.Thread(target=pump, daemon=True).start()
    ev.wait(300)
    if not url: sys.exit("server did not start:\n" + "".join(log))
    t0 = time.time()
    while time.time() - t0 < 600:
        try:
            if json.load(urllib.request.urlopen(url[0] + "/health"))["status"] == "ok": break
        except Exception: time.sleep(0.2)
    return p, url[0], log

def metrics(url):
    out = {}
    for line in urllib.request.urlopen(url + "/metrics").read().decode().splitlines():
        if line.startswith("rocky:pipeline"):
            k, _, v = line.partition(" "); out[k[6:]] = float(v)
    return out

timings = []  # (label, TTFT ms, server timings, pipelines created during the request)
def ttft(url, ids, label=None, max_tokens=1, cache_prompt=True):
    body = json.dumps({"prompt": ids, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "cache_prompt": cache_prompt, "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    m0 = metrics(url) if label else {}
    t0 = time.perf_counter(); first = None; usage = None; tm = {}
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]": continue
            j = json.loads(line[6:])
            if first is None and j.get("choices"): first = time.perf_counter() - t0
            if j.get("usage"): usage = j["usage"]
            if j.get("timings"): tm = j["timings"]
    if label:
        m1 = metrics(url)
        made = {k: m1.get(k, 0) - m0.get(k, 0) for k in m1}
        timings.append((label, first * 1000.0, tm, made))
    return first * 1000.0, usage["prompt_tokens_details"]["cached_tokens"]

def spin(url, seconds):
    """Back-to-back requests of an unrelated short prompt (< one block: nothing is cached) for
    `seconds`, so the GPU's clocks have ramped as bench's ≥ 0.5 s warm-up ramps them."""
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        ttft(url, [rng.randrange(1000, 150000) for _ in range(100)], max_tokens=100, cache_prompt=False)

rng = random.Random(1)
prefix = [rng.randrange(1000, 150000) for _ in range(n_prefix)]
def tail(): return [rng.randrange(1000, 150000) for _ in range(n_new)]
other = [rng.randrange(1000, 150000) for _ in range(n_prefix)]
res = {"prefix": n_prefix, "new": n_new, "serve_flags": flags}
SPIN = a.spin_s
p, url, log = start()
res["warmup"] = "".join(l for l in log if "warm-up" in l).strip()
spin(url, SPIN)
res["cold_ms"], c = ttft(url, prefix + tail(), "cold"); assert c == 0, c
warm = [ttft(url, prefix + tail(), "warm") for _ in range(reps)]
res["warm_ms"] = statistics.median(w[0] for w in warm); res["warm_cached"] = warm[0][1]
ram = []
for _ in range(reps):
    ttft(url, other + tail())          # the slot now holds another prompt
    ram.append(ttft(url, prefix + tail(), "ram"))
res["ram_ms"] = statistics.median(r[0] for r in ram); res["ram_cached"] = ram[0][1]
res["cache_after_first"] = json.load(urllib.request.urlopen(url + "/cache"))
p.send_signal(signal.SIGTERM); p.wait(120)
# restart_pc: a new server, the disk tier's files still in the page cache (a server restart);
# restart: page cache dropped (a reboot, where the machine lets us); restart_nowarm: the same with
# --no-warmup, so the request creates the kernels' pipelines itself.
def drop():
    try:
        subprocess.run(["sh", "-c", "sync && echo 3 > /proc/sys/vm/drop_caches"], check=True, capture_output=True)
        return True
    except Exception:
        return False
for label, dropit, extra in [("restart_pc", False, ""), ("restart", True, ""), ("restart_nowarm", True, "--no-warmup")]:
    dropped = drop() if dropit else False
    if label == "restart": res["page_cache_dropped"] = dropped
    flags0 = flags; flags = (flags + " " + extra).strip()
    p, url, log = start(); flags = flags0
    if dropit and dropped: drop()   # the model file's pages were read back at load
    spin(url, SPIN)
    res[label + "_ms"], res[label + "_cached"] = ttft(url, prefix + tail(), label)
    if label == "restart": res["cache_after_restart"] = json.load(urllib.request.urlopen(url + "/cache"))
    p.send_signal(signal.SIGTERM); p.wait(120)
res["timings"] = timings
res["server_log_tail"] = "".join(log[-8:])
res["preset"] = preset
cold = res["cold_ms"]
print(f"prefix {n_prefix} + {n_new} new tokens ({preset}, -np 1, {flags or 'default flags'})")
print(res["warmup"] or "(no warm-up line)")
print(f"(each server first ran {SPIN} s of unrelated back-to-back requests: GPU clocks ramped)")
for k in ["cold", "warm", "ram", "restart_pc", "restart", "restart_nowarm"]:
    ms = res[k + "_ms"]; cached = res.get(k + "_cached", 0)
    print(f"{k:14} TTFT {ms:9.1f} ms  cached {cached:5}  cold/this {cold / ms:6.1f}x")
print("request         TTFT ms  cache_ms  prompt_n  prompt_ms  of it GPU  pipelines made (ms)")
for label, t, tm, made in timings:
    print(f"{label:14} {t:8.1f} {tm.get('cache_ms', 0):9.1f} {tm.get('prompt_n', 0):9} {tm.get('prompt_ms', 0):10.1f}"
          f" {tm.get('prompt_gpu_ms', 0):10.1f}"
          f"  {made.get('pipelines_created_total', 0):.0f} ({1000 * made.get('pipeline_create_seconds_total', 0):.1f})")
print(f"goal: warm ≤ cold/20 → {'met' if res['warm_ms'] * 20 <= cold else 'NOT met'}; "
      f"restart ≤ cold/10 → {'met' if res['restart_ms'] * 10 <= cold else 'NOT met'} "
      f"(page cache dropped: {res['page_cache_dropped']})")
summary = {k: res[k] for k in res if k.endswith("_ms") or k.endswith("_cached")}
summary.update(prefix=n_prefix, new=n_new, serve_flags=flags, page_cache_dropped=res.get("page_cache_dropped"))
print(json.dumps(summary))  # the last line: what lab/run.py records
