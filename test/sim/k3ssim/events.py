"""Events as client-go's recorder writes them, for every component of the
simulated cluster (controllers, scheduler, each node's kubelet)."""

import time

from . import apierrors as errors
from .registry import now_iso
from .resources import BY_KIND

EVENTS = BY_KIND["Event"]
EVENT_REPEAT_SECONDS = 10.0


class Recorder:
    def __init__(self, registry):
        self.registry = registry
        self.store = registry.store
        self.memory = {}  # (uid, reason, message) -> (name, time)
        self.now = time.time()  # the tick's time, set by the cluster

    def record(self, obj, kind, reason, message, component, field_path=None,
               host=""):
        """A repeat of the same event within 10 s is dropped, later ones
        bump `count`. `host` is the kubelet's node (source.host)."""
        uid = obj["metadata"]["uid"]
        key = (uid, reason, message)
        remembered = self.memory.get(key)
        if remembered and self.now - remembered[1] < EVENT_REPEAT_SECONDS:
            return
        namespace = obj["metadata"].get("namespace") or "default"
        stamp = now_iso(self.now)
        if remembered:
            existing = self.store.get(EVENTS, namespace, remembered[0])
            if existing is not None:
                existing["count"] = existing.get("count", 1) + 1
                existing["lastTimestamp"] = stamp
                self.registry.save(EVENTS, existing)
                self.memory[key] = (remembered[0], self.now)
                return
        name = f"{obj['metadata']['name']}.{time.time_ns():x}"
        involved = {"kind": obj["kind"], "namespace": namespace if
                    obj["metadata"].get("namespace") else "",
                    "name": obj["metadata"]["name"], "uid": uid,
                    "apiVersion": obj["apiVersion"],
                    "resourceVersion": obj["metadata"].get("resourceVersion",
                                                           "")}
        if not involved["namespace"]:
            del involved["namespace"]
        if field_path:
            involved["fieldPath"] = field_path
        source = {"component": component}
        if host:
            source["host"] = host
        body = {"metadata": {"name": name, "namespace": namespace},
                "involvedObject": involved, "reason": reason,
                "message": message, "source": source,
                "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
                "type": kind, "eventTime": None,
                "reportingComponent": component, "reportingInstance": host}
        try:
            self.registry.create(EVENTS, namespace, body, component)
            self.memory[key] = (name, self.now)
        except errors.ApiError:
            pass  # e.g. the namespace is being deleted
