#!/usr/bin/env python3
"""What affinity costs when the cluster changes: the share of conversations that move to another node
when a node is added or removed, under the shipped deploy/haproxy/rocky.cfg (python3 stdlib + haproxy).

  python3 lab/affinity.py [--conversations 2000] [--nodes 3]

Stand-in nodes (threads here answering /health 200 and naming themselves) take the place of
`rocky serve`, so only the balancer's hash is measured. The shipped config's server lines are
copied for N and N + 1 nodes; each conversation sends one request with its `X-Session-Id` (and one
by its first two messages only) and the X-Served-By header says where it landed.
"""
import argparse
import http.client
import http.server
import json
import os
import re
import socket
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def reply(self):
        body = b'{"status":"ok"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.reply()

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.reply()


class Quiet(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):  # the balancer's checks close sockets early
        pass


def config(n):
    """The shipped config with n server lines in the main backend (node1 … nodeN)."""
    text = open(os.path.join(ROOT, "deploy/haproxy/rocky.cfg")).read()
    lines = [f'    server node{i} "${{ROCKY_NODE{i}}}" check' for i in range(1, n + 1)]
    text = re.sub(r'(    server node1 "\$\{ROCKY_NODE1\}" check\n)(    server node\d "\$\{ROCKY_NODE\d\}" check\n)*',
                  "\n".join(lines) + "\n", text, count=1)
    return text


def route(n, ports, keys, by_body):
    env = dict(os.environ)
    lb = free_port()
    env.update({"ROCKY_LB_BIND": f"127.0.0.1:{lb}", "ROCKY_STATS_BIND": f"127.0.0.1:{free_port()}"})
    for i in range(1, max(n, 3) + 1):
        env[f"ROCKY_NODE{i}"] = f"127.0.0.1:{ports[i - 1]}"
    with tempfile.NamedTemporaryFile("w", suffix=".cfg", delete=False) as f:
        f.write(config(n))
    p = subprocess.Popen(["haproxy", "-db", "-f", f.name], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(1.5)  # health checks
        out = {}
        for k in keys:
            c = http.client.HTTPConnection("127.0.0.1", lb, timeout=10)
            if by_body:
                body = {"messages": [{"role": "system", "content": "You are a coding agent."},
                                     {"role": "user", "content": f"Task {k}: fix the build."}]}
                c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
            else:
                c.request("POST", "/v1/chat/completions", "{}", {"X-Session-Id": f"conv-{k}"})
            r = c.getresponse()
            r.read()
            out[k] = r.getheader("X-Served-By")
        return out
    finally:
        p.terminate()
        p.wait()
        os.unlink(f.name)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conversations", type=int, default=2000)
    ap.add_argument("--nodes", type=int, default=3)
    a = ap.parse_args()
    n = a.nodes
    servers = [Quiet(("127.0.0.1", 0), Node) for _ in range(n + 1)]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    ports = [s.server_address[1] for s in servers]
    keys = list(range(a.conversations))
    result = {"conversations": a.conversations, "nodes": n}
    for by_body in (False, True):
        before = route(n, ports, keys, by_body)
        after = route(n + 1, ports, keys, by_body)
        moved = sum(before[k] != after[k] for k in keys)
        spread = {s: list(before.values()).count(s) for s in sorted(set(before.values()))}
        name = "body" if by_body else "header"
        result[name] = {"moved_on_add": moved / len(keys), "ideal": 1 / (n + 1), "spread": spread}
        print(f"key from the {name}: {n} → {n + 1} nodes moves {100 * moved / len(keys):.1f} % of "
              f"{len(keys)} conversations (ideal {100 / (n + 1):.1f} %); spread over {n}: {spread}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
