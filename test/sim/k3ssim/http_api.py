"""The HTTPS side: TLS with client certificates, routing, content
negotiation (JSON, Table, aggregated discovery), watch streams and pod logs.
"""

import http.server
import json
import socket
import socketserver
import ssl
import sys
import threading
import time
import traceback
import urllib.parse
import uuid

from . import apierrors as errors
from . import auth
from . import resources as api
from .objects import fields_match, labels_match, parse_field_selector, \
    parse_label_selector
from .registry import parse_body

# kube-apiserver's default --min-request-timeout is 1800 s.
DEFAULT_WATCH_SECONDS = 1800
X509_V_FLAG_NO_CHECK_TIME = 0x200000


def tls_context(cert, key, client_ca):
    """Like kube-apiserver: a client certificate is requested but the
    request decides (no or expired certificate -> 401 Unauthorized); one
    from an unknown CA fails the handshake."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    context.load_verify_locations(client_ca)
    context.verify_mode = ssl.CERT_OPTIONAL
    # Validity is checked per request, to answer 401 as the real server
    # does instead of a TLS alert.
    context.verify_flags |= X509_V_FLAG_NO_CHECK_TIME
    context.set_alpn_protocols(["http/1.1"])
    return context


def truthy(value):
    return str(value).lower() in ("1", "true")


class Route:
    def __init__(self, kind, res=None, namespace=None, name=None, sub=None,
                 group=None):
        self.kind = kind
        self.res = res
        self.namespace = namespace
        self.name = name
        self.sub = sub
        self.group = group

    def verb(self, method, query):
        if self.kind != "resource":
            return "get"
        if method == "GET":
            if self.name:
                return "get"
            return "watch" if truthy(query.get("watch")) else "list"
        return {"POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete" if self.name else "deletecollection"}.get(
                    method, method.lower())


def parse_route(path):
    parts = [urllib.parse.unquote(p) for p in path.split("/") if p]
    if parts == ["version"]:
        return Route("version")
    if parts and parts[0] in ("healthz", "livez", "readyz"):
        return Route("health")
    if parts == ["api"] or parts == ["apis"]:
        return Route(parts[0])
    if parts[:2] == ["openapi", "v3"]:
        return _openapi_route(parts[2:])
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis" and parts[1] in api.GROUPS \
            and parts[2] == "v1":
        group, rest = parts[1], parts[3:]
    elif len(parts) == 2 and parts[0] == "apis" and parts[1] in api.GROUPS:
        return Route("group", group=parts[1])
    else:
        return Route("unknown")
    if not rest:
        return Route("groupversion", group=group)
    return _resource_route(group, rest)


def _openapi_route(rest):
    if not rest:
        return Route("openapi")
    if rest == ["api", "v1"]:
        return Route("openapi", group="")
    if len(rest) == 3 and rest[0] == "apis" and rest[1] in api.GROUPS:
        return Route("openapi", group=rest[1])
    return Route("unknown")


def _resource_route(group, rest):
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        inner = api.resource(group, rest[2])
        if inner is not None and inner.namespaced:
            namespace, rest = rest[1], rest[2:]
    res = api.resource(group, rest[0])
    if res is None or len(rest) > 3:
        return Route("unknown")
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub is not None and sub not in dict(res.subresources):
        return Route("unknown")
    if res.namespaced and name and namespace is None:
        return Route("unknown")
    return Route("resource", res, namespace, name, sub, group)


class ApiServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, sim, context):
        self.sim = sim
        self.context = context
        self.connections = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, ApiHandler)

    def server_bind(self):
        # HTTPServer.server_bind would look up the host's FQDN (DNS).
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def finish_request(self, request, client_address):
        # The handshake runs here, in the connection's own thread, so a
        # slow or failing client never holds up accept().
        request.settimeout(10)
        try:
            conn = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as err:
            self.sim.log(f"TLS handshake failed: {err}")
            return
        self.sim.stats.count_handshake()
        with self.connections_lock:
            self.connections.add(conn)
        try:
            self.RequestHandlerClass(conn, client_address, self)
        except (OSError, ssl.SSLError):
            pass
        finally:
            with self.connections_lock:
                self.connections.discard(conn)
            try:
                conn.close()
            except OSError:
                pass

    def shutdown_request(self, request):
        try:
            request.close()
        except OSError:
            pass

    def close_connections(self):
        with self.connections_lock:
            conns = list(self.connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class ApiHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 600  # idle keep-alive connections are closed after this
    disable_nagle_algorithm = True

    # ------------------------------------------------------------ basics

    def log_message(self, fmt, *args):
        self.server.sim.log(fmt % args)

    def send_response(self, code, message=None):
        # kube-apiserver sends no Server header.
        self.log_request(code)
        self.send_response_only(code, message)
        self.send_header("Date", self.date_time_string())

    def _read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, code, data, content_type, headers=None):
        self.send_response(code)
        self.send_header("Audit-Id", str(uuid.uuid4()))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Type", content_type)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_json(self, code, body, content_type="application/json",
                  headers=None):
        data = (json.dumps(body, separators=(",", ":")) + "\n").encode()
        self._send(code, data, content_type, headers)

    def send_status(self, err):
        self.send_json(err.code, err.status(), headers=err.headers)

    # ----------------------------------------------------------- serving

    def do_GET(self):
        self.serve("GET")

    def do_POST(self):
        self.serve("POST")

    def do_PUT(self):
        self.serve("PUT")

    def do_PATCH(self):
        self.serve("PATCH")

    def do_DELETE(self):
        self.serve("DELETE")

    def serve(self, method):
        sim = self.server.sim
        url = urllib.parse.urlsplit(self.path)
        query = {k: v[0] for k, v in urllib.parse.parse_qs(
            url.query, keep_blank_values=True).items()}
        body = self._read_body()
        route = parse_route(url.path)
        dry_run = query.get("dryRun") == "All"
        cert = self.connection.getpeercert()
        user = auth.user_of(cert).name if cert else ""
        sim.stats.count(route.verb(method, query), method, dry_run, user)
        sim.faults.delay()
        auth.set_current_user(None)
        try:
            auth.set_current_user(self._authenticate(cert))
            sim.faults.check()
            if route.kind == "resource":
                self._authorize(method, route, query)
            self._dispatch(method, route, query, body, dry_run)
        except errors.ApiError as err:
            self.send_status(err)
        except (ConnectionError, socket.timeout, ssl.SSLError):
            self.close_connection = True
        except Exception as err:  # a bug in the simulator: say so, as a 500
            traceback.print_exc()
            self.send_status(errors.internal(repr(err)))

    @staticmethod
    def _authenticate(cert):
        """The user of a valid client certificate (the x509 authenticator);
        401 without one."""
        if not cert:
            raise errors.unauthorized()
        now = time.time()
        if ssl.cert_time_to_seconds(cert["notAfter"]) < now or \
                ssl.cert_time_to_seconds(cert["notBefore"]) > now:
            raise errors.unauthorized()
        return auth.user_of(cert)

    def _authorize(self, method, route, query):
        """The WithAuthorization filter: the request's attributes as
        requestinfo.go derives them, then Node,RBAC. A list or watch with
        fieldSelector metadata.name=X is about the object X."""
        fields = parse_field_selector(query.get("fieldSelector"), route.res)
        verb = route.verb(method, query)
        name = route.name or ""
        if verb in ("list", "watch"):
            exact = [v for f, negate, v in fields
                     if f == "metadata.name" and not negate]
            if exact:
                name = exact[0]
        self.server.sim.authorizer.check(auth.Attributes(
            auth.current_user(), verb, route.res, route.namespace or "", name,
            route.sub or "", fields))

    def _dispatch(self, method, route, query, body, dry_run):
        if route.kind == "resource":
            self._resource(method, route, query, body, dry_run)
            return
        if method != "GET":
            raise errors.method_not_allowed()
        accept = self.headers.get("Accept", "")
        sim = self.server.sim
        if route.kind == "version":
            self.send_json(200, api.version_info())
        elif route.kind == "health":
            self._send(200, b"ok", "text/plain; charset=utf-8")
        elif route.kind in ("api", "apis"):
            groups = ("",) if route.kind == "api" else api.GROUPS
            if sim.faults.aggregated_discovery and \
                    api.wants_aggregated(accept):
                self.send_json(200, api.aggregated_discovery(groups),
                               api.AGGREGATED_TYPE, {"Vary": "Accept"})
            elif route.kind == "api":
                self.send_json(200, api.api_versions())
            else:
                self.send_json(200, api.api_group_list())
        elif route.kind == "group":
            self.send_json(200, api.api_group(route.group))
        elif route.kind == "groupversion":
            self.send_json(200, api.api_resource_list(route.group))
        elif route.kind == "openapi":
            self.send_json(200, api.openapi_root() if route.group is None
                           else api.openapi_group(route.group))
        else:
            raise errors.path_not_found()

    # --------------------------------------------------------- resources

    def _manager(self, query):
        if query.get("fieldManager"):
            return query["fieldManager"]
        agent = self.headers.get("User-Agent", "")
        return agent.split("/", 1)[0][:128] or "unknown"

    def _resource(self, method, route, query, body, dry_run):
        sim = self.server.sim
        res, ns, name = route.res, route.namespace, route.name
        if method == "GET":
            if name is None:
                labels = parse_label_selector(query.get("labelSelector"))
                fields = parse_field_selector(query.get("fieldSelector"), res)
                if truthy(query.get("watch")):
                    self._watch(res, ns, labels, fields, query)
                else:
                    items, rv = sim.registry.list(res, ns, labels, fields)
                    self._send_list(res, items, rv)
            elif route.sub == "log":
                self._pod_log(ns, name, query)
            else:
                self._send_object(200, sim.registry.get(res, ns, name))
            return
        content_type = self.headers.get("Content-Type", "application/json")
        if method == "POST" and name is None:
            obj = sim.registry.create(res, ns, parse_body(body, content_type),
                                      self._manager(query), dry_run)
            self._send_object(201, obj)
        elif method == "PUT" and name:
            obj = sim.registry.update(res, ns, name,
                                      parse_body(body, content_type),
                                      self._manager(query), dry_run)
            self._send_object(200, obj)
        elif method == "PATCH" and name:
            obj, code = sim.registry.patch(res, ns, name, content_type, body,
                                           query, self._manager(query),
                                           dry_run)
            self._send_object(code, obj)
        elif method == "DELETE":
            self._delete(res, ns, name, query, body, dry_run)
        else:
            raise errors.method_not_allowed()

    def _delete(self, res, ns, name, query, body, dry_run):
        sim = self.server.sim
        options = json.loads(body) if body.strip() else {}
        for key in ("gracePeriodSeconds", "propagationPolicy"):
            if key in query:
                options[key] = (int(query[key]) if key == "gracePeriodSeconds"
                                else query[key])
        if name:
            self._send_object(200, sim.registry.delete(res, ns, name, options,
                                                       dry_run))
            return
        labels = parse_label_selector(query.get("labelSelector"))
        fields = parse_field_selector(query.get("fieldSelector"), res)
        items, rv = sim.registry.delete_collection(res, ns, labels, fields,
                                                   options, dry_run)
        self._send_list(res, items, rv)

    def _negotiate(self):
        accept = self.headers.get("Accept", "") or "application/json"
        kinds = [m.split(";")[0].strip() for m in accept.split(",")]
        if not any(k in ("application/json", "*/*", "application/*", "")
                   or k.endswith("+json") or k == "application/yaml"
                   for k in kinds):
            raise errors.not_acceptable()
        return accept

    def _send_object(self, code, obj):
        accept = self._negotiate()
        if api.wants(accept, "Table") and obj["kind"] in api.TABLES:
            self.send_json(code, api.table(obj["kind"], [obj],
                                           obj["metadata"]["resourceVersion"]))
        elif api.wants(accept, "PartialObjectMetadata"):
            self.send_json(code, api.partial_metadata(obj))
        else:
            self.send_json(code, obj)

    def _send_list(self, res, items, rv):
        accept = self._negotiate()
        if api.wants(accept, "Table"):
            self.send_json(200, api.table(res.kind, items, rv))
            return
        if api.wants(accept, "PartialObjectMetadataList"):
            self.send_json(200, {
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": rv},
                "items": [api.partial_metadata(o) for o in items]})
            return
        for item in items:  # list items carry no kind/apiVersion
            item.pop("kind", None)
            item.pop("apiVersion", None)
        self.send_json(200, {"kind": f"{res.kind}List",
                             "apiVersion": res.group_version,
                             "metadata": {"resourceVersion": rv},
                             "items": items})

    # ------------------------------------------------------------- watch

    def _start_stream(self, content_type):
        self.send_response(200)
        self.send_header("Audit-Id", str(uuid.uuid4()))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data):
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_stream(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _watch(self, res, ns, labels, fields, query):
        sim = self.server.sim
        store = sim.store
        stream = WatchStream(res, ns, labels, fields, query,
                             api.wants(self._negotiate(), "Table"))
        with store.lock:
            epoch = store.epoch
            start = stream.start(store)
        if isinstance(start, errors.ApiError) and start.code != 410:
            raise start
        self._start_stream("application/json")
        sim.stats.watch_opened()
        try:
            if isinstance(start, errors.ApiError):
                self._chunk(stream.error_line(start))
                self._end_stream()
                return
            for line in start:
                self._chunk(line)
            self._follow(stream, epoch)
            self._end_stream()
        finally:
            sim.stats.watch_closed()

    def _follow(self, stream, epoch):
        sim = self.server.sim
        store = sim.store
        deadline = time.time() + stream.timeout
        next_bookmark = time.time() + sim.faults.bookmark_ms / 1000.0
        while True:
            now = time.time()
            if now >= deadline:
                return
            with store.lock:
                events = store.events_after(stream.last)
                if not events and store.epoch == epoch:
                    store.changed.wait(min(deadline - now, 0.25,
                                           max(next_bookmark - now, 0.01)))
                    events = store.events_after(stream.last)
                if store.epoch != epoch or sim.stopping:
                    self.close_connection = True
                    return
                if stream.last < store.floor:
                    lost = errors.expired(stream.last, store.floor)
                else:
                    lost = None
                    lines = stream.lines(events)
            if lost:
                self._chunk(stream.error_line(lost))
                return
            for line in lines:
                self._chunk(line)
            if stream.bookmarks and time.time() >= next_bookmark:
                self._chunk(stream.bookmark())
                next_bookmark = time.time() + sim.faults.bookmark_ms / 1000.0

    # --------------------------------------------------------------- logs

    def _pod_log(self, ns, name, query):
        sim = self.server.sim
        pod = sim.registry.get(api.BY_KIND["Pod"], ns, name)
        container = query.get("container")
        previous = truthy(query.get("previous"))
        with sim.store.lock:
            text = sim.cluster.logs(pod, container, previous)
        text = self._trim_log(text, query)
        if not truthy(query.get("follow")) or previous:
            self._send(200, text.encode(), "text/plain")
            return
        self._start_stream("text/plain")
        sent = text
        if sent:
            self._chunk(sent.encode())
        uid = pod["metadata"]["uid"]
        deadline = time.time() + DEFAULT_WATCH_SECONDS
        while time.time() < deadline and not sim.stopping:
            time.sleep(0.1)
            with sim.store.lock:
                pod = sim.store.get(api.BY_KIND["Pod"], ns, name)
                if pod is None or pod["metadata"]["uid"] != uid:
                    break
                current = sim.cluster.logs(pod, container, False)
                done = pod.get("status", {}).get("phase") in ("Succeeded",
                                                              "Failed")
            if current.startswith(sent) and len(current) > len(sent):
                self._chunk(current[len(sent):].encode())
                sent = current
            if done:
                break
        self._end_stream()

    @staticmethod
    def _trim_log(text, query):
        if query.get("tailLines"):
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-int(query["tailLines"]):]) \
                if int(query["tailLines"]) > 0 else ""
        if query.get("limitBytes"):
            text = text[:int(query["limitBytes"])]
        return text


class WatchStream:
    """One watch: its filters and how store events become lines."""

    def __init__(self, res, namespace, labels, fields, query, as_table):
        self.res = res
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.as_table = as_table
        self.first_table = True
        self.rv_param = query.get("resourceVersion", "")
        self.timeout = int(query.get("timeoutSeconds")
                           or DEFAULT_WATCH_SECONDS)
        self.bookmarks = truthy(query.get("allowWatchBookmarks"))
        self.initial = truthy(query.get("sendInitialEvents"))
        self.last = 0

    def matches(self, obj):
        if obj is None:
            return False
        if self.namespace and obj["metadata"].get("namespace") != \
                self.namespace:
            return False
        return labels_match(self.labels, obj["metadata"].get("labels")) and \
            fields_match(self.fields, obj)

    def start(self, store):
        """Initial lines, or the 410 ApiError for an expired version.
        Called with the store lock held."""
        if self.rv_param in ("", "0") or self.initial:
            self.last = store.rv
            lines = [self.line("ADDED", o) for o in
                     store.list(self.res, self.namespace) if self.matches(o)]
            if self.initial and self.bookmarks:
                lines.append(self.bookmark(initial_end=True))
            return lines
        try:
            self.last = int(self.rv_param)
        except ValueError:
            return errors.bad_request(f"invalid resource version: "
                                      f"{self.rv_param}")
        if self.last < store.floor:
            return errors.expired(self.last, store.floor)
        return []

    def lines(self, events):
        out = []
        for event in events:
            self.last = event.rv
            if event.res is not self.res:
                continue
            kind = self._translate(event)
            if kind:
                out.append(self.line(kind, event.obj))
        return out

    def _translate(self, event):
        now_ok = self.matches(event.obj)
        before_ok = self.matches(event.prev)
        if event.type == "ADDED":
            return "ADDED" if now_ok else None
        if event.type == "DELETED":
            return "DELETED" if now_ok or before_ok else None
        if now_ok and before_ok:
            return "MODIFIED"
        if now_ok:
            return "ADDED"
        return "DELETED" if before_ok else None

    def line(self, kind, obj):
        if self.as_table and obj.get("kind") in api.TABLES:
            obj = api.table(obj["kind"], [obj],
                            obj["metadata"]["resourceVersion"],
                            with_columns=self.first_table)
            self.first_table = False
        return (json.dumps({"type": kind, "object": obj},
                           separators=(",", ":")) + "\n").encode()

    def bookmark(self, initial_end=False):
        metadata = {"resourceVersion": str(self.last),
                    "creationTimestamp": None}
        if initial_end:
            metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": self.res.kind, "apiVersion": self.res.group_version,
               "metadata": metadata}
        return (json.dumps({"type": "BOOKMARK", "object": obj},
                           separators=(",", ":")) + "\n").encode()

    @staticmethod
    def error_line(err):
        return (json.dumps({"type": "ERROR", "object": err.status()},
                           separators=(",", ":")) + "\n").encode()


def log(message):
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr,
          flush=True)
