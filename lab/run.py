#!/usr/bin/env python3
"""Runs a lab experiment (lab/experiments/NAME.json) and appends its results to
lab/results/DEVICE/NAME.jsonl (python3 standard library and bash only: it runs on the device).

  python3 lab/run.py lab/experiments/main-rows.json [--rocky '.devpack/run rocky'] [--device NAME]
      [--only RUN ...] [--variant NAME ...] [--results DIR] [--dry-run]

An experiment is data:
  {"description": "...",
   "model": {"path": "/tmp/q3b.gguf", "synth": ["--preset", "qwen2.5-3b", "--type", "q4_k_m"]},
   "env": {"NAME": "VALUE"},                  # for every run (e.g. a ROCKY_* override)
   "variants": [{"name": "base", "env": {}}, {"name": "x", "env": {...}}],   # optional
   "runs": [
     {"name": "pp512", "bench": ["-p", "512", "-n", "128", "-r", "2"]},      # rocky bench -o json
     {"name": "peaks", "roofline": ["--reps", "3"]},                         # rocky roofline --json
     {"name": "ttft", "serve": ["-ub", "512", "-c", "4096"],                 # a server, then a client
      "client": ["lab/ttft.py", "--url", "{url}", "--prompt-tokens", "512"]},
     {"name": "soak", "client": ["lab/soak.py", "--rocky", "{rocky}", "--model", "{model}"]},
     {"name": "stats", "bench": [...], "env": {...}, "stderr_grep": "^pipeline"}]}
Each run runs once per variant (once when there are none) with env = experiment env + variant env +
run env. A bench run records every row of `rocky bench -o json` (which carries build_commit,
driver, tune_profile and overrides); a roofline run its JSON; a client run the JSON object its last
output line holds (lab/ttft.py, lab/soak.py, lab/prefix_cache.py print one). Placeholders in
arguments: {rocky} {model} {url} {out}. Each record gets: experiment, run, variant, env, device,
time (UTC). A run that fails is recorded with "error" and the driver goes on.

DEVICE: --device, else the GPU named in the first bench row's backend ("vulkan:0 (NVIDIA H200)" →
nvidia-h200), else the first `rocky devices` GPU, else "unknown".
"""
import argparse
import datetime
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.request

LAB = os.path.dirname(os.path.abspath(__file__))


def slug(name):
    s = re.sub(r"\(.*?\)", "", name).strip().lower()
    s = re.sub(r"^(nvidia|amd|intel)\s+(geforce\s+|radeon\s+)?", lambda m: m.group(1) + " ", s)
    s = re.sub(r"[^a-z0-9]+", "-", s).strip("-")
    return s or "unknown"


def device_from_rows(rows):
    for r in rows:
        m = re.search(r"\((.+)\)\s*$", r.get("backend", ""))
        if m:
            return slug(m.group(1))
        if r.get("backend", "").startswith("cpu"):
            return "cpu"
    return None


def fill(args, ctx):
    return [a.format(**ctx) if isinstance(a, str) else str(a) for a in args]


def run_cmd(cmd, env, timeout, dry):
    print("$ " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + (" " if env else "")
          + " ".join(shlex.quote(c) for c in cmd), flush=True)
    if dry:
        return 0, "", ""
    full = dict(os.environ)
    full.update(env)
    try:
        p = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        return 124, e.stdout or "", (e.stderr or "") + f"\n(timed out after {timeout} s)"


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{") or line.startswith("["):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


class Server:
    """`rocky serve -m MODEL --port 0 ARGS` until /health says ok; stop() sends SIGTERM."""

    def __init__(self, rocky, model, args, env, timeout):
        full = dict(os.environ)
        full.update(env)
        cmd = rocky + ["serve", "-m", model, "--port", "0"] + args
        print("$ " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + (" " if env else "")
              + " ".join(shlex.quote(c) for c in cmd) + " &", flush=True)
        self.p = subprocess.Popen(cmd, env=full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log, self.url = [], None
        ready = threading.Event()

        def pump():
            for line in self.p.stderr:
                self.log.append(line)
                m = re.search(r"listening on (http://\S+)", line)
                if m:
                    self.url = m.group(1)
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        ready.wait(timeout)
        if not self.url:
            self.stop()
            raise RuntimeError("the server did not start: " + "".join(self.log[-5:]))
        t0 = time.time()
        while time.time() - t0 < timeout:
            try:
                if json.load(urllib.request.urlopen(self.url + "/health", timeout=5)).get("status") == "ok":
                    return
            except Exception:  # noqa: BLE001 - 503 while loading; retried
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("the server did not become healthy: " + "".join(self.log[-5:]))

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(120)
            except subprocess.TimeoutExpired:
                self.p.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("experiment")
    ap.add_argument("--rocky", default=".devpack/run rocky", help="the command that runs rocky")
    ap.add_argument("--device", help="results folder name (default: from the bench rows)")
    ap.add_argument("--only", nargs="+", help="only these runs")
    ap.add_argument("--variant", nargs="+", help="only these variants")
    ap.add_argument("--results", default=os.path.join(LAB, "results"))
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/out"), help="scratch folder ({out})")
    ap.add_argument("--dry-run", action="store_true", help="print the commands only")
    a = ap.parse_args()

    try:
        exp = json.load(open(a.experiment))
    except (OSError, ValueError) as e:
        sys.exit(f"{a.experiment}: {e}")
    name = os.path.splitext(os.path.basename(a.experiment))[0]
    known = {"description", "model", "env", "variants", "runs"}
    if not isinstance(exp, dict) or set(exp) - known or not isinstance(exp.get("runs"), list):
        sys.exit(f"{a.experiment}: want an object with 'runs' (a list) and only {sorted(known)}; "
                 f"got keys {sorted(exp) if isinstance(exp, dict) else type(exp).__name__}")
    rocky = shlex.split(a.rocky)
    os.makedirs(a.out, exist_ok=True)
    model = exp.get("model", {}).get("path", "")
    synth = exp.get("model", {}).get("synth")
    if model and synth and not os.path.exists(model) and not a.dry_run:
        rc, _, err = run_cmd(rocky + ["synth"] + synth + ["-q", "-o", model], {}, 600, False)
        if rc != 0:
            sys.exit(f"synth {model} failed: {err.strip()[-500:]}")
    variants = exp.get("variants") or [{"name": "", "env": {}}]
    if a.variant:
        variants = [v for v in variants if v["name"] in a.variant]
    runs = [r for r in exp["runs"] if not a.only or r["name"] in a.only]
    records, device = [], a.device
    for v in variants:
        for r in runs:
            env = {**exp.get("env", {}), **v.get("env", {}), **r.get("env", {})}
            env = {k: str(x) for k, x in env.items()}
            ctx = {"rocky": " ".join(shlex.quote(c) for c in rocky), "model": model, "out": a.out, "url": ""}
            timeout = r.get("timeout_s", 600)
            base = {"experiment": name, "run": r["name"], "variant": v["name"], "env": env}
            print(f"== {name} / {r['name']}" + (f" / {v['name']}" if v["name"] else ""), flush=True)
            try:
                if "bench" in r:
                    rc, out, err = run_cmd(rocky + ["bench", "-m", model] + fill(r["bench"], ctx) + ["-o", "json"],
                                           env, timeout, a.dry_run)
                    if a.dry_run:
                        continue
                    rows = json.loads(out) if rc == 0 else None
                    if rows is None:
                        raise RuntimeError(f"bench exit {rc}: {err.strip()[-500:]}")
                    device = device or device_from_rows(rows)
                    extra = {}
                    if "stderr_grep" in r:
                        extra["stderr"] = [ln for ln in err.splitlines() if re.search(r["stderr_grep"], ln)]
                    records += [{**base, "kind": "bench", **extra, **row} for row in rows]
                    for row in rows:
                        print(f"   {row['test']:>22} {row['avg_ts']:10.1f} ± {row['stddev_ts']:.1f} t/s")
                elif "roofline" in r:
                    rc, out, err = run_cmd(rocky + ["roofline", "--json"] + fill(r["roofline"], ctx), env, timeout,
                                           a.dry_run)
                    if a.dry_run:
                        continue
                    if rc != 0:
                        raise RuntimeError(f"roofline exit {rc}: {err.strip()[-500:]}")
                    records.append({**base, "kind": "roofline", "result": json.loads(out)})
                elif "client" in r:
                    srv = None
                    if "serve" in r and not a.dry_run:
                        srv = Server(rocky, model, fill(r["serve"], ctx), env, timeout)
                        ctx["url"] = srv.url
                    elif "serve" in r:
                        print("$ rocky serve -m MODEL --port 0 " + " ".join(r["serve"]))
                    try:
                        cmd = fill(r["client"], ctx)
                        if cmd[0].endswith(".py"):
                            cmd = [sys.executable, cmd[0] if os.path.isabs(cmd[0]) else
                                   os.path.join(os.path.dirname(LAB), cmd[0])] + cmd[1:]
                        rc, out, err = run_cmd(cmd, env, timeout, a.dry_run)
                    finally:
                        if srv:
                            srv.stop()
                    if a.dry_run:
                        continue
                    print("\n".join("   " + ln for ln in out.strip().splitlines()[:-1][-20:]))
                    res = last_json(out)
                    if res is None:
                        raise RuntimeError(f"client exit {rc}, no JSON line: {(out + err).strip()[-500:]}")
                    records.append({**base, "kind": "client", "exit": rc, "result": res})
                else:
                    raise RuntimeError("a run needs one of 'bench', 'roofline' or 'client'")
            except (RuntimeError, ValueError, OSError) as e:
                print(f"   error: {e}", flush=True)
                records.append({**base, "kind": "error", "error": str(e)})
    if a.dry_run:
        return
    if not device:
        rc, out, _ = run_cmd(rocky + ["devices"], {}, 60, False)
        gpus = re.findall(r"^vulkan:\d+\s+(.+)\n(?:  .*\n)*?  type\s+(?:discrete|integrated|virtual) GPU", out, re.M)
        device = slug(gpus[0]) if rc == 0 and gpus else "unknown"
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    folder = os.path.join(a.results, device)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name + ".jsonl")
    with open(path, "a") as f:
        for rec in records:
            f.write(json.dumps({**rec, "device": device, "time": stamp}) + "\n")
    print(f"{len(records)} records → {path}")
    sys.exit(1 if any(r["kind"] == "error" for r in records) else 0)


if __name__ == "__main__":
    main()
