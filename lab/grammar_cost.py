#!/usr/bin/env python3
"""What a grammar costs a served decode step (python3 stdlib only).

  python3 lab/grammar_cost.py --url http://127.0.0.1:8080 [--reps 6] [--n 128]

For each schema below, --reps /completion requests constrained by it (`json_schema`, sampled at
temperature 0.8 with seeds 1 … reps) and as many unconstrained ones doing the same work (`ignore_eos`),
interleaved. A constrained answer that ends on end-of-generation evaluates its last token to sample
that end; an unconstrained one cut at n_predict does not evaluate its last token. So the unconstrained
twin samples one token more (n + 1) where the constrained one stopped on end-of-generation: both then
evaluate n tokens after the prompt (comparing n evaluations with n − 1 would count a whole decode
step as the grammar's cost: +10 % for a 10-token answer). Per request: decode ms (timings.predicted_ms)
with and without the grammar, the grammar's own time (timings.grammar_ms: mask + check, on the CPU)
and the host's time in the decode loop outside the model's evaluations (predicted_ms −
predicted_eval_ms). The decode cost of structured output is (constrained − unconstrained) /
unconstrained decode ms, medians over the reps.
"""
import argparse
import http.client
import json
import statistics
import urllib.parse

SCHEMAS = {
    "tool-call": {"type": "object", "properties": {
        "name": {"type": "string", "enum": ["read_file", "write_file", "run_shell"]},
        "arguments": {"type": "object", "properties": {
            "path": {"type": "string", "maxLength": 80}, "content": {"type": "string"}},
            "required": ["path"]}}, "required": ["name", "arguments"]},
    "string-list": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 24}, "maxItems": 40},
    "record": {"type": "object", "properties": {
        "id": {"type": "integer", "minimum": 0}, "score": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "when": {"type": "string", "format": "date-time"}}, "required": ["id", "score", "tags", "when"]},
}


def post(host, port, body):
    c = http.client.HTTPConnection(host, port, timeout=600)
    c.request("POST", "/completion", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    if r.status != 200:
        raise SystemExit(f"/completion: HTTP {r.status}: {data[:300]!r}")
    return json.loads(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--n", type=int, default=128, help="tokens to predict (default 128)")
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    prompt = "Answer with JSON only. The files in the repository are src/main.cpp, src/util.cpp and README.md.\n"
    out = {"n_predict": a.n, "reps": a.reps, "schemas": {}}
    for name, schema in SCHEMAS.items():
        con, free, gram, ntok, host_c, host_f = [], [], [], [], [], []
        for seed in range(1, a.reps + 1):
            base = {"prompt": prompt, "n_predict": a.n, "temperature": 0.8, "seed": seed, "cache_prompt": False}
            b = post(u.hostname, u.port, dict(base, json_schema=schema))
            t = b["timings"]
            if t["predicted_n"] < 2:
                continue
            n = t["predicted_n"]
            # The same evaluations: n + 1 sampled where the constrained answer sampled its end too.
            n_free = n + 1 if b.get("stop_type") == "eos" else n
            f = post(u.hostname, u.port, dict(base, ignore_eos=True, n_predict=n_free))["timings"]
            con.append(t["predicted_ms"])
            gram.append(t.get("grammar_ms", 0) / n)
            ntok.append(n)
            host_c.append(t["predicted_ms"] - t.get("predicted_eval_ms", 0))
            free.append(f["predicted_ms"])
            host_f.append(f["predicted_ms"] - f.get("predicted_eval_ms", 0))
        if not con:
            raise SystemExit(f"{name}: every constrained answer had ≤ 1 token")
        c, f = statistics.median(con), statistics.median(free)
        hc, hf = statistics.median(host_c), statistics.median(host_f)
        out["schemas"][name] = {"constrained_ms": c, "free_ms": f, "grammar_ms_per_token": statistics.median(gram),
                                "cost": (c - f) / f, "tokens_median": statistics.median(ntok),
                                "host_ms_constrained": hc, "host_ms_free": hf}
        print(f"{name}: decode {c:.2f} ms constrained against {f:.2f} free ({100 * (c - f) / f:+.1f} %), "
              f"grammar {statistics.median(gram):.3f} ms/token, {statistics.median(ntok):.0f} tokens (median); "
              f"host time outside the evaluations {hc:.2f} ms against {hf:.2f} ms a request")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
