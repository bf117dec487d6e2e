"""kube-apiserver's write path: create, update, the four patch formats,
server-side apply with per-manager field ownership, delete; defaulting,
validation, admission hooks and the real error answers.

Field ownership is kept per object as {(manager, operation): {paths}},
where a path is a tuple of map keys down to a leaf and lists are leaves
(atomic). That is enough for what apply must do here: merge what a manager
applies, remove what it applied before and no longer applies (unless
another manager also owns it), report conflicts with other managers unless
force=true, and leave the object untouched (same resourceVersion) when
nothing changes.
"""

import copy
import json
import random
import time
import uuid

import yaml

from . import apierrors as errors
from .apierrors import FieldError
from .objects import (MISSING, PatchError, apply_merge, changed_paths,
                      default_object, delete_path, fields_match, format_path,
                      get_path, json_merge, json_patch, labels_match,
                      leaf_paths, overlaps, strategic_merge, validate)
from .resources import BY_KIND

SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp",
                   "generation", "managedFields", "selfLink",
                   "deletionTimestamp", "deletionGracePeriodSeconds")
TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"
PROTECTED_NAMESPACES = ("default", "kube-system", "kube-public")
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
NAMESPACES = BY_KIND["Namespace"]
PODS = BY_KIND["Pod"]

APPLY = "application/apply-patch+yaml"
STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def now_iso(t=None):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def random_suffix(n=5):
    return "".join(random.choice(NAME_ALPHABET) for _ in range(n))


class Ownership:
    def __init__(self, fields=None):
        self.fields = fields or {}  # (manager, "Apply"|"Update") -> {paths}

    def copy(self):
        return Ownership({k: set(v) for k, v in self.fields.items()})

    def __eq__(self, other):
        return isinstance(other, Ownership) and self.fields == other.fields

    def owned_by_others(self, me, path):
        return any(overlaps(path, q) for key, paths in self.fields.items()
                   if key != me for q in paths)

    def take(self, manager, operation, paths):
        """`manager` now owns `paths`; other managers lose them."""
        for key in list(self.fields):
            if key != (manager, operation):
                self.fields[key] = {q for q in self.fields[key]
                                    if not any(overlaps(q, p) for p in paths)}
                if not self.fields[key]:
                    del self.fields[key]
        if paths:
            self.fields.setdefault((manager, operation), set()).update(paths)


def user_view(obj):
    """The part of an object clients own: no status, no server metadata."""
    view = copy.deepcopy(obj)
    for key in ("status", "apiVersion", "kind"):
        view.pop(key, None)
    metadata = view.get("metadata", {})
    for key in SERVER_METADATA + ("name", "namespace"):
        metadata.pop(key, None)
    annotations = metadata.get("annotations")
    if annotations:
        annotations.pop(TEMPLATE_GENERATION, None)
        if not annotations:
            metadata.pop("annotations")
    if not metadata:
        view.pop("metadata", None)
    return view


def clean_apply_config(config):
    config = copy.deepcopy(config)
    for key in ("apiVersion", "kind", "status"):
        config.pop(key, None)
    metadata = config.get("metadata")
    if isinstance(metadata, dict):
        for key in SERVER_METADATA + ("name", "namespace", "generateName"):
            metadata.pop(key, None)
        if not metadata:
            config.pop("metadata")
    return config


def spec_part(obj):
    return {k: v for k, v in obj.items()
            if k not in ("metadata", "status", "apiVersion", "kind")}


def qos_class(pod):
    containers = get_path(pod, ("spec", "containers"), []) or []
    requests_any, guaranteed = False, True
    for container in containers:
        resources = container.get("resources") or {}
        limits = resources.get("limits") or {}
        requests = resources.get("requests") or {}
        for name in ("cpu", "memory"):
            if name in limits or name in requests:
                requests_any = True
            if name not in limits or str(requests.get(name, limits[name])) \
                    != str(limits[name]):
                guaranteed = False
    if not requests_any:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def initial_status(kind, obj):
    if kind == "Pod":
        return {"phase": "Pending", "qosClass": qos_class(obj)}
    if kind == "DaemonSet":
        return {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                "desiredNumberScheduled": 0, "numberReady": 0}
    if kind == "Namespace":
        return {"phase": "Active"}
    return {}


def manager_label(manager, operation, res):
    if operation == "Apply":
        return f'"{manager}"'
    return f'"{manager}" using {res.group_version}'


def parse_json(raw):
    try:
        return json.loads(raw or b"null")
    except ValueError as err:
        raise errors.bad_request(f"error decoding patch: {err}") from None


def parse_body(raw, content_type):
    """A create/update body: JSON, or YAML when the client says so."""
    if "protobuf" in content_type or "cbor" in content_type:
        raise errors.unsupported_media_type()
    try:
        if "yaml" in content_type:
            body = yaml.safe_load(raw or b"")
        else:
            body = json.loads(raw or b"null")
    except (ValueError, yaml.YAMLError) as err:
        raise errors.bad_request(
            f"Object 'Kind' is missing in '{raw[:200]!r}': {err}") from None
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request is not an object")
    return body


class Registry:
    """All writes go through here, from clients and from the node model."""

    def __init__(self, store):
        self.store = store
        # Installed by the node model: admission of new objects (RuntimeClass
        # and PriorityClass checks for Pods) and graceful deletion.
        self.admit = lambda res, obj: None
        # Admission of every create and update by the request's user
        # (NodeRestriction), before the no-op check, as in kube-apiserver.
        self.admit_change = lambda res, live, new: None
        self.graceful_delete = lambda res, obj, grace: False

    # ------------------------------------------------------------- reads

    def get(self, res, namespace, name):
        obj = self.store.get(res, namespace, name)
        if obj is None:
            raise errors.not_found(res, name)
        return obj

    def list(self, res, namespace, label_req, field_req):
        with self.store.lock:
            items = [o for o in self.store.list(res, namespace)
                     if labels_match(label_req, o["metadata"].get("labels"))
                     and fields_match(field_req, o)]
            return items, str(self.store.rv)

    # ----------------------------------------------------------- helpers

    def _check_namespace(self, res, namespace, name):
        if not res.namespaced:
            return
        ns = self.store.get(NAMESPACES, None, namespace)
        if ns is None:
            raise errors.namespace_not_found(namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(
                res, name, f"unable to create new content in namespace "
                f"{namespace} because it is being terminated")

    def _prepare_new(self, res, namespace, body):
        obj = copy.deepcopy(body)
        obj["apiVersion"] = res.group_version
        obj["kind"] = res.kind
        metadata = obj.setdefault("metadata", {})
        if not isinstance(metadata, dict):
            raise errors.bad_request("metadata must be an object")
        for key in SERVER_METADATA:
            metadata.pop(key, None)
        if not metadata.get("name") and metadata.get("generateName"):
            metadata["name"] = metadata["generateName"] + random_suffix()
        if res.namespaced:
            metadata["namespace"] = namespace
        else:
            metadata.pop("namespace", None)
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = now_iso()
        if res.has_generation:
            metadata["generation"] = 1
        if res.has_status and res.kind != "Node":
            obj["status"] = initial_status(res.kind, obj)
        default_object(res.kind, obj)
        if res.kind == "DaemonSet":
            metadata.setdefault("annotations", {})[TEMPLATE_GENERATION] = "1"
        return obj

    def _prepare_update(self, res, live, new):
        new["apiVersion"] = res.group_version
        new["kind"] = res.kind
        metadata = new.setdefault("metadata", {})
        for key in SERVER_METADATA:
            if key in live["metadata"]:
                metadata[key] = live["metadata"][key]
            else:
                metadata.pop(key, None)
        metadata["name"] = live["metadata"]["name"]
        if res.namespaced:
            metadata["namespace"] = live["metadata"]["namespace"]
        if res.has_status:
            if "status" in live:
                new["status"] = copy.deepcopy(live["status"])
            else:
                new.pop("status", None)
        default_object(res.kind, new)
        if res.has_generation and spec_part(new) != spec_part(live):
            metadata["generation"] = live["metadata"].get("generation", 1) + 1
        if res.kind == "DaemonSet":
            generation = int(live["metadata"].get("annotations", {}).get(
                TEMPLATE_GENERATION, "1"))
            if get_path(new, ("spec", "template")) != \
                    get_path(live, ("spec", "template")):
                generation += 1
            metadata.setdefault("annotations", {})[TEMPLATE_GENERATION] = \
                str(generation)
        return new

    def _finish(self, res, live, new, owners, dry_run):
        """Validates and stores; returns (object, created)."""
        name = new["metadata"]["name"]
        self.admit_change(res, live, new)  # mutating admission: before
        problems = validate(res.kind, new, live)
        if problems:
            raise errors.invalid(res, name, problems)
        if live is None:
            self.admit(res, new)
        key = self.store.key(res, new["metadata"].get("namespace"), name)
        old_owners = self.store.owners.get(key, Ownership())
        if live is not None and new == live and owners == old_owners:
            return live, False  # a no-op: no new resourceVersion
        if dry_run:
            return new, live is None
        stored = self.store.commit(res, new)
        self.store.owners[key] = owners
        return stored, live is None

    @staticmethod
    def _check_preconditions(res, name, live, metadata):
        rv = metadata.get("resourceVersion")
        if rv and rv != live["metadata"]["resourceVersion"]:
            raise errors.modified_conflict(res, name)
        uid = metadata.get("uid")
        if uid and uid != live["metadata"]["uid"]:
            raise errors.conflict(
                res, name, f"Precondition failed: UID in precondition: {uid}, "
                f"UID in object meta: {live['metadata']['uid']}")

    # ------------------------------------------------------------ create

    def create(self, res, namespace, body, manager, dry_run=False):
        kind = body.get("kind")
        if kind and kind != res.kind:
            raise errors.bad_request(
                f"the kind of the object ({kind}) does not match the kind of "
                f"the resource ({res.kind})")
        body_ns = get_path(body, ("metadata", "namespace"))
        if res.namespaced and body_ns and body_ns != namespace:
            raise errors.bad_request("the namespace of the provided object "
                                     "does not match the namespace sent on "
                                     "the request")
        with self.store.lock:
            name = get_path(body, ("metadata", "name")) or ""
            self._check_namespace(res, namespace, name)
            obj = self._prepare_new(res, namespace, body)
            name = obj["metadata"]["name"]
            if name and self.store.get(res, namespace, name) is not None:
                raise errors.already_exists(res, name)
            owners = Ownership()
            owners.take(manager, "Update", set(leaf_paths(user_view(obj))))
            stored, _ = self._finish(res, None, obj, owners, dry_run)
            return stored

    # ------------------------------------------------------------ update

    def update(self, res, namespace, name, body, manager, dry_run=False):
        body_name = get_path(body, ("metadata", "name"))
        if body_name != name:
            raise errors.bad_request(
                f"the name of the object ({body_name or ''}) does not match "
                f"the name on the URL ({name})")
        with self.store.lock:
            live = self.get(res, namespace, name)
            return self._replace(res, name, live, copy.deepcopy(body),
                                 manager, dry_run)

    def _replace(self, res, name, live, new, manager, dry_run):
        self._check_preconditions(res, name, live, new.get("metadata") or {})
        new = self._prepare_update(res, live, new)
        key = self.store.key(res, live["metadata"].get("namespace"), name)
        owners = self.store.owners.get(key, Ownership()).copy()
        changed = set(changed_paths(user_view(live), user_view(new)))
        owners.take(manager, "Update", changed)
        stored, _ = self._finish(res, live, new, owners, dry_run)
        return stored

    # ------------------------------------------------------------- patch

    def patch(self, res, namespace, name, content_type, raw, query, manager,
              dry_run=False):
        """Returns (object, http_code)."""
        media = content_type.split(";", 1)[0].strip()
        if media == APPLY:
            return self.apply(res, namespace, name, raw, query, dry_run)
        if media not in (STRATEGIC, MERGE, JSON_PATCH):
            raise errors.unsupported_media_type()
        if "force" in query:
            raise errors.invalid_patch_options([FieldError(
                "Forbidden", "force", None,
                "may not be specified for non-apply patch")])
        patch = parse_json(raw)
        with self.store.lock:
            live = self.get(res, namespace, name)
            new = self._patched(live, media, patch)
            if get_path(new, ("metadata", "name")) != name:
                raise errors.invalid(res, name, [FieldError(
                    "Invalid", "metadata.name",
                    get_path(new, ("metadata", "name")),
                    "field is immutable")])
            return self._replace(res, name, live, new, manager, dry_run), 200

    @staticmethod
    def _patched(live, media, patch):
        if media == JSON_PATCH:
            try:
                return json_patch(live, patch)
            except PatchError as err:
                raise errors.ApiError(422, "Invalid", str(err)) from None
        if not isinstance(patch, dict):
            raise errors.bad_request("error decoding patch: the patch is not "
                                     "a JSON object")
        if media == MERGE:
            return json_merge(live, patch)
        return strategic_merge(live, patch)

    # ------------------------------------------------------------- apply

    def apply(self, res, namespace, name, raw, query, dry_run=False):
        manager = query.get("fieldManager", "")
        if not manager:
            raise errors.invalid_patch_options([FieldError(
                "Required", "fieldManager", None,
                "is required for apply patch")])
        force = query.get("force", "").lower() in ("true", "1")
        config = self._apply_config(res, namespace, name, raw)
        paths = set(leaf_paths(clean_apply_config(config)))
        paths.discard(())
        with self.store.lock:
            live = self.store.get(res, namespace, name)
            if live is None:
                return self._apply_create(res, namespace, config, manager,
                                          paths, dry_run), 201
            self._check_preconditions(res, name, live,
                                      config.get("metadata") or {})
            new, owners = self._apply_merge(res, live, config, manager,
                                            paths, force)
            new = self._prepare_update(res, live, new)
            stored, _ = self._finish(res, live, new, owners, dry_run)
            return stored, 200

    @staticmethod
    def _apply_config(res, namespace, name, raw):
        try:
            config = yaml.safe_load(raw or b"")
        except yaml.YAMLError as err:
            raise errors.bad_request(f"error decoding YAML: {err}") from None
        if not isinstance(config, dict):
            raise errors.bad_request(
                "error decoding YAML: json: cannot unmarshal into Go value of "
                "type map[string]interface {}")
        metadata = config.get("metadata") or {}
        if metadata.get("managedFields") is not None:
            raise errors.bad_request("metadata.managedFields must be nil")
        if config.get("apiVersion") != res.group_version:
            raise errors.bad_request(
                f"Incorrect version specified in apply patch. Specified patch "
                f"version: {config.get('apiVersion', '')}, expected: "
                f"{res.group_version}")
        if config.get("kind") != res.kind:
            kind = config.get("kind", "")
            raise errors.bad_request(
                f"failed to create typed patch object ({res.group_version}, "
                f"Kind={kind}): no corresponding type for "
                f"{res.group_version}, Kind={kind}")
        if metadata.get("name") != name:
            raise errors.bad_request(
                f"the name of the object ({metadata.get('name') or ''}) does "
                f"not match the name on the URL ({name})")
        body_ns = metadata.get("namespace")
        if res.namespaced and body_ns and body_ns != namespace:
            raise errors.bad_request(
                f"the namespace of the object ({body_ns}) does not match the "
                f"namespace on the request ({namespace})")
        return config

    def _apply_create(self, res, namespace, config, manager, paths, dry_run):
        self._check_namespace(res, namespace, config["metadata"]["name"])
        body = {"metadata": {"name": config["metadata"]["name"]}}
        apply_merge(body, clean_apply_config(config))
        obj = self._prepare_new(res, namespace, body)
        owners = Ownership()
        owners.take(manager, "Apply", paths)
        stored, _ = self._finish(res, None, obj, owners, dry_run)
        return stored

    def _apply_merge(self, res, live, config, manager, paths, force):
        me = (manager, "Apply")
        key = self.store.key(res, live["metadata"].get("namespace"),
                             live["metadata"]["name"])
        owners = self.store.owners.get(key, Ownership()).copy()
        cleaned = clean_apply_config(config)
        # Values are compared after defaulting, as the real server compares
        # typed fields: a list the config gives without the defaults the
        # server added is still the same value.
        merged = copy.deepcopy(live)
        apply_merge(merged, cleaned)
        default_object(res.kind, merged)
        clashes = set()  # ((manager, operation), path) owned elsewhere
        for other, owned in owners.fields.items():
            if other == me:
                continue
            for path in paths:
                if get_path(live, path, MISSING) == get_path(merged, path,
                                                             MISSING):
                    continue  # the same value: shared ownership, no conflict
                clashes.update((other, q) for q in owned if overlaps(path, q))
        if clashes and not force:
            raise errors.apply_conflict(sorted(
                (manager_label(m, op, res), format_path(q))
                for (m, op), q in clashes))
        for other, path in clashes:  # force: the fields change hands
            owners.fields[other].discard(path)
            if not owners.fields[other]:
                del owners.fields[other]
        new = copy.deepcopy(live)
        apply_merge(new, cleaned)
        for path in owners.fields.get(me, set()) - paths:
            if not owners.owned_by_others(me, path):
                delete_path(new, path)
        owners.fields[me] = set(paths)
        if not paths:
            del owners.fields[me]
        return new, owners

    # ------------------------------------------------------------ delete

    def delete(self, res, namespace, name, options, dry_run=False):
        with self.store.lock:
            live = self.get(res, namespace, name)
            self._check_preconditions(res, name, live,
                                      options.get("preconditions") or {})
            if res.kind == "Namespace" and name in PROTECTED_NAMESPACES:
                raise errors.forbidden(res, name,
                                       "this namespace may not be deleted")
            if dry_run:
                return live
            if live["metadata"].get("deletionTimestamp"):
                return live
            grace = options.get("gracePeriodSeconds")
            if self.graceful_delete(res, live, grace):
                live["metadata"]["deletionTimestamp"] = now_iso()
                live["metadata"]["deletionGracePeriodSeconds"] = (
                    30 if grace is None else grace)
                if res.kind == "Namespace":
                    live.setdefault("status", {})["phase"] = "Terminating"
                return self.store.commit(res, live)
            policy = options.get("propagationPolicy") or (
                "Orphan" if options.get("orphanDependents") else "Background")
            if policy == "Orphan":
                self._orphan_dependents(live)
            return self.store.remove(res, live)

    def _orphan_dependents(self, owner):
        uid = owner["metadata"]["uid"]
        for res in (PODS,):
            for obj in self.store.list(res):
                refs = obj["metadata"].get("ownerReferences", [])
                if any(r.get("uid") == uid for r in refs):
                    obj["metadata"]["ownerReferences"] = [
                        r for r in refs if r.get("uid") != uid]
                    if not obj["metadata"]["ownerReferences"]:
                        del obj["metadata"]["ownerReferences"]
                    self.store.commit(res, obj)

    def delete_collection(self, res, namespace, label_req, field_req, options,
                          dry_run=False):
        with self.store.lock:
            items, rv = self.list(res, namespace, label_req, field_req)
            deleted = [self.delete(res, o["metadata"].get("namespace"),
                                   o["metadata"]["name"], options, dry_run)
                       for o in items]
            return deleted, str(self.store.rv)

    # ---------------------------------------------------- node model use

    def save(self, res, obj):
        """A controller's write of an object it read under the lock: stored
        only when something changed, without touching field ownership."""
        with self.store.lock:
            live = self.store.get(res, obj["metadata"].get("namespace"),
                                  obj["metadata"]["name"])
            if live is None or live == obj:
                return live
            return self.store.commit(res, obj)

    def remove(self, res, obj):
        return self.store.remove(res, obj)

