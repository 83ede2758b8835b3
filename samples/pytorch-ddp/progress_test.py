"""Tests progress.py against an HTTPS server on 127.0.0.1 with a self-signed certificate made by
openssl, and train.py's fault settings with stand-ins for torch. Run by progress_test.go (go test),
or by hand: python3 -B progress_test.py. Needs python3 and openssl, not torch."""

import http.server
import json
import math
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import types
import unittest
from unittest import mock

import progress

TOKEN = "tok-3f9a.secret"  # never to be printed


def make_cert(directory, name):
    """A self-signed certificate for 127.0.0.1: (cert.pem, key.pem); the cert is its own CA."""
    cert, key = os.path.join(directory, f"{name}.pem"), os.path.join(directory, f"{name}-key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", f"/CN={name}",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


class Recorder(http.server.BaseHTTPRequestHandler):
    """Records every POST and answers with the next planned (status, headers, body), else 204."""

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body})
        status, headers, text = self.server.plan.pop(0) if self.server.plan else (204, {}, "")
        data = text.encode()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if status != 204:
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if status != 204:
            self.wfile.write(data)

    def log_message(self, *args):
        pass


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class ProgressTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="progress-test-")
        cls.cert, cls.key = make_cert(cls.dir, "server")
        cls.other_ca, _ = make_cert(cls.dir, "other")

    def setUp(self):
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
        self.httpd.requests, self.httpd.plan = [], []
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        self.addCleanup(self.httpd.server_close)
        self.addCleanup(self.httpd.shutdown)

        self.token_file = os.path.join(self.dir, "token")
        self.write(self.token_file, TOKEN + "\n")
        self.ca_file = os.path.join(self.dir, "ca.pem")
        self.write(self.ca_file, open(self.cert).read())
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}/v1/progress/namespaces/default/pytorchjobs/ddp"
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and not k.startswith("MLKUBE_")}
        env.update(MLKUBE_PROGRESS_URL=self.url, MLKUBE_PROGRESS_TOKEN_FILE=self.token_file, MLKUBE_PROGRESS_CA_FILE=self.ca_file)
        patch = mock.patch.dict(os.environ, env, clear=True)
        patch.start()
        self.addCleanup(patch.stop)
        self.clock = FakeClock()
        patch = mock.patch.object(progress, "time", types.SimpleNamespace(monotonic=self.clock))
        patch.start()
        self.addCleanup(patch.stop)
        self.warnings = []

    @staticmethod
    def write(path, text):
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)  # as the kubelet swaps the file

    def reporter(self, **kw):
        return progress.Progress(warn=self.warnings.append, **kw)

    def bodies(self):
        return [json.loads(r["body"]) for r in self.httpd.requests]

    def steps(self):
        return [b["step"] for b in self.bodies()]

    def test_without_url_nothing(self):
        del os.environ["MLKUBE_PROGRESS_URL"]
        p = self.reporter()
        for step in range(1, 4):
            p.report(step, total_steps=3, final=step == 3, loss=0.5)
        self.assertEqual(self.httpd.requests, [])
        self.assertEqual(self.warnings, [])

    def test_headers_and_body(self):
        self.reporter().report(120, total_steps=1000, loss=0.42)
        self.assertEqual(len(self.httpd.requests), 1)
        r = self.httpd.requests[0]
        self.assertEqual(r["method"], "POST")
        self.assertEqual(r["path"], "/v1/progress/namespaces/default/pytorchjobs/ddp")
        self.assertEqual(r["headers"]["Authorization"], "Bearer " + TOKEN)
        self.assertEqual(r["headers"]["Content-Type"], "application/json")
        self.assertEqual(json.loads(r["body"]), {"step": 120, "totalSteps": 1000, "metrics": {"loss": 0.42}})
        self.assertLessEqual(len(r["body"]), 4096)
        self.assertEqual(self.warnings, [])

    def test_step_only_and_nan(self):
        p = self.reporter()
        p.report(7)
        p.report(8, final=True, loss=float("nan"), grad_norm=float("inf"))
        self.assertEqual(self.httpd.requests[0]["body"], b'{"step": 7}')
        self.assertEqual(self.httpd.requests[1]["body"], b'{"step": 8, "metrics": {"loss": NaN, "grad_norm": Infinity}}')
        self.assertTrue(math.isnan(self.bodies()[1]["metrics"]["loss"]))

    def test_token_read_every_time(self):
        p = self.reporter()
        p.report(1)
        self.write(self.token_file, "tok-rotated\n")
        self.clock.now += 1
        p.report(2)
        self.assertEqual([r["headers"]["Authorization"] for r in self.httpd.requests], ["Bearer " + TOKEN, "Bearer tok-rotated"])

    def test_throttle_and_final(self):
        p = self.reporter()
        for step in range(1, 11):  # a step every 0.25 s
            p.report(step, total_steps=10, final=step == 10, loss=1.0 / step)
            self.clock.now += 0.25
        self.assertEqual(self.steps(), [1, 5, 9, 10])
        self.assertEqual(self.bodies()[-1], {"step": 10, "totalSteps": 10, "metrics": {"loss": 0.1}})

    def test_errors_warned_once_each(self):
        self.httpd.plan = [(429, {"Retry-After": "1"}, "too fast: 1 report a second\n")] * 3 + [(500, {}, "oops")] * 2
        p = self.reporter()
        step = 0

        def report(n, final=False):
            nonlocal step
            for _ in range(n):
                step += 1
                started = time.perf_counter()
                p.report(step, total_steps=100, final=final, loss=0.5)
                self.assertLess(time.perf_counter() - started, 1.5)
                self.clock.now += 10  # past the throttle and any back-off

        report(3)
        report(2)
        self.assertEqual(self.steps(), [1, 2, 3, 4, 5])
        self.httpd.shutdown()
        self.httpd.server_close()
        report(2)  # refused
        report(1, final=True)
        self.assertEqual(len(self.warnings), 3, self.warnings)
        self.assertIn("HTTP 429", self.warnings[0])
        self.assertIn("too fast: 1 report a second", self.warnings[0])
        self.assertIn("HTTP 500", self.warnings[1])
        self.assertIn("ConnectionRefusedError", self.warnings[2])
        for w in self.warnings:
            self.assertNotIn(TOKEN, w)
            self.assertNotIn("\n", w)
            self.assertIn(self.url, w)

    def test_backoff_and_retry_after(self):
        self.httpd.plan = [(503, {}, "not the leader"), (429, {"Retry-After": "7"}, "slow down")]
        p = self.reporter(backoff=3.0)
        p.report(1)  # 503: the next waits 3 s
        self.clock.now += 2.9
        p.report(2)
        self.clock.now += 0.1
        p.report(3)  # 429, Retry-After 7
        self.clock.now += 6.9
        p.report(4)
        p.report(5, final=True)  # always
        self.clock.now += 0.9
        p.report(6)  # a second after the last report, which went through
        self.clock.now += 0.1
        p.report(7)
        self.assertEqual(self.steps(), [1, 3, 5, 7])

    def test_ca_read_every_time(self):
        self.write(self.ca_file, open(self.other_ca).read())
        p = self.reporter()
        p.report(1, final=True)
        self.assertEqual(self.httpd.requests, [])
        self.assertEqual(len(self.warnings), 1)
        self.assertIn("certificate verify failed", self.warnings[0])
        self.write(self.ca_file, open(self.cert).read())
        p.report(2, final=True)
        self.assertEqual(self.steps(), [2])

    def test_timeout(self):
        silent = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
        self.addCleanup(silent.close)
        os.environ["MLKUBE_PROGRESS_URL"] = f"https://127.0.0.1:{silent.getsockname()[1]}/v1/progress"
        p = self.reporter(timeout=0.3)
        started = time.perf_counter()
        p.report(1, final=True)
        self.assertLess(time.perf_counter() - started, 2)
        self.assertEqual(len(self.warnings), 1)
        self.assertIn("timed out", self.warnings[0])

    def test_missing_token_file_and_bad_metric(self):
        os.remove(self.token_file)
        p = self.reporter()
        p.report(1, final=True)
        p.report(2, final=True, loss="not a number")
        self.assertEqual(self.httpd.requests, [])
        self.assertEqual(len(self.warnings), 2, self.warnings)
        self.assertIn("FileNotFoundError", self.warnings[0])
        self.assertIn("ValueError", self.warnings[1])


class TrainFaultsTest(unittest.TestCase):
    """train.py's RAISE_* and HANG_* settings, with torch stood in for."""

    @classmethod
    def setUpClass(cls):
        torch = types.ModuleType("torch")
        torch.distributed = types.ModuleType("torch.distributed")
        torch.nn = types.ModuleType("torch.nn")
        torch.nn.parallel = types.ModuleType("torch.nn.parallel")
        torch.nn.parallel.DistributedDataParallel = object
        stubs = {"torch": torch, "torch.distributed": torch.distributed, "torch.nn": torch.nn, "torch.nn.parallel": torch.nn.parallel}
        with mock.patch.dict(sys.modules, stubs):
            import train
        cls.train = train

    def env(self, **values):
        patch = mock.patch.dict(os.environ, values)
        patch.start()
        self.addCleanup(patch.stop)

    def test_raise(self):
        self.assertFalse(self.train.raises(0, 1))
        self.env(RAISE_RANK="1", RAISE_AT_STEP="4")
        self.assertEqual([(r, s) for r in range(3) for s in range(1, 6) if self.train.raises(r, s)], [(1, 4)])

    def test_hang(self):
        self.assertIsNone(self.train.hang(0, 1))
        once = os.path.join(tempfile.mkdtemp(), "hung")
        self.env(HANG_RANK="2", HANG_AT_STEP="3", HANG_ONCE_FILE=once)
        with mock.patch("builtins.print"):
            self.assertIsNone(self.train.hang(1, 3))
            self.assertIsNone(self.train.hang(2, 2))
            self.assertEqual(self.train.hang(2, 3), 3600)
            self.assertTrue(os.path.exists(once))
            self.assertIsNone(self.train.hang(2, 3))  # once
        self.env(HANG_ONCE_FILE="", HANG_SECONDS="5")
        self.assertEqual(self.train.hang(2, 3), 5)


if __name__ == "__main__":
    unittest.main(verbosity=2)
