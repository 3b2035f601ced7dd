#!/usr/bin/env python3
"""Soak test for `rocky serve` (python3 stdlib only; runs on the H200 device too).

N clients × M requests each, a mix of chat (streamed and not) and completions (streamed and not),
long prompts, malformed requests (expected: 400), and random client disconnects (mid-stream, or
before a non-streamed answer). With --fault SPEC the server it starts runs under the fault injector
(ROCKY_FAULT=SPEC, README: environment variables): a device fault must fail only the requests of its
step, with a 503 naming it (a status, or an error event in a stream), and /health must answer 200
right after each one. Reports: requests by outcome, server errors (5xx other than those 503s,
broken responses, connection failures the client did not cause), 503s of a full queue (not
errors), faults injected by kind (/metrics), p50/p99 time to first token of the streams, and the
server's RSS sampled every 0.5 s: after warm-up (--warmup share of the requests) vs at the end.

  python3 lab/soak.py --rocky build/rocky --model ../shared/reference/models/stories260K.gguf \\
      [--device vulkan] [--np 2] [--clients 8] [--requests 100] [--disconnect 0.2] \\
      [--fault lost%300,alloc%4,disk%3 --cache-dir DIR] [--check]
  python3 lab/soak.py --url http://127.0.0.1:8080 --pid PID      # an already running server

--check (the CTest `test_soak`) also asserts: at least --min-requests requests, each fault kind of
--fault injected at least --min-faults times, the server never died, every failed request a 503 of
a fault or a full queue, /health 200 after each fault, RSS drift after warm-up within
--max-rss-drift. --long: 10× the requests (the long soak, by hand).

Exit status 0 when there were no server errors, the checks held and the server is still healthy.
The last line of the output is a JSON summary (what lab/run.py records).
"""
import argparse
import http.client
import os
import json
import random
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse

PROMPTS = ["Once upon a time", "Lily and Tom went to the park.", "The little dog was sad because",
           "One day, a big bird", "Sara had a red ball. She", "The sun was hot and the sky was blue."]


LONG_WORDS = ("the little girl saw a big red ball in the park and she ran to it with her dog who was very "
              "happy because the sun was warm and the birds were singing in the tall green trees").split()

# Malformed requests: each must be answered 400 (never a 5xx, never a crash).
MALFORMED = [
    ("/v1/chat/completions", b"{not json"),
    ("/v1/chat/completions", b'{"messages": "hello"}'),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": "many"}'),
    ("/v1/completions", b'{"prompt": "hi", "temperature": -3}'),
    ("/v1/completions", b'{"prompt": [1, 2, 99999999]}'),
    ("/v1/completions", b"[]"),
]


def percentile(v, q):
    if not v:
        return None
    v = sorted(v)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def is_fault(err_json):
    e = err_json.get("error", err_json) if isinstance(err_json, dict) else {}
    return isinstance(e, dict) and (e.get("code") == 503 or e.get("type") == "unavailable_error") and \
        "device fault" in str(e.get("message", ""))


def health_ok(host, port):
    try:
        c = http.client.HTTPConnection(host, port, timeout=10)
        c.request("GET", "/health")
        return c.getresponse().status == 200
    except OSError:
        return False


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
        self.ttft = []  # seconds, streams
        self.health_after_fault = [0, 0]  # [checked, failed]

    def add(self, what, err=None):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1
            if err is not None and len(self.errors) < 20:
                self.errors.append(err)


def after_fault(host, port, stats):
    ok = health_ok(host, port)
    with stats.lock:
        stats.health_after_fault[0] += 1
        stats.health_after_fault[1] += 0 if ok else 1
    if not ok:
        stats.add("server_error", "/health was not 200 right after a device fault")


def malformed(host, port, rng, args, stats):
    path, body = rng.choice(MALFORMED)
    conn = http.client.HTTPConnection(host, port, timeout=args.timeout)
    try:
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        text = resp.read()
        if resp.status == 400:
            stats.add("malformed_400")
        else:
            stats.add("server_error", f"malformed {path} {body[:60]!r}: HTTP {resp.status}: {text[:200]!r}")
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        stats.add("server_error", f"malformed: {type(e).__name__}: {e}")
    finally:
        conn.close()


def one_request(host, port, rng, args, stats):
    if rng.random() < args.malformed:
        return malformed(host, port, rng, args, stats)
    kind = rng.choice(["chat", "chat_stream", "completion", "completion_stream"])
    stream = kind.endswith("_stream")
    disconnect = rng.random() < args.disconnect
    max_tokens = rng.randint(1, args.max_tokens)
    text = rng.choice(PROMPTS)
    if rng.random() < args.long_prompt:  # a long prompt: several prefix-cache blocks, chunked prefill
        text += " " + " ".join(rng.choice(LONG_WORDS) for _ in range(rng.randint(60, args.long_words)))
    if kind.startswith("chat"):
        path = "/v1/chat/completions"
        body = {"messages": [{"role": "user", "content": text}], "max_tokens": max_tokens}
    else:
        path = "/v1/completions"
        body = {"prompt": text, "max_tokens": max_tokens}
    body["stream"] = stream
    body["temperature"] = rng.choice([0, 0.8])
    conn = http.client.HTTPConnection(host, port, timeout=args.timeout)
    t_sent = time.time()
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        if disconnect and not stream:
            time.sleep(rng.uniform(0, 0.05))
            conn.sock.close()  # leave before the answer
            stats.add("disconnected")
            return
        resp = conn.getresponse()
        if resp.status == 503:
            raw = resp.read()
            try:
                j = json.loads(raw)
            except ValueError:
                j = {}
            if is_fault(j):
                stats.add("503_device_fault")
                after_fault(host, port, stats)
            elif "busy" in raw.decode(errors="replace"):
                stats.add("503_queue_full")
            else:
                stats.add("server_error", f"{kind}: 503 that is neither a fault nor a full queue: {raw[:300]!r}")
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
                if is_fault(j):
                    stats.add("503_device_fault")
                    after_fault(host, port, stats)
                else:
                    stats.add("server_error", f"{kind}: error event {j}")
                return
            if n == 0:
                with stats.lock:
                    stats.ttft.append(time.time() - t_sent)
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
    ap.add_argument("--long-prompt", type=float, default=0.15, help="probability a prompt is long")
    ap.add_argument("--long-words", type=int, default=200, help="words of a long prompt at most")
    ap.add_argument("--malformed", type=float, default=0.05, help="probability a request is malformed")
    ap.add_argument("--fault", default="", help="ROCKY_FAULT of the server it starts (e.g. lost%%300,alloc%%4,disk%%3)")
    ap.add_argument("--cache-dir", help="--cache-dir of the server it starts (the disk tier: disk faults)")
    ap.add_argument("--cache-block", type=int, default=16)
    ap.add_argument("--clear-cache-dir", action="store_true", help="empty --cache-dir first (a test's scratch)")
    ap.add_argument("--check", action="store_true", help="assert the soak's criteria (see above)")
    ap.add_argument("--min-requests", type=int, default=200)
    ap.add_argument("--min-faults", type=int, default=3, help="each fault kind of --fault at least")
    ap.add_argument("--max-rss-drift", type=float, default=0.05)
    ap.add_argument("--warmup", type=float, default=0.25, help="share of the requests that is warm-up (RSS)")
    ap.add_argument("--long", action="store_true", help="the long soak: 10x the requests")
    ap.add_argument("--server-arg", action="append", default=[], help="another argument of `rocky serve`")
    args = ap.parse_args()
    if args.long:
        args.requests *= 10

    proc = None
    if args.rocky:
        cmd = shlex.split(args.rocky) + ["serve", "-m", args.model, "--port", "0", "--device", args.device, "-np",
                                         str(args.np), "--kv-unified", "-c", str(args.ctx)] + args.server_arg
        if args.cache_dir and args.clear_cache_dir:
            shutil.rmtree(args.cache_dir, ignore_errors=True)
        if args.cache_dir:
            cmd += ["--cache-dir", args.cache_dir, "--cache-block", str(args.cache_block)]
        env = dict(os.environ)
        if args.fault:
            env["ROCKY_FAULT"] = args.fault
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
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

    died = []

    def watcher():  # the server process must never exit during the soak
        while not stop.is_set():
            if proc and proc.poll() is not None:
                died.append(proc.returncode)
                return
            time.sleep(0.2)

    threading.Thread(target=watcher, daemon=True).start()
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
    injected = {k: int(float(v)) for k, v in re.findall(r'^rocky:faults_injected_total\{kind="(\w+)"\} (\S+)$',
                                                       metrics, re.M)}
    if injected:
        print(f"  faults injected: {injected}; /health after a fault: {stats.health_after_fault[0]} checked, "
              f"{stats.health_after_fault[1]} not 200")
    p50, p99 = percentile(stats.ttft, 0.5), percentile(stats.ttft, 0.99)
    if p50 is not None:
        print(f"  TTFT of {len(stats.ttft)} streams: p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms")
    drift = None
    if rss:
        warm_at = [r for r in rss if r[2] >= int(total * args.warmup)] or rss
        drift = (rss[-1][1] - warm_at[0][1]) / warm_at[0][1]
        print(f"  RSS drift after warm-up ({args.warmup:.0%} of the requests): {drift:+.1%}")
    if died:
        print(f"  the server DIED during the soak (exit status {died[0]})")
    failed = []
    if args.check:
        if total < args.min_requests:
            failed.append(f"{total} requests, fewer than {args.min_requests}")
        for rule in filter(None, args.fault.split(",")):
            kind = re.split(r"[@%]", rule)[0]
            if kind == "kill":
                continue  # kills the server: test_fault_http, not the soak
            if injected.get(kind, 0) < args.min_faults:
                failed.append(f"fault {kind} injected {injected.get(kind, 0)} times, fewer than {args.min_faults}")
        if died:
            failed.append("the server died")
        if drift is not None and drift > args.max_rss_drift:
            failed.append(f"RSS drift {drift:+.1%} over {args.max_rss_drift:.0%}")
        elif drift is None and proc:
            failed.append("no RSS samples")
        for f in failed:
            print(f"  CHECK FAILED: {f}")
    if proc:
        proc.terminate()
        rc = proc.wait(timeout=30)
        print(f"  server exit status after SIGTERM: {rc}")
    summary = {"requests": total, "wall_s": wall, "req_per_s": total / wall, "counts": dict(stats.counts),
               "server_errors": server_errors, "healthy": healthy, "faults_injected": injected,
               "ttft_p50_s": p50, "ttft_p99_s": p99, "rss_drift": drift, "checks_failed": failed}
    if rss:
        summary.update(rss_start_mib=rss[0][1] / 1024, rss_warm_mib=warm[0][1] / 1024, rss_end_mib=rss[-1][1] / 1024,
                       rss_max_mib=max(r[1] for r in rss) / 1024)
    print(json.dumps(summary))  # the last line: what lab/run.py records
    sys.exit(0 if server_errors == 0 and healthy and not failed else 1)


if __name__ == "__main__":
    main()
