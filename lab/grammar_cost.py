#!/usr/bin/env python3
"""What a grammar costs a served decode step (python3 stdlib only).

  python3 lab/grammar_cost.py --url http://127.0.0.1:8080 [--reps 6] [--n 128]

For each schema below, --reps /completion requests constrained by it (`json_schema`, sampled at
temperature 0.8 with seeds 1 … reps) and as many unconstrained ones of the same length
(`ignore_eos`), interleaved. Per token: the server's predicted_per_token_ms with and without the
grammar, and the grammar's own share (timings.grammar_ms: mask + check, on the CPU). The decode
cost of structured output is (constrained − unconstrained) / unconstrained ms per token.
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
        con, free, gram, ntok = [], [], [], []
        for seed in range(1, a.reps + 1):
            base = {"prompt": prompt, "n_predict": a.n, "temperature": 0.8, "seed": seed, "cache_prompt": False}
            t = post(u.hostname, u.port, dict(base, json_schema=schema))["timings"]
            if t["predicted_n"] > 1:
                con.append(t["predicted_per_token_ms"])
                gram.append(t.get("grammar_ms", 0) / t["predicted_n"])
                ntok.append(t["predicted_n"])
            t = post(u.hostname, u.port, dict(base, ignore_eos=True, n_predict=max(ntok[-1] if ntok else a.n, 2)))["timings"]
            free.append(t["predicted_per_token_ms"])
        if not con:
            raise SystemExit(f"{name}: every constrained answer had ≤ 1 token")
        c, f = statistics.median(con), statistics.median(free)
        out["schemas"][name] = {"constrained_ms_per_token": c, "free_ms_per_token": f,
                                "grammar_ms_per_token": statistics.median(gram), "cost": (c - f) / f,
                                "tokens_median": statistics.median(ntok)}
        print(f"{name}: {c:.3f} ms/token constrained against {f:.3f} free ({100 * (c - f) / f:+.1f} %), "
              f"grammar {statistics.median(gram):.3f} ms/token, {statistics.median(ntok):.0f} tokens (median)")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
