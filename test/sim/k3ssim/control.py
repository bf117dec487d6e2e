"""The test-only control port (plain HTTP, loopback): request counters,
fault injection and node knobs. Knobs, all POST with a JSON body:

  POST /faults
    {"error_5xx": N}             the next N API requests answer 503
                                 ServiceUnavailable
    {"error_429": N, "retry_after": S}
                                 the next N answer 429 TooManyRequests with
                                 Retry-After: S (default 1)
    {"latency_ms": MS}           added before every API answer (0 = off)
    {"drop_watches": true}       ends every open watch stream now
    {"refuse_ms": MS}            closes the API listener (and open
                                 connections); connections are refused until
                                 it reopens on the same port after MS
    {"restart": true}            an API server restart: watches end, the
                                 watch history is gone, resourceVersion jumps
                                 by 1000000 (older ones get 410 Expired)
    {"bookmark_ms": MS}          BOOKMARK interval of watches that allow them
    {"aggregated_discovery": B}  serve apidiscovery.k8s.io/v2 when asked
                                 (default true; false = legacy discovery only)
  POST /node {"name": NODE, "gpus": N, "healthy": N, "failing": [INDEX],
              "allocation": "distributed" | "first-free"} (devices.py)
                                 GPUs NODE's plugin finds when it starts /
                                 healthy ones (allocatable follows at once);
                                 without "name", the first node
  GET  /stats                    {"writes", "requests", "by_verb",
                                 "dry_run_writes", "writes_by_user" (write
                                 requests by user name), "faulted",
                                 "watches_open", "allocatable_changed_at",
                                 "tls_handshakes" (connections a client
                                 opened and completed TLS on)}
  POST /stats/reset              zeroes the counters
  GET  /object?path=/api/...     the stored object, or null
  GET  /log?namespace=NS&pod=NAME[&container=C]
                                 a pod's log as text (404 when unknown)
"""

import http.server
import json
import threading
import time
import urllib.parse

from . import apierrors as errors
from .http_api import parse_route

WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.requests = 0
            self.writes = 0
            self.dry_run_writes = 0
            self.faulted = 0
            self.tls_handshakes = 0
            self.by_verb = {}
            self.writes_by_user = {}
            self.watches_open = getattr(self, "watches_open", 0)
            self.allocatable_reset_at = time.time()

    def count(self, verb, method, dry_run, user=""):
        with self.lock:
            self.requests += 1
            self.by_verb[verb] = self.by_verb.get(verb, 0) + 1
            if method in WRITE_METHODS:
                if dry_run:
                    self.dry_run_writes += 1
                else:
                    self.writes += 1
                    self.writes_by_user[user] = \
                        self.writes_by_user.get(user, 0) + 1

    def count_handshake(self):
        with self.lock:
            self.tls_handshakes += 1

    def count_fault(self):
        with self.lock:
            self.faulted += 1

    def watch_opened(self):
        with self.lock:
            self.watches_open += 1

    def watch_closed(self):
        with self.lock:
            self.watches_open -= 1

    def snapshot(self, allocatable_changed_at):
        with self.lock:
            if allocatable_changed_at is not None and \
                    allocatable_changed_at < self.allocatable_reset_at:
                allocatable_changed_at = None
            return {"writes": self.writes, "requests": self.requests,
                    "by_verb": dict(self.by_verb),
                    "dry_run_writes": self.dry_run_writes,
                    "writes_by_user": dict(self.writes_by_user),
                    "faulted": self.faulted,
                    "tls_handshakes": self.tls_handshakes,
                    "watches_open": self.watches_open,
                    "allocatable_changed_at": allocatable_changed_at}


class Faults:
    def __init__(self, stats):
        self.lock = threading.Lock()
        self.stats = stats
        self.error_5xx = 0
        self.error_429 = 0
        self.retry_after = 1
        self.latency_ms = 0
        self.bookmark_ms = 1000
        self.aggregated_discovery = True

    def delay(self):
        if self.latency_ms > 0:
            time.sleep(self.latency_ms / 1000.0)

    def check(self):
        """Raises the injected error for this request, if one is due."""
        with self.lock:
            if self.error_5xx > 0:
                self.error_5xx -= 1
                self.stats.count_fault()
                raise errors.service_unavailable()
            if self.error_429 > 0:
                self.error_429 -= 1
                self.stats.count_fault()
                raise errors.too_many_requests(self.retry_after)

    def set(self, knobs):
        with self.lock:
            for key in ("error_5xx", "error_429", "retry_after", "latency_ms",
                        "bookmark_ms"):
                if key in knobs:
                    setattr(self, key, int(knobs[key]))
            if "aggregated_discovery" in knobs:
                self.aggregated_discovery = bool(knobs["aggregated_discovery"])


class ControlServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, sim):
        self.sim = sim
        super().__init__(address, ControlHandler)

    def server_bind(self):
        http.server.socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


class ControlHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        self.server.sim.log("control: " + fmt % args)

    def _reply(self, code, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else (
            json.dumps(body) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw.strip() else {}

    def do_GET(self):
        sim = self.server.sim
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        if url.path == "/stats":
            self._reply(200, sim.stats.snapshot(
                sim.cluster.allocatable_changed_at()))
        elif url.path == "/object":
            self._reply(200, self._object(query.get("path", "")))
        elif url.path == "/log":
            self._log(query)
        else:
            self._reply(404, {"error": f"unknown control path {url.path}"})

    def do_POST(self):
        sim = self.server.sim
        path = urllib.parse.urlsplit(self.path).path
        try:
            body = self._body()
        except ValueError as err:
            self._reply(400, {"error": f"bad JSON: {err}"})
            return
        if path == "/stats/reset":
            sim.stats.reset()
            self._reply(200, {})
        elif path == "/faults":
            sim.apply_faults(body)
            self._reply(200, {})
        elif path == "/node":
            kubelet = sim.cluster.kubelet(body.get("name"))
            if kubelet is None:
                self._reply(404, {"error": f"no node {body.get('name')}"})
                return
            try:
                self._reply(200, kubelet.set_gpus(
                    body.get("gpus"), body.get("healthy"),
                    body.get("failing"), body.get("allocation")))
            except ValueError as err:
                self._reply(400, {"error": str(err)})
        else:
            self._reply(404, {"error": f"unknown control path {path}"})

    def _object(self, path):
        route = parse_route(urllib.parse.urlsplit(path).path)
        if route.kind != "resource" or not route.name or route.sub:
            return None
        return self.server.sim.store.get(route.res, route.namespace,
                                         route.name)

    def _log(self, query):
        sim = self.server.sim
        pod = sim.store.get(sim.pods, query.get("namespace", "default"),
                            query.get("pod", ""))
        if pod is None:
            self._reply(404, {"error": "no such pod"})
            return
        try:
            with sim.store.lock:
                text = sim.cluster.logs(pod, query.get("container"), False)
        except errors.ApiError as err:
            self._reply(400, err.status())
            return
        self._reply(200, text.encode(), "text/plain")
