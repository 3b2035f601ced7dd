#!/usr/bin/env python3
"""Summary of lab/h200-decode-n4b.sh's files: python3 lab/h200-decode-n4b-summary.py OUT_DIR."""
import json
import os
import sys

o = sys.argv[1]
copy = json.load(open(os.path.join(o, "roofline.json")))["copy_gbs"]
for line in open(os.path.join(o, "ops.jsonl")):
    j = json.loads(line)
    print(f"{j['name']:18} {j['type']:5} {j['M']:6}x{j['K']:5} {j['matvec_ms']*1e3:7.1f} us (med {j['matvec_median_ms']*1e3:6.1f})"
          f" {j['gbs']:5.0f} GB/s = {100*j['gbs']/copy:5.1f} % copy; gguf {j['gbs_gguf']:5.0f}; {j['shape']}")
for name in ("bench.json", "bench-u2.json"):
    try:
        for row in json.load(open(os.path.join(o, name))):
            h = row.get("host_ms_per_ubatch", {})
            print(f"{name:14} {row['test']:6} {row['avg_ts']:8.1f} ± {row['stddev_ts']:.1f} t/s"
                  f" {row.get('bytes_per_token', 0)/1e6:.0f} MB/token {row.get('gbs', 0):.0f} GB/s"
                  f" {row.get('roof_pct', 0):.1f} % {row.get('roof_kind', '')} peak {row.get('peak_device_memory', 0)/2**20:.0f} MiB"
                  f" record {h.get('record', 0):.3f} submit_wait {h.get('submit_wait', 0):.3f} disp {h.get('dispatches', 0):.0f}")
    except Exception as e:
        print(name, "failed", e)
try:
    for row in json.load(open(os.path.join(o, "profile.json"))):
        tot = sum(p["ms"] for p in row["profile"])
        print(f"-- {row['test']} profile total {tot:.3f} ms")
        for p in sorted(row["profile"], key=lambda p: -p["ms"]):
            print(f"   {p['op']:24} {p['ms']:7.4f} ms {p['dispatches']:3d}")
except Exception as e:
    print("profile failed", e)
