"""A live `rocky serve` for the python server tests (standard library only).

Server(argv) starts the command (its stderr kept in .log), learns the URL from the
"listening on http://…" line (the tests pass --port 0), and returns once /health answers
{"status": "ok"}; it raises with the server's log when the process exits or never gets there.
request() answers (status, body) for any status — JSON bodies parsed, others as text; ok()
asserts 200; stop() sends SIGTERM and asserts exit 0; kill() ends it at once. Each test file
subclasses it with the flags it always passes and the calls it makes most.
"""
import json
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request


class Server:
    def __init__(self, argv, env=None, start_s=120, ready_s=60, timeout_s=300):
        self.timeout_s = timeout_s
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        self.log = []
        self.url = None
        got = threading.Event()

        def pump():
            for line in self.proc.stderr:
                self.log.append(line)
                m = re.search(r"listening on (http://\S+)", line)
                if m:
                    self.url = m.group(1)
                    got.set()
            got.set()

        threading.Thread(target=pump, daemon=True).start()
        if not got.wait(start_s) or not self.url:
            self.kill()
            raise RuntimeError("server did not start:\n" + self.log_text())
        t_end = time.time() + ready_s
        while time.time() < t_end:
            if self.health() == (200, "ok"):
                return
            if self.proc.poll() is not None:
                raise RuntimeError("server exited:\n" + self.log_text())
            time.sleep(0.1)
        self.kill()
        raise RuntimeError("server never became ready:\n" + self.log_text())

    def log_text(self):
        return "".join(self.log)

    def health(self):
        """(HTTP status, the body's "status"), (0, None) when nothing answers."""
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=30) as r:
                return r.status, json.loads(r.read()).get("status")
        except urllib.error.HTTPError as e:
            try:
                return e.code, json.loads(e.read()).get("status")
            except (json.JSONDecodeError, AttributeError):
                return e.code, None
        except (urllib.error.URLError, ConnectionError, json.JSONDecodeError, TimeoutError):
            return 0, None

    def request(self, method, path, body=None, headers=None):
        """(status, body) for any status: JSON parsed, other bodies as text."""
        data = json.dumps(body).encode() if body is not None else None
        h = {"Content-Type": "application/json", **(headers or {})}
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                status, text = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode()
        return status, (json.loads(text) if text[:1] in "{[" else text)

    def ok(self, method, path, body=None, headers=None):
        status, j = self.request(method, path, body, headers)
        assert status == 200, f"{method} {path}: HTTP {status}: {j}"
        return j

    def stop(self, timeout_s=60):
        """SIGTERM; asserts exit status 0. Returns the server's log."""
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout_s)
        assert rc == 0, f"exit {rc}:\n" + self.log_text()
        return self.log_text()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def concurrently(fns):
    """Calls every function of `fns` on its own thread at once; their results in order (the first
    exception raised, re-raised here)."""
    out, errs = [None] * len(fns), []

    def go(i):
        try:
            out[i] = fns[i]()
        except Exception as e:  # noqa: BLE001 (re-raised below)
            errs.append(e)

    ts = [threading.Thread(target=go, args=(i,)) for i in range(len(fns))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs:
        raise errs[0]
    return out


def run_tests(namespace, only=()):
    """Runs every test_* function of a module's namespace (only those named in `only`, when
    given), printing PASS / FAIL with the traceback; 1 when one failed, else 0."""
    import time
    import traceback

    tests = [(n, f) for n, f in namespace.items() if n.startswith("test_") and callable(f)]
    if only:
        tests = [(n, f) for n, f in tests if n in only]
    failed = []
    for name, fn in tests:
        t0 = time.time()
        try:
            fn()
            print(f"PASS {name} ({time.time() - t0:.1f} s)", flush=True)
        except Exception:
            failed.append(name)
            print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
    print(f"{len(tests) - len(failed)}/{len(tests)} passed")
    return 1 if failed else 0
