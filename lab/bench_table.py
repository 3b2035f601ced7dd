#!/usr/bin/env python3
"""Prints `rocky bench -o json` files of one lab call as a markdown table (python3 stdlib only).

  python3 lab/bench_table.py DIR NAME… [--ms] [--prof NAME…]

NAME: DIR/NAME.json (a missing or broken file is named and skipped). Rows: run, test, t/s ± sd
(--ms: and ms per test, n_prompt / t/s, for pp rows). --prof NAME…: each file's GPU time per op
(`bench --profile`), the largest first.
"""
import json
import os
import sys


def load(d, name):
    try:
        return json.load(open(os.path.join(d, name + ".json")))
    except Exception as e:  # noqa: BLE001 - a lab script prints what it could not read and goes on
        print(f"{name}.json: {e}")
        return []


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    d, names, prof, ms = args[0], [], [], False
    dest = names
    for a in args[1:]:
        if a == "--ms":
            ms = True
        elif a == "--prof":
            dest = prof
        else:
            dest.append(a)
    print("| run | test | t/s |" + (" ms |" if ms else ""))
    print("| --- | --- | ---: |" + (" ---: |" if ms else ""))
    for n in names:
        for r in load(d, n):
            row = f"| {n} | {r['test']} | {r['avg_ts']:.1f} ± {r.get('stddev_ts', 0):.1f} |"
            if ms:
                row += f" {1000 * r['n_prompt'] / r['avg_ts']:.2f} |" if r.get("n_prompt") else " |"
            print(row)
    for n in prof:
        for r in load(d, n):
            ps = r.get("profile") or []
            if ps:
                tot = sum(p["ms"] for p in ps)
                top = sorted(ps, key=lambda p: -p["ms"])[:12]
                print(f"\n{n} {r['test']}: GPU {tot:.3f} ms: " + ", ".join(f"{p['op']} {p['ms']:.3f}/{p['dispatches']}" for p in top))


if __name__ == "__main__":
    main()
