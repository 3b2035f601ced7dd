#!/usr/bin/env python3
"""Summary of lab/h200-decode-n4.sh's files: python3 lab/h200-decode-n4-summary.py OUT_DIR."""
import glob
import json
import os
import sys

o = sys.argv[1]
r = json.load(open(os.path.join(o, "roofline.json")))
copy = r["copy_gbs"]
print(f"roofline fp32 {r['fp32_tflops']:.1f} int8 {r['int8_dot_tops']:.1f} copy {copy:.0f} GB/s")
for f in sorted(glob.glob(os.path.join(o, "op-*.json"))):
    try:
        j = json.load(open(f))
        print(f"{os.path.basename(f)[3:-5]:20} {j['type']:5} {j['M']:6}x{j['K']:5} {j['matvec_ms']*1e3:8.1f} us"
              f" (med {j['matvec_median_ms']*1e3:7.1f}) {j['gbs']:6.0f} GB/s = {100*j['gbs']/copy:5.1f} % copy;"
              f" gguf {j['gbs_gguf']:5.0f} GB/s; nmse {j['nmse_sampled']:.0e}; {j['shape']}")
    except Exception as e:
        print(os.path.basename(f), "failed", e, open(f[:-5] + ".err").read()[-300:])
for name in ("bench.json", "bench-nofuse.json"):
    try:
        for row in json.load(open(os.path.join(o, name))):
            print(f"{name:18} {row['test']:8} {row['avg_ts']:9.1f} ± {row['stddev_ts']:.1f} t/s"
                  f"  bytes/token {row.get('bytes_per_token', 0)/1e6:.0f} MB {row.get('gbs', 0):.0f} GB/s"
                  f" {row.get('roof_pct', 0):.1f} % {row.get('roof_kind', '')}"
                  f"  peak {row.get('peak_device_memory', 0)/2**20:.0f} MiB  host {json.dumps(row.get('host_ms_per_ubatch', {}))}")
    except Exception as e:
        print(name, "failed", e, open(os.path.join(o, name[:-5] + ".err")).read()[-500:])
try:
    for row in json.load(open(os.path.join(o, "profile.json"))):
        tot = sum(p["ms"] for p in row["profile"])
        print(f"-- {row['test']} profile total {tot:.3f} ms")
        for p in sorted(row["profile"], key=lambda p: -p["ms"])[:26]:
            print(f"   {p['op']:28} {p['ms']:8.4f} ms  {p['dispatches']:4d} disp")
except Exception as e:
    print("profile failed", e)
