"""The API surface: which resources exist, discovery documents (legacy and
aggregated), the slice of OpenAPI v3 kubectl reads before an apply, and the
server-side Table printing kubectl asks for on `get`.
"""

import base64
import calendar
import hashlib
import json
import time
from dataclasses import dataclass

K3S_VERSION = "v1.36.2+k3s1"

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch",
             "update", "watch")
NAMESPACE_VERBS = ("create", "delete", "get", "list", "patch", "update",
                   "watch")

POD_FIELDS = ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
              "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
              "status.podIP", "status.nominatedNodeName")
EVENT_FIELDS = ("involvedObject.kind", "involvedObject.namespace",
                "involvedObject.name", "involvedObject.uid",
                "involvedObject.apiVersion", "involvedObject.resourceVersion",
                "involvedObject.fieldPath", "reason", "reportingComponent",
                "source", "type")


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple = ()
    categories: tuple = ()
    verbs: tuple = ALL_VERBS
    # Written only through the node model (a status subresource): client
    # writes keep the stored status.
    has_status: bool = False
    # metadata.generation is kept and bumped on spec changes.
    has_generation: bool = False
    field_labels: tuple = ()
    subresources: tuple = ()  # (name, verbs)

    @property
    def group_version(self):
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self):  # "daemonsets.apps", "pods"
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def group_kind(self):  # "DaemonSet.apps", "Pod"
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def prefix(self):
        if self.group:
            return f"/apis/{self.group}/{self.version}"
        return "/api/v1"

    def path(self, namespace, name=None):
        base = self.prefix
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


RESOURCES = (
    Resource("", "v1", "namespaces", "namespace", "Namespace", False, ("ns",),
             verbs=NAMESPACE_VERBS, has_status=True,
             field_labels=("status.phase",)),
    Resource("", "v1", "nodes", "node", "Node", False, ("no",),
             has_status=True, field_labels=("spec.unschedulable",)),
    Resource("", "v1", "pods", "pod", "Pod", True, ("po",), ("all",),
             has_status=True, has_generation=True, field_labels=POD_FIELDS,
             subresources=(("log", ("get",)),)),
    Resource("", "v1", "configmaps", "configmap", "ConfigMap", True, ("cm",)),
    Resource("", "v1", "events", "event", "Event", True, ("ev",),
             field_labels=EVENT_FIELDS),
    Resource("apps", "v1", "daemonsets", "daemonset", "DaemonSet", True,
             ("ds",), ("all",), has_status=True, has_generation=True),
    Resource("node.k8s.io", "v1", "runtimeclasses", "runtimeclass",
             "RuntimeClass", False),
)
BY_PLURAL = {(r.group, r.plural): r for r in RESOURCES}
BY_KIND = {r.kind: r for r in RESOURCES}
GROUPS = ("apps", "node.k8s.io")


def resource(group, plural):
    return BY_PLURAL.get((group, plural))


# ---------------------------------------------------------------- discovery

def version_info():
    return {
        "major": "1", "minor": "36", "emulationMajor": "1",
        "emulationMinor": "36", "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "35", "gitVersion": K3S_VERSION,
        "gitCommit": "4a8f2e9c1b7d3e5f6a0b9c8d7e6f5a4b3c2d1e0f",
        "gitTreeState": "clean", "buildDate": "2026-03-11T17:20:31Z",
        "goVersion": "go1.25.7", "compiler": "gc", "platform": "linux/amd64",
    }


def _storage_hash(res):
    digest = hashlib.sha256(res.group_resource.encode()).digest()[:8]
    return base64.b64encode(digest).decode()


def _legacy_resources(group):
    out = []
    for res in RESOURCES:
        if res.group != group:
            continue
        entry = {"name": res.plural, "singularName": res.singular,
                 "namespaced": res.namespaced, "kind": res.kind,
                 "verbs": list(res.verbs)}
        if res.short_names:
            entry["shortNames"] = list(res.short_names)
        if res.categories:
            entry["categories"] = list(res.categories)
        entry["storageVersionHash"] = _storage_hash(res)
        out.append(entry)
        for sub, verbs in res.subresources:
            out.append({"name": f"{res.plural}/{sub}", "singularName": "",
                        "namespaced": res.namespaced, "kind": res.kind,
                        "verbs": list(verbs)})
    return out


def api_versions():
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0",
                 "serverAddress": "192.168.100.10:6443"}]}


def _group_entry(group):
    gv = {"groupVersion": f"{group}/v1", "version": "v1"}
    return {"name": group, "versions": [gv], "preferredVersion": gv}


def api_group_list():
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_group_entry(g) for g in GROUPS]}


def api_group(group):
    return dict({"kind": "APIGroup", "apiVersion": "v1"},
                **_group_entry(group))


def api_resource_list(group):
    body = {"kind": "APIResourceList"}
    if group:
        body["apiVersion"] = "v1"
    body["groupVersion"] = f"{group}/v1" if group else "v1"
    body["resources"] = _legacy_resources(group)
    return body


AGGREGATED_TYPE = ("application/json;g=apidiscovery.k8s.io;v=v2;"
                   "as=APIGroupDiscoveryList")


def wants_aggregated(accept):
    """kubectl 1.32 asks for apidiscovery.k8s.io/v2 first."""
    for media in (accept or "").split(","):
        params = {p.split("=", 1)[0].strip(): p.split("=", 1)[1].strip()
                  for p in media.split(";")[1:] if "=" in p}
        if (params.get("g") == "apidiscovery.k8s.io"
                and params.get("v") == "v2"
                and params.get("as") == "APIGroupDiscoveryList"):
            return True
    return False


def _aggregated_resource(res):
    entry = {"resource": res.plural,
             "responseKind": {"group": "", "version": "", "kind": res.kind},
             "scope": "Namespaced" if res.namespaced else "Cluster",
             "singularResource": res.singular, "verbs": list(res.verbs)}
    if res.short_names:
        entry["shortNames"] = list(res.short_names)
    if res.categories:
        entry["categories"] = list(res.categories)
    if res.subresources:
        entry["subresources"] = [
            {"subresource": sub,
             "responseKind": {"group": "", "version": "", "kind": res.kind},
             "verbs": list(verbs)} for sub, verbs in res.subresources]
    return entry


def aggregated_discovery(groups):
    items = []
    for group in groups:
        metadata = {"name": group, "creationTimestamp": None} if group else {
            "creationTimestamp": None}
        resources = [_aggregated_resource(r) for r in RESOURCES
                     if r.group == group]
        items.append({"metadata": metadata, "versions": [
            {"version": "v1", "resources": resources,
             "freshness": "Current"}]})
    return {"kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {},
            "items": items}


# ----------------------------------------------------------------- openapi
# kubectl apply validates by asking the server (fieldValidation=Strict) once
# it has seen, in OpenAPI v3, that the PATCH operation of the kind takes
# that parameter; without /openapi/v3 it fails with "failed to download
# openapi". Only that much is served: paths, operations and parameters.

def _gv_path(group):
    return f"apis/{group}/v1" if group else "api/v1"


def openapi_root():
    paths = {}
    for group in ("",) + GROUPS:
        doc = json.dumps(openapi_group(group), sort_keys=True).encode()
        digest = hashlib.sha512(doc).hexdigest()[:128].upper()
        url = f"/openapi/v3/{_gv_path(group)}?hash={digest}"
        paths[_gv_path(group)] = {"serverRelativeURL": url}
    return {"paths": paths}


def _param(name):
    return {"name": name, "in": "query", "schema": {"type": "string",
                                                    "uniqueItems": True}}


def _operation(res, action, params):
    return {"operationId": f"{action}{res.kind}",
            "parameters": [_param(p) for p in params],
            "responses": {"200": {"description": "OK"}},
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": {
                "group": res.group, "version": res.version, "kind": res.kind}}


def openapi_group(group):
    paths = {}
    write = ("dryRun", "fieldManager", "fieldValidation", "pretty")
    for res in RESOURCES:
        if res.group != group:
            continue
        base = res.prefix
        if res.namespaced:
            base += "/namespaces/{namespace}"
        paths[f"{base}/{res.plural}"] = {
            "get": _operation(res, "list", ("labelSelector", "fieldSelector",
                                            "watch", "resourceVersion")),
            "post": _operation(res, "post", write),
        }
        paths[f"{base}/{res.plural}/{{name}}"] = {
            "get": _operation(res, "get", ("pretty",)),
            "put": _operation(res, "put", write),
            "patch": _operation(res, "patch", write + ("force",)),
            "delete": _operation(res, "delete", ("dryRun",
                                                 "gracePeriodSeconds")),
        }
    return {"openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": K3S_VERSION},
            "paths": paths, "components": {"schemas": {}}}


# ------------------------------------------------------------------ tables

def parse_time(text):
    if not text:
        return None
    return calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S"))


def human_duration(seconds):
    """apimachinery's duration.HumanDuration."""
    seconds = int(seconds)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    return f"{hours // 24}d"


def age(timestamp, now=None):
    when = parse_time(timestamp)
    if when is None:
        return "<unknown>"
    return human_duration((now or time.time()) - when)


def _col(name, kind="string", priority=0, fmt=""):
    return {"name": name, "type": kind, "format": fmt,
            "description": f"{name} column", "priority": priority}


NAME_COL = _col("Name", fmt="name")
AGE_COL = _col("Age")


def _node_row(obj):
    status = obj.get("status", {})
    ready = "Unknown"
    for cond in status.get("conditions", []):
        if cond.get("type") == "Ready":
            ready = "Ready" if cond.get("status") == "True" else "NotReady"
    if obj.get("spec", {}).get("unschedulable"):
        ready += ",SchedulingDisabled"
    labels = obj["metadata"].get("labels", {})
    roles = sorted(k.split("/", 1)[1] for k in labels
                   if k.startswith("node-role.kubernetes.io/"))
    info = status.get("nodeInfo", {})
    addresses = {a["type"]: a["address"] for a in status.get("addresses", [])}
    return [obj["metadata"]["name"], ready, ",".join(roles) or "<none>",
            age(obj["metadata"].get("creationTimestamp")),
            info.get("kubeletVersion", ""),
            addresses.get("InternalIP", "<none>"),
            addresses.get("ExternalIP", "<none>"), info.get("osImage", ""),
            info.get("kernelVersion", ""),
            info.get("containerRuntimeVersion", "")]


NODE_COLS = [NAME_COL, _col("Status"), _col("Roles"), AGE_COL, _col("Version"),
             _col("Internal-IP", priority=1), _col("External-IP", priority=1),
             _col("OS-Image", priority=1), _col("Kernel-Version", priority=1),
             _col("Container-Runtime", priority=1)]


def pod_status_text(pod):
    """kubectl's STATUS column (printPod, without init containers)."""
    status = pod.get("status", {})
    reason = status.get("reason") or status.get("phase", "Pending")
    running = False
    for cs in reversed(status.get("containerStatuses", [])):
        state = cs.get("state", {})
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif state.get("terminated", {}).get("reason"):
            reason = state["terminated"]["reason"]
        elif cs.get("ready") and "running" in state:
            running = True
    if reason == "Completed" and running:
        reason = "Running"
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return reason


def _pod_row(obj):
    statuses = obj.get("status", {}).get("containerStatuses", [])
    total = len(obj.get("spec", {}).get("containers", []))
    ready = sum(1 for cs in statuses if cs.get("ready"))
    restarts = sum(cs.get("restartCount", 0) for cs in statuses)
    last = max((cs.get("lastState", {}).get("terminated", {}).get("finishedAt")
                or "" for cs in statuses), default="")
    restart_text = str(restarts)
    if restarts and last:
        restart_text += f" ({age(last)} ago)"
    status = obj.get("status", {})
    return [obj["metadata"]["name"], f"{ready}/{total}", pod_status_text(obj),
            restart_text, age(obj["metadata"].get("creationTimestamp")),
            status.get("podIP", "<none>"),
            obj.get("spec", {}).get("nodeName", "<none>"),
            status.get("nominatedNodeName", "<none>"), "<none>"]


POD_COLS = [NAME_COL, _col("Ready"), _col("Status"), _col("Restarts"),
            AGE_COL, _col("IP", priority=1), _col("Node", priority=1),
            _col("Nominated Node", priority=1),
            _col("Readiness Gates", priority=1)]


def _format_labels(labels):
    if not labels:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _ds_row(obj):
    status = obj.get("status", {})
    template = obj.get("spec", {}).get("template", {}).get("spec", {})
    containers = template.get("containers", [])
    selector = obj.get("spec", {}).get("selector", {}).get("matchLabels", {})
    return [obj["metadata"]["name"], status.get("desiredNumberScheduled", 0),
            status.get("currentNumberScheduled", 0),
            status.get("numberReady", 0),
            status.get("updatedNumberScheduled", 0),
            status.get("numberAvailable", 0),
            _format_labels(template.get("nodeSelector")),
            age(obj["metadata"].get("creationTimestamp")),
            ",".join(c.get("name", "") for c in containers),
            ",".join(c.get("image", "") for c in containers),
            _format_labels(selector)]


DS_COLS = [NAME_COL, _col("Desired", "integer"), _col("Current", "integer"),
           _col("Ready", "integer"), _col("Up-to-date", "integer"),
           _col("Available", "integer"), _col("Node Selector"), AGE_COL,
           _col("Containers", priority=1), _col("Images", priority=1),
           _col("Selector", priority=1)]


def _event_row(obj):
    first = age(obj.get("firstTimestamp") or obj.get("eventTime"))
    last = age(obj.get("lastTimestamp")) if obj.get("lastTimestamp") else first
    count = obj.get("count", 1)
    if count > 1:
        last = f"{last} (x{count} over {first})"
    involved = obj.get("involvedObject", {})
    target = involved.get("kind", "").lower()
    if involved.get("name"):
        target += "/" + involved["name"]
    source = obj.get("source", {})
    source_text = source.get("component", "")
    if source.get("host"):
        source_text += ", " + source["host"]
    return [last, obj.get("type", ""), obj.get("reason", ""), target,
            involved.get("fieldPath", ""), source_text,
            obj.get("message", "").strip(), first, count,
            obj["metadata"]["name"]]


EVENT_COLS = [_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"),
              _col("Subobject", priority=1), _col("Source", priority=1),
              _col("Message"), _col("First Seen", priority=1),
              _col("Count", "integer", priority=1), _col("Name", priority=1)]

TABLES = {
    "Node": (NODE_COLS, _node_row),
    "Pod": (POD_COLS, _pod_row),
    "DaemonSet": (DS_COLS, _ds_row),
    "Event": (EVENT_COLS, _event_row),
    "RuntimeClass": ([NAME_COL, _col("Handler"), AGE_COL],
                     lambda o: [o["metadata"]["name"], o.get("handler", ""),
                                age(o["metadata"].get("creationTimestamp"))]),
    "ConfigMap": ([NAME_COL, _col("Data", "integer"), AGE_COL],
                  lambda o: [o["metadata"]["name"],
                             len(o.get("data", {})) + len(o.get("binaryData",
                                                                {})),
                             age(o["metadata"].get("creationTimestamp"))]),
    "Namespace": ([NAME_COL, _col("Status"), AGE_COL],
                  lambda o: [o["metadata"]["name"],
                             o.get("status", {}).get("phase", ""),
                             age(o["metadata"].get("creationTimestamp"))]),
}


def wants(accept, as_kind):
    return f"as={as_kind}" in (accept or "").replace(" ", "")


def partial_metadata(obj):
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": obj["metadata"]}


def table(kind, objects, resource_version, with_columns=True):
    """A meta.k8s.io/v1 Table as the server prints it for `kubectl get`."""
    columns, row = TABLES[kind]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": resource_version},
            "columnDefinitions": columns if with_columns else [],
            "rows": [{"cells": row(o), "object": partial_metadata(o)}
                     for o in objects]}
