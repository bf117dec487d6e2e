"""Object storage with one resourceVersion counter and a bounded watch
history, like etcd behind kube-apiserver's watch cache.
"""

import copy
import threading
from collections import deque
from dataclasses import dataclass

FIRST_RESOURCE_VERSION = 100
METADATA_ORDER = ("name", "generateName", "namespace", "uid",
                  "resourceVersion", "generation", "creationTimestamp",
                  "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
                  "annotations", "ownerReferences", "finalizers")


def canonical(obj):
    """The object with its keys in the order kube-apiserver writes them
    (kind, apiVersion, metadata, ..., status): only cosmetic, but output
    then reads like the real server's."""
    out = {k: obj[k] for k in ("kind", "apiVersion") if k in obj}
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        out["metadata"] = {k: metadata[k] for k in METADATA_ORDER
                           if k in metadata}
        out["metadata"].update(metadata)
    out.update({k: v for k, v in obj.items() if k not in out
                and k != "status"})
    if "status" in obj:
        out["status"] = obj["status"]
    return out


@dataclass
class WatchEvent:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    res: object  # resources.Resource
    obj: dict
    prev: dict  # the object before this event (None for ADDED)


class Store:
    """Every method takes the lock; callers that need several steps to be
    atomic hold `store.lock` (re-entrant) around them."""

    def __init__(self, history_size=500):
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.rv = FIRST_RESOURCE_VERSION
        self.objects = {}
        self.owners = {}  # key -> registry.Ownership
        self.history = deque()
        self.history_size = history_size
        # Watches from a resourceVersion below this get 410 Expired: the
        # events after it are no longer all in the history.
        self.floor = FIRST_RESOURCE_VERSION
        # Bumped to end every open watch (dropped streams, restarts).
        self.epoch = 0
        self.on_commit = None  # wakes the node model after a change

    @staticmethod
    def key(res, namespace, name):
        namespace = (namespace or "") if res.namespaced else ""
        return (res.group, res.plural, namespace, name)

    def get(self, res, namespace, name):
        with self.lock:
            obj = self.objects.get(self.key(res, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def list(self, res, namespace=None):
        with self.lock:
            found = [o for k, o in self.objects.items()
                     if k[0] == res.group and k[1] == res.plural
                     and (not namespace or k[2] == namespace)]
            found.sort(key=lambda o: (o["metadata"].get("namespace", ""),
                                      o["metadata"]["name"]))
            return [copy.deepcopy(o) for o in found]

    def commit(self, res, obj):
        """Stores `obj` (ADDED or MODIFIED) under a new resourceVersion and
        returns a copy of what was stored."""
        with self.lock:
            key = self.key(res, obj["metadata"].get("namespace"),
                           obj["metadata"]["name"])
            prev = self.objects.get(key)
            self.rv += 1
            stored = canonical(copy.deepcopy(obj))
            stored["metadata"]["resourceVersion"] = str(self.rv)
            self.objects[key] = stored
            self._record(WatchEvent(self.rv, "MODIFIED" if prev else "ADDED",
                                    res, stored, prev))
            return copy.deepcopy(stored)

    def remove(self, res, obj):
        with self.lock:
            key = self.key(res, obj["metadata"].get("namespace"),
                           obj["metadata"]["name"])
            prev = self.objects.pop(key, None)
            self.owners.pop(key, None)
            if prev is None:
                return None
            self.rv += 1
            gone = copy.deepcopy(prev)
            gone["metadata"]["resourceVersion"] = str(self.rv)
            self._record(WatchEvent(self.rv, "DELETED", res, gone, prev))
            return copy.deepcopy(gone)

    def _record(self, event):
        if len(self.history) >= self.history_size:
            self.floor = self.history.popleft().rv
        self.history.append(event)
        self.changed.notify_all()
        if self.on_commit:
            self.on_commit()

    def events_after(self, rv):
        """History events newer than rv (oldest first); caller holds lock."""
        out = []
        for event in reversed(self.history):
            if event.rv <= rv:
                break
            out.append(event)
        out.reverse()
        return out

    def end_watches(self):
        with self.lock:
            self.epoch += 1
            self.changed.notify_all()

    def restart(self, jump):
        """An API server restart: watches end, the watch history is gone,
        and the resourceVersion moves on, so every older one is expired."""
        with self.lock:
            self.rv += jump
            self.history.clear()
            self.floor = self.rv
            self.epoch += 1
            self.changed.notify_all()
