#!/usr/bin/env python3
"""Tables of lab results (lab/results/DEVICE/*.jsonl, written by lab/run.py; python3 stdlib only).

  python3 lab/table.py --current [--device D] [--experiment E]   the latest figures, per device
  python3 lab/table.py --compare A B [--device D] [--experiment E]
  python3 lab/table.py --perf > docs/PERF.md                   the current figures as docs/PERF.md

--compare, as llama.cpp's compare-llama-bench: A and B each select records — a .jsonl file, or
KEY=VALUE[,KEY=VALUE…] over every result (build_commit=abc123, variant=default, time=2026-12-06…,
a prefix of the value matches) — and bench rows that agree on everything else (device, experiment,
run, model, test, n_ubatch) are set side by side with B's speed over A's.
"""
import argparse
import glob
import json
import os
import sys

LAB = os.path.dirname(os.path.abspath(__file__))
KEY = ("device", "experiment", "run", "variant", "model", "test", "n_ubatch")


def load(results, device=None, experiment=None):
    recs = []
    for path in sorted(glob.glob(os.path.join(results, "*", "*.jsonl"))):
        dev = os.path.basename(os.path.dirname(path))
        if device and dev != device:
            continue
        for n, line in enumerate(open(path), 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except ValueError as e:
                sys.exit(f"{path}:{n}: not JSON ({e})")
            if experiment and r.get("experiment") != experiment:
                continue
            r.setdefault("device", dev)
            recs.append(r)
    return recs


def latest(recs):
    """The newest record of each key (bench rows by KEY, others by device/experiment/run/variant)."""
    out = {}
    for r in recs:
        k = tuple(r.get(f) for f in KEY) if r.get("kind") == "bench" else (
            r.get("device"), r.get("experiment"), r.get("run"), r.get("variant"), r.get("kind"))
        if k not in out or r.get("time", "") >= out[k].get("time", ""):
            out[k] = r
    return list(out.values())


def fmt_ts(r):
    return f"{r['avg_ts']:.1f} ± {r['stddev_ts']:.1f}"


def bench_table(rows):
    lines = ["| experiment / run | variant | test | ub | t/s | % roof | build | driver | overrides | date |",
             "| --- | --- | --- | ---: | ---: | ---: | --- | --- | --- | --- |"]
    for r in sorted(rows, key=lambda r: (r["experiment"], r["run"], r.get("variant", ""), r["test"])):
        ov = ", ".join(f"{k}={v}" for k, v in (r.get("overrides") or {}).items()) or "—"
        roof = f"{r['roof_pct']:.0f}" if r.get("roof_kind") else ""
        mark = " †" if r.get("source") else ""
        lines.append(f"| {r['experiment']} / {r['run']} | {r.get('variant') or '—'} | {r['test']} | {r['n_ubatch']} | "
                     f"{fmt_ts(r)} | {roof} | {r.get('build_commit', '?')}{mark} | {r.get('driver', '?')} | {ov} | "
                     f"{r.get('time', '?')[:10]} |")
    sources = sorted({r["source"] for r in rows if r.get("source")})
    if sources:
        lines += [""] + [f"† measured before results were recorded as data: {s}" for s in sources]
    return lines


def other_table(recs):
    lines = []
    for r in sorted(recs, key=lambda r: (r["experiment"], r["run"], r.get("variant", ""))):
        res = r.get("result", r.get("error"))
        if r["kind"] == "roofline" and isinstance(res, dict):
            text = ", ".join(f"{k} {v:.1f}" for k, v in res.items() if isinstance(v, (int, float)))
        elif isinstance(res, dict):
            text = ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in res.items()
                             if not isinstance(v, (list, dict)))
            # lab/grammar_cost.py: each schema's decode cost per token and the grammar's own time.
            for name, sc in (res.get("schemas") or {}).items():
                if isinstance(sc, dict) and "cost" in sc:
                    text += (f"; {name} {100 * sc['cost']:+.1f} % per token (grammar "
                             f"{sc.get('grammar_ms_per_token', 0):.3f} ms, {sc.get('tokens_median', 0):g} tokens)")
        else:
            text = str(res)
        lines.append(f"- {r['experiment']} / {r['run']}{' / ' + r['variant'] if r.get('variant') else ''} "
                     f"({r['kind']}, {r.get('time', '?')[:10]}{', build ' + r['build_commit'] if r.get('build_commit') else ''}"
                     f"{'; †' if r.get('source') else ''}): {text}")
    sources = sorted({r["source"] for r in recs if r.get("source")})
    lines += [f"  † {s}" for s in sources]
    return lines


def current(recs):
    out = []
    for dev in sorted({r["device"] for r in recs}):
        mine = latest([r for r in recs if r["device"] == dev])
        bench = [r for r in mine if r.get("kind") == "bench"]
        rest = [r for r in mine if r.get("kind") != "bench"]
        out += [f"### {dev}", ""]
        if bench:
            names = sorted({r.get("model", "?") for r in bench})
            out += [f"Model{'s' if len(names) > 1 else ''}: " + "; ".join(names) + ".", ""] + bench_table(bench) + [""]
        if rest:
            out += other_table(rest) + [""]
    return out


def select(recs, sel):
    if sel.endswith(".jsonl"):
        return [json.loads(line) for line in open(sel) if line.strip()]
    want = {}
    for part in sel.split(","):
        if "=" not in part:
            sys.exit(f"--compare: '{sel}' is neither a .jsonl file nor KEY=VALUE[,KEY=VALUE…]")
        k, v = part.split("=", 1)
        want[k] = v
    return [r for r in recs if all(str(r.get(k, "")).startswith(v) for k, v in want.items())]


def compare(recs, a, b):
    ra = latest([r for r in select(recs, a) if r.get("kind") == "bench"])
    rb = latest([r for r in select(recs, b) if r.get("kind") == "bench"])
    # Fields that name A and B apart leave the key; an experiment or run leaves it only when A's and
    # B's have none in common (B may hold more runs than A: those rows then have no partner).
    differ = {k for k in ("build_commit", "variant", "time", "device")
              if {r.get(k) for r in ra} != {r.get(k) for r in rb}}
    differ |= {k for k in ("experiment", "run") if not {r.get(k) for r in ra} & {r.get(k) for r in rb}}
    key = lambda r: tuple(r.get(f) for f in KEY if f not in differ)  # noqa: E731
    by_b = {key(r): r for r in rb}
    lines = [f"A: {a} ({len(ra)} rows) — B: {b} ({len(rb)} rows)", "",
             "| device | experiment / run | test | ub | A t/s | B t/s | B/A |", "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    n = 0
    for r in sorted(ra, key=lambda r: tuple(str(x) for x in key(r))):
        o = by_b.get(key(r))
        if not o:
            continue
        n += 1
        ratio = f"{o['avg_ts'] / r['avg_ts']:.3f}" if r["avg_ts"] else "—"
        lines.append(f"| {r['device']} | {r['experiment']} / {r['run']} | {r['test']} | {r['n_ubatch']} | {fmt_ts(r)} | "
                     f"{fmt_ts(o)} | {ratio} |")
    if n == 0:
        lines.append("(no bench rows of A and B agree on device, model, test and ubatch)")
    return lines


PERF_HEAD = """# rocky performance figures

The current figures per device, generated from lab/results/DEVICE/*.jsonl by
`python3 lab/table.py --perf > docs/PERF.md` (do not edit by hand: run an experiment, then
regenerate). How the figures came about, dated: docs/perf-log/; kernel tuning: docs/tuning-log.md.

Reproduce a device's figures (from the repository root, on the device, after packing a Release build
with `../shared/device/pack.sh .devpack build/rocky`):

    python3 lab/run.py lab/experiments/main-rows.json      # pp512 / tg128, -npl 1,4, profiles, roofline
    python3 lab/run.py lab/experiments/serve-ttft.json     # a warm server's TTFT and token gap
    python3 lab/run.py lab/experiments/prefix-cache.json   # the prefix cache's tiers
    python3 lab/table.py --current --device DEVICE         # these tables
    python3 lab/table.py --compare build_commit=OLD build_commit=NEW   # an A/B

Columns: t/s ± the standard deviation over the repetitions; % roof: of the roofline peak the row
is bound by (int8 dot / fp32 for prefill, copy bandwidth for decode) when measured; build: the git
commit (`-dirty`: with uncommitted changes); overrides: the ROCKY_* variables that were set.

Devices without lab results yet: the Mali-G610 (modeled offline with its Mesa compiler; see
docs/perf-log/ and `rocky tune --offline mali-g610`) and lavapipe (the CI machine: correctness,
not speed).
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--current", action="store_true")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"))
    ap.add_argument("--perf", action="store_true")
    ap.add_argument("--device")
    ap.add_argument("--experiment")
    ap.add_argument("--results", default=os.path.join(LAB, "results"))
    a = ap.parse_args()
    if sum(bool(x) for x in (a.current, a.compare, a.perf)) != 1:
        ap.error("one of --current, --compare A B, --perf")
    recs = load(a.results, a.device, a.experiment)
    if a.compare:
        print("\n".join(compare(recs, *a.compare)))
    elif a.current:
        print("\n".join(current(recs)) if recs else f"no results under {a.results}")
    else:
        print(PERF_HEAD + "\n## Current figures\n\n" + "\n".join(current(recs) or ["(no results yet)"]).rstrip())
        # Figures of commands the driver does not run (e.g. `rocky bench-grammar`, a host-side
        # benchmark): Markdown sections kept beside the results, appended as they are.
        sec = os.path.join(a.results, "sections")
        for name in sorted(os.listdir(sec)) if os.path.isdir(sec) else []:
            if name.endswith(".md"):
                print("\n" + open(os.path.join(sec, name)).read().rstrip())


if __name__ == "__main__":
    main()
