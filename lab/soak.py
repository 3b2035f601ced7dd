#!/usr/bin/env python3
"""Soak test for `rocky serve` (python3 stdlib only; runs on the H200 device too).

N clients × M requests each, a mix of chat (streamed and not) and completions (streamed and not),
with random client disconnects (mid-stream, or before a non-streamed answer). Reports: requests by
outcome, server errors (5xx, broken responses, connection failures the client did not cause), 503s
(queue full: not errors), and the server's RSS sampled every 0.5 s: after warm-up vs at the end.

  python3 lab/soak.py --rocky build/rocky --model ../shared/reference/models/stories260K.gguf \\
      [--device vulkan] [--np 2] [--clients 8] [--requests 100] [--disconnect 0.2]
  python3 lab/soak.py --url http://127.0.0.1:8080 --pid PID      # an already running server

Exit status 0 when there were no server errors and the server is still healthy. The last line of
the output is a JSON summary (what lab/run.py records).
"""
import argparse
import http.client
import json
import random
import re
import shlex
import subprocess
import sys
import threading
import time
import urllib.parse

PROMPTS = ["Once upon a time", "Lily and Tom went to the park.", "The little dog was sad because",
           "One day, a big bird", "Sara had a red ball. She", "The sun was hot and the sky was blue."]


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.errors = []

    def add(self, what, err=None):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1
            if err is not None and len(self.errors) < 20:
                self.errors.append(err)


def one_request(host, port, rng, args, stats):
    kind = rng.choice(["chat", "chat_stream", "completion", "completion_stream"])
    stream = kind.endswith("_stream")
    disconnect = rng.random() < args.disconnect
    max_tokens = rng.randint(1, args.max_tokens)
    if kind.startswith("chat"):
        path = "/v1/chat/completions"
        body = {"messages": [{"role": "user", "content": rng.choice(PROMPTS)}], "max_tokens": max_tokens}
    else:
        path = "/v1/completions"
        body = {"prompt": rng.choice(PROMPTS), "max_tokens": max_tokens}
    body["stream"] = stream
    body["temperature"] = rng.choice([0, 0.8])
    conn = http.client.HTTPConnection(host, port, timeout=args.timeout)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        if disconnect and not stream:
            time.sleep(rng.uniform(0, 0.05))
            conn.sock.close()  # leave before the answer
            stats.add("disconnected")
            return
        resp = conn.getresponse()
        if resp.status == 503:
            resp.read()
            stats.add("503_queue_full")
            return
        if resp.status != 200:
            stats.add(f"http_{resp.status}", f"{kind}: HTTP {resp.status}: {resp.read()[:300]!r}")
            return
        if not stream:
            j = json.loads(resp.read())
            if "choices" not in j or "usage" not in j:
                stats.add("server_error", f"{kind}: bad body {j}")
            else:
                stats.add("ok")
            return
        leave_after = rng.randint(1, 4) if disconnect else None
        n = 0
        done = False
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                done = True
                break
            j = json.loads(data)
            if "error" in j:
                stats.add("server_error", f"{kind}: error event {j}")
                return
            n += 1
            if leave_after is not None and n >= leave_after:
                conn.sock.close()
                stats.add("disconnected")
                return
        if done:
            stats.add("ok")
        else:
            stats.add("server_error", f"{kind}: stream ended without [DONE] after {n} chunks")
    except (ConnectionError, http.client.HTTPException, OSError, ValueError) as e:
        stats.add("server_error", f"{kind}: {type(e).__name__}: {e}")
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url")
    ap.add_argument("--pid", type=int)
    ap.add_argument("--rocky", help="the command that runs rocky (e.g. build/rocky or '.devpack/run rocky')")
    ap.add_argument("--model")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=100, help="per client")
    ap.add_argument("--disconnect", type=float, default=0.2, help="probability a request disconnects early")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    proc = None
    if args.rocky:
        cmd = shlex.split(args.rocky) + ["serve", "-m", args.model, "--port", "0", "--device", args.device, "-np", str(args.np), "--kv-unified",
               "-c", str(args.ctx)]
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        url = None
        t0 = time.time()
        while url is None and time.time() - t0 < 120:
            line = proc.stderr.readline()
            m = re.search(r"listening on (http://\S+)", line)
            if m:
                url = m.group(1)
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
        args.url, args.pid = url, proc.pid
    if not args.url:
        sys.exit("need --url (and --pid for RSS) or --rocky + --model")
    u = urllib.parse.urlparse(args.url)
    host, port = u.hostname, u.port
    for _ in range(600):
        try:
            c = http.client.HTTPConnection(host, port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                break
        except OSError:
            pass
        time.sleep(0.1)

    stats = Stats()
    rss = []  # (time, KiB, requests done)
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            if args.pid:
                r = rss_kib(args.pid)
                if r:
                    with stats.lock:
                        done = sum(stats.counts.values())
                    rss.append((time.time(), r, done))
            time.sleep(0.5)

    threading.Thread(target=sampler, daemon=True).start()

    def client(i):
        rng = random.Random(args.seed * 1000 + i)
        for _ in range(args.requests):
            one_request(host, port, rng, args, stats)

    t0 = time.time()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    time.sleep(0.6)
    stop.set()

    healthy = False
    metrics = ""
    try:
        c = http.client.HTTPConnection(host, port, timeout=5)
        c.request("GET", "/health")
        healthy = c.getresponse().status == 200
        c = http.client.HTTPConnection(host, port, timeout=5)
        c.request("GET", "/metrics")
        metrics = c.getresponse().read().decode()
    except OSError as e:
        stats.add("server_error", f"after the soak: {e}")

    total = args.clients * args.requests
    server_errors = sum(v for k, v in stats.counts.items() if k == "server_error" or k.startswith("http_5"))
    print(f"soak: {args.clients} clients x {args.requests} requests = {total} in {wall:.1f} s "
          f"({total / wall:.1f} req/s), disconnect probability {args.disconnect}")
    for k in sorted(stats.counts):
        print(f"  {k}: {stats.counts[k]}")
    print(f"  server errors: {server_errors}")
    for e in stats.errors:
        print(f"    {e}")
    if rss:
        warm = [r for r in rss if r[2] >= total // 10] or rss
        print(f"  RSS: start {rss[0][1] / 1024:.1f} MiB, after warm-up (10% of requests) {warm[0][1] / 1024:.1f} MiB, "
              f"end {rss[-1][1] / 1024:.1f} MiB, max {max(r[1] for r in rss) / 1024:.1f} MiB "
              f"(growth after warm-up {(rss[-1][1] - warm[0][1]) / 1024:+.1f} MiB)")
    for name in ("requests_total", "errors_total", "tokens_predicted_total", "slots_busy", "requests_queued"):
        m = re.search(rf"^rocky:{name} (\S+)$", metrics, re.M)
        if m:
            print(f"  /metrics {name}: {m.group(1)}")
    print(f"  healthy after the soak: {healthy}")
    if proc:
        proc.terminate()
        rc = proc.wait(timeout=30)
        print(f"  server exit status after SIGTERM: {rc}")
    summary = {"requests": total, "wall_s": wall, "req_per_s": total / wall, "counts": dict(stats.counts),
               "server_errors": server_errors, "healthy": healthy}
    if rss:
        summary.update(rss_start_mib=rss[0][1] / 1024, rss_warm_mib=warm[0][1] / 1024, rss_end_mib=rss[-1][1] / 1024,
                       rss_max_mib=max(r[1] for r in rss) / 1024)
    print(json.dumps(summary))  # the last line: what lab/run.py records
    sys.exit(0 if server_errors == 0 and healthy else 1)


if __name__ == "__main__":
    main()
