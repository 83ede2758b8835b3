"""Reports training progress to the mlkube operator, with nothing but the standard library.

Where the operator serves progress, it gives the trainer's container three variables:
  MLKUBE_PROGRESS_URL         the https URL to POST a report to
  MLKUBE_PROGRESS_TOKEN_FILE  a bearer token, rewritten by the kubelet before it expires: read
                              on every report
  MLKUBE_PROGRESS_CA_FILE     the CA bundle that signed the operator's certificate: read on
                              every report
Without MLKUBE_PROGRESS_URL, report() does nothing.

A report is at most one a second (the operator's limit for a pod), but the final step is always
sent. A report that fails (no answer within 2 s, a refusal, any status but 2xx) never stops the
training: it prints one warning, and another only when the error changes; the next report waits
5 s, or what the operator's Retry-After says.

    progress = Progress()
    for step in range(1, steps + 1):
        ...
        progress.report(step, total_steps=steps, final=step == steps, loss=loss)
"""

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request


class Progress:
    def __init__(self, every=1.0, backoff=5.0, timeout=2.0, warn=None):
        self.url = os.environ.get("MLKUBE_PROGRESS_URL", "")
        self.token_file = os.environ.get("MLKUBE_PROGRESS_TOKEN_FILE", "")
        self.ca_file = os.environ.get("MLKUBE_PROGRESS_CA_FILE") or None  # None: the system's CAs
        self.every, self.backoff, self.timeout = every, backoff, timeout
        self.warn = warn or (lambda text: print(text, file=sys.stderr, flush=True))
        self.next = 0.0  # time.monotonic() before which no report is sent but the final one
        self.failed = None  # the kind of error last warned about

    def report(self, step, total_steps=None, final=False, **metrics):
        """Sends step (and the total, and metrics such as loss=0.42) unless one was sent less
        than a second ago; final: send it all the same."""
        if not self.url or (not final and time.monotonic() < self.next):
            return
        self.next = time.monotonic() + self.every
        token = ""
        try:
            body = {"step": int(step)}
            if total_steps is not None:
                body["totalSteps"] = int(total_steps)
            if metrics:
                body["metrics"] = {name: float(value) for name, value in metrics.items()}
            if not self.token_file:
                raise ValueError("MLKUBE_PROGRESS_TOKEN_FILE is not set")
            with open(self.token_file) as f:
                token = f.read().strip()
            request = urllib.request.Request(self.url, data=json.dumps(body).encode(), method="POST", headers={
                "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
            context = ssl.create_default_context(cafile=self.ca_file)
            with urllib.request.urlopen(request, timeout=self.timeout, context=context):
                return  # 2xx: accepted
        except urllib.error.HTTPError as e:  # the operator answered, but not 2xx: its body says why
            kind, what = f"HTTP {e.code}", f"HTTP {e.code} {e.reason}{_first_line(e)}"
            retry_after = e.headers.get("Retry-After", "") if e.headers else ""
            wait = min(int(retry_after), 60) if retry_after.isdigit() else 0
        except Exception as e:  # no answer: refused, timed out, TLS, the token file...
            cause = e.reason if isinstance(e, urllib.error.URLError) and isinstance(e.reason, Exception) else e
            kind, what, wait = type(cause).__name__, f"{type(cause).__name__}: {cause}", 0
        self.next = time.monotonic() + max(self.backoff, wait)
        if kind != self.failed:
            self.failed = kind
            if token:
                what = what.replace(token, "<token>")  # never in the log
            self.warn(f"progress report of step {step} to {self.url} failed: {what}; "
                      f"training goes on (warned again only if the error changes)")


def _first_line(response):
    """The first line of an error's body after ": ", or "" when it has none."""
    try:
        lines = response.read(300).decode(errors="replace").strip().splitlines()
    except Exception:
        return ""
    return f": {lines[0]}" if lines else ""
