"""Plain-data helpers for API objects: field paths, selectors, the patch
formats kube-apiserver accepts, defaulting and the validation rules the
installer can run into. Objects are the JSON dicts clients send and get.
"""

import copy
import re

from .apierrors import FieldError, RawValue, bad_request

MISSING = object()

# ------------------------------------------------------------- field paths


def get_path(obj, path, default=None):
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return default
        obj = obj[key]
    return obj


def set_path(obj, path, value):
    for key in path[:-1]:
        if not isinstance(obj.get(key), dict):
            obj[key] = {}
        obj = obj[key]
    obj[path[-1]] = value


def delete_path(obj, path):
    """Removes a field and then every map left empty on the way up
    (as server-side apply does when it drops a manager's last field), but
    never a top-level field such as metadata or spec."""
    parents = []
    node = obj
    for key in path[:-1]:
        if not isinstance(node, dict) or key not in node:
            return
        parents.append((node, key))
        node = node[key]
    if isinstance(node, dict):
        node.pop(path[-1], None)
    while len(parents) > 1:
        parent, key = parents.pop()
        if parent[key] == {}:
            del parent[key]
        else:
            break


def leaf_paths(obj, prefix=()):
    """Every leaf of an object: scalars, lists (atomic here) and empty maps."""
    if isinstance(obj, dict) and obj:
        for key, value in obj.items():
            yield from leaf_paths(value, prefix + (key,))
    else:
        yield prefix


def changed_paths(old, new, prefix=()):
    """Leaf paths whose value differs between two objects."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old.keys() | new.keys():
            yield from changed_paths(old.get(key, MISSING),
                                     new.get(key, MISSING), prefix + (key,))
    elif old is MISSING and isinstance(new, dict) and new:
        yield from changed_paths({}, new, prefix)
    elif new is MISSING and isinstance(old, dict) and old:
        yield from changed_paths(old, {}, prefix)
    elif old != new:
        yield prefix


def overlaps(a, b):
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def format_path(path):
    return "".join(f".{key}" for key in path)


# --------------------------------------------------------------- selectors


def _split_terms(text):
    terms, depth, current = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        terms.append(current)
    return [t.strip() for t in terms if t.strip()]


def parse_label_selector(text):
    """[(key, op, values)] for =, ==, !=, in, notin, exists, !exists."""
    requirements = []
    for term in _split_terms(text or ""):
        match = re.fullmatch(r"([^\s!=]+)\s+(in|notin)\s+\((.*)\)", term)
        if match:
            values = {v.strip() for v in match.group(3).split(",")}
            requirements.append((match.group(1), match.group(2), values))
        elif term.startswith("!"):
            requirements.append((term[1:].strip(), "!exists", set()))
        elif "!=" in term:
            key, value = term.split("!=", 1)
            requirements.append((key.strip(), "!=", {value.strip()}))
        elif "=" in term:
            key, value = term.replace("==", "=", 1).split("=", 1)
            requirements.append((key.strip(), "=", {value.strip()}))
        elif re.fullmatch(r"[A-Za-z0-9./_-]+", term):
            requirements.append((term, "exists", set()))
        else:
            raise bad_request(f"unable to parse requirement: found '{term}', "
                              f"expected: in, notin, =, ==, !=, gt, lt")
    return requirements


def labels_match(requirements, labels):
    labels = labels or {}
    for key, op, values in requirements:
        present = key in labels
        value = labels.get(key)
        if op in ("=", "in") and (not present or value not in values):
            return False
        if op in ("!=", "notin") and present and value in values:
            return False
        if op == "exists" and not present:
            return False
        if op == "!exists" and present:
            return False
    return True


def parse_field_selector(text, res):
    """[(field, negate, value)]; unsupported fields are a 400 as on k3s."""
    requirements = []
    for term in _split_terms(text or ""):
        if "!=" in term:
            field, value = term.split("!=", 1)
            negate = True
        elif "=" in term:
            field, value = term.replace("==", "=", 1).split("=", 1)
            negate = False
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand "
                              f"'{term}'")
        field = field.strip()
        if field not in ("metadata.name", "metadata.namespace") + \
                res.field_labels:
            raise bad_request(
                f'Unable to find "{res.group}/{res.version}, Resource='
                f'{res.plural}" that match label selector "", field selector '
                f'"{text}": field label not supported: {field}')
        requirements.append((field, negate, value.strip()))
    return requirements


def field_value(obj, field):
    if field == "source":
        value = get_path(obj, ("source", "component"))
    else:
        value = get_path(obj, tuple(field.split(".")))
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def fields_match(requirements, obj):
    for field, negate, value in requirements:
        if (field_value(obj, field) == value) == negate:
            return False
    return True


# ----------------------------------------------------------------- patches

# patchMergeKey of the list fields the Kubernetes types declare; lists not
# named here are replaced whole by a strategic merge patch.
MERGE_KEYS = {
    "containers": "name", "initContainers": "name",
    "ephemeralContainers": "name", "volumes": "name", "env": "name",
    "volumeMounts": "mountPath", "ports": "containerPort",
    "imagePullSecrets": "name", "ownerReferences": "uid",
    "conditions": "type", "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
}


class PatchError(Exception):
    pass


def apply_merge(live, config):
    """Server-side apply's merge: maps merge, lists and scalars replace."""
    for key, value in config.items():
        if isinstance(value, dict) and isinstance(live.get(key), dict):
            apply_merge(live[key], value)
        elif value is None:
            live.pop(key, None)
        else:
            live[key] = copy.deepcopy(value)


def json_merge(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge(result.get(key), value)
    return result


def _merge_keyed_list(current, patch, merge_key):
    result = copy.deepcopy(current) if isinstance(current, list) else []
    for item in patch:
        if not isinstance(item, dict):
            result.append(copy.deepcopy(item))
            continue
        directive = item.get("$patch")
        if directive == "replace":
            return [strip_directives(i) for i in patch if isinstance(i, dict)
                    and i.get("$patch") != "replace"]
        key = item.get(merge_key)
        index = next((i for i, existing in enumerate(result)
                      if isinstance(existing, dict)
                      and existing.get(merge_key) == key), None)
        if directive == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append(strip_directives(item))
        else:
            result[index] = strategic_merge(result[index], item)
    return result


def strip_directives(value):
    if isinstance(value, dict):
        return {k: strip_directives(v) for k, v in value.items()
                if not k.startswith("$")}
    if isinstance(value, list):
        return [strip_directives(v) for v in value]
    return value


def strategic_merge(target, patch):
    """A strategic merge patch with the types' list merge keys (MERGE_KEYS);
    $setElementOrder and $retainKeys are accepted and ignored."""
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    if patch.get("$patch") == "replace":
        return strip_directives(patch)
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            result[name] = [v for v in result.get(name, []) if v not in value]
        elif key.startswith("$"):
            continue
        elif value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            if value.get("$patch") == "delete":
                result.pop(key, None)
            else:
                result[key] = strategic_merge(result.get(key), value)
        elif isinstance(value, list) and key in MERGE_KEYS:
            result[key] = _merge_keyed_list(result.get(key), value,
                                            MERGE_KEYS[key])
        else:
            result[key] = strip_directives(value)
    return result


def _pointer(text):
    if text == "":
        return []
    if not text.startswith("/"):
        raise PatchError(f"JSON pointer must be empty or start with a \"/\": "
                         f"{text}")
    return [p.replace("~1", "/").replace("~0", "~")
            for p in text[1:].split("/")]


def _walk(doc, parts):
    for part in parts:
        if isinstance(doc, list):
            doc = doc[int(part)]
        elif isinstance(doc, dict) and part in doc:
            doc = doc[part]
        else:
            raise PatchError("doc is missing path: " + "/" + "/".join(parts))
    return doc


def _add(doc, parts, value):
    parent = _walk(doc, parts[:-1])
    key = parts[-1]
    if isinstance(parent, list):
        index = len(parent) if key == "-" else int(key)
        parent.insert(index, value)
    else:
        parent[key] = value


def _remove(doc, parts):
    parent = _walk(doc, parts[:-1])
    key = parts[-1]
    try:
        if isinstance(parent, list):
            return parent.pop(int(key))
        return parent.pop(key)
    except (KeyError, IndexError, ValueError):
        raise PatchError("Unable to remove nonexistent key: " + key +
                         ": missing value") from None


def json_patch(doc, operations):
    """RFC 6902 JSON patch."""
    doc = copy.deepcopy(doc)
    if not isinstance(operations, list):
        raise PatchError("json: cannot unmarshal object into Go value of type "
                         "jsonpatch.Patch")
    for op in operations:
        kind = op.get("op")
        parts = _pointer(op.get("path", ""))
        try:
            if kind == "add":
                _add(doc, parts, copy.deepcopy(op.get("value")))
            elif kind == "remove":
                _remove(doc, parts)
            elif kind == "replace":
                _remove(doc, parts)
                _add(doc, parts, copy.deepcopy(op.get("value")))
            elif kind in ("move", "copy"):
                source = _pointer(op.get("from", ""))
                value = (_remove(doc, source) if kind == "move"
                         else copy.deepcopy(_walk(doc, source)))
                _add(doc, parts, value)
            elif kind == "test":
                if _walk(doc, parts) != op.get("value"):
                    raise PatchError(f"testing value {op.get('path')} failed")
            else:
                raise PatchError(f"Unexpected kind: {kind}")
        except (IndexError, ValueError, TypeError) as err:
            raise PatchError(str(err)) from None
    return doc


# --------------------------------------------------------------- defaulting


def default_pull_policy(image):
    name = image.split("@", 1)[0]
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else ""
    if "@" in image:
        return "IfNotPresent"
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _default_container(container, is_pod):
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("imagePullPolicy",
                         default_pull_policy(container.get("image", "")))
    resources = container.setdefault("resources", {})
    for port in container.get("ports", []):
        port.setdefault("protocol", "TCP")
    if is_pod and resources.get("limits"):
        # Pods (not templates) get requests copied from limits.
        requests = resources.setdefault("requests", {})
        for name, value in resources["limits"].items():
            requests.setdefault(name, value)


def default_pod_spec(spec, is_pod=False):
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for container in spec.get("containers", []) + spec.get("initContainers",
                                                           []):
        if isinstance(container, dict):
            _default_container(container, is_pod)
    for volume in spec.get("volumes", []):
        if isinstance(volume.get("configMap"), dict):
            volume["configMap"].setdefault("defaultMode", 420)
        if isinstance(volume.get("secret"), dict):
            volume["secret"].setdefault("defaultMode", 420)
        if isinstance(volume.get("hostPath"), dict):
            volume["hostPath"].setdefault("type", "")


PRIORITY_CLASSES = {"system-node-critical": 2000001000,
                    "system-cluster-critical": 2000000000}


def default_object(kind, obj):
    """The defaults the real API adds, so stored objects look like k3s's."""
    spec = obj.get("spec")
    if kind == "Pod" and isinstance(spec, dict):
        default_pod_spec(spec, is_pod=True)
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("priority",
                        PRIORITY_CLASSES.get(spec.get("priorityClassName"), 0))
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    elif kind == "DaemonSet" and isinstance(spec, dict):
        spec.setdefault("revisionHistoryLimit", 10)
        strategy = spec.setdefault("updateStrategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxUnavailable", 1)
            rolling.setdefault("maxSurge", 0)
        template_spec = get_path(spec, ("template", "spec"))
        if isinstance(template_spec, dict):
            default_pod_spec(template_spec)
    elif kind == "Namespace":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["metadata"].setdefault("labels", {})[
            "kubernetes.io/metadata.name"] = obj["metadata"]["name"]


# --------------------------------------------------------------- validation

SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*"
                       r"[a-z0-9])?)*")
LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case "
                 "alphanumeric characters, '-' or '.', and must start and end "
                 "with an alphanumeric character (e.g. 'example.com', regex "
                 "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-"
                 "z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case "
             "alphanumeric characters or '-', and must start and end with an "
             "alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
             "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


def validate_name(kind, name):
    pattern, message = ((LABEL, LABEL_MSG) if kind == "Namespace"
                        else (SUBDOMAIN, SUBDOMAIN_MSG))
    if not name:
        return [FieldError("Required", "metadata.name", None,
                           "name or generateName is required")]
    if len(name) > 253 or not pattern.fullmatch(name):
        return [FieldError("Invalid", "metadata.name", name, message)]
    return []


def _validate_containers(spec, path):
    errors = []
    containers = spec.get("containers")
    if not containers:
        return [FieldError("Required", f"{path}.containers")]
    seen = set()
    for i, container in enumerate(containers):
        where = f"{path}.containers[{i}]"
        name = container.get("name") if isinstance(container, dict) else None
        if not name:
            errors.append(FieldError("Required", f"{where}.name"))
        elif name in seen:
            errors.append(FieldError("Duplicate", f"{where}.name", name))
        seen.add(name)
        if not isinstance(container, dict) or not container.get("image"):
            errors.append(FieldError("Required", f"{where}.image"))
            continue
        errors += _validate_extended_resources(container, where)
    return errors


def _validate_extended_resources(container, where):
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    errors = []
    for name, value in requests.items():
        if "/" in name and not name.startswith("kubernetes.io/") and \
                str(limits.get(name)) != str(value):
            errors.append(FieldError(
                "Invalid", f"{where}.resources.requests", str(value),
                f"must be equal to {name} limit of {limits.get(name, 0)}"))
    return errors


def _validate_runtime_class(obj, old):
    handler = obj.get("handler")
    if not handler:
        return [FieldError("Required", "handler")]
    if not LABEL.fullmatch(handler):
        return [FieldError("Invalid", "handler", handler, LABEL_MSG)]
    if old is not None and old.get("handler") != handler:
        return [FieldError("Invalid", "handler", handler,
                           "field is immutable")]
    return []


def _selector_text(selector):
    labels = ", ".join(f"{json_text(k)}:{json_text(v)}" for k, v in
                       sorted((selector.get("matchLabels") or {}).items()))
    return ("&LabelSelector{MatchLabels:map[string]string{" + labels +
            "},MatchExpressions:[]LabelSelectorRequirement{},}")


def json_text(value):
    return '"' + str(value).replace('"', '\\"') + '"'


def _validate_daemonset(obj, old):
    spec = obj.get("spec") or {}
    errors = []
    selector = spec.get("selector")
    template = spec.get("template") or {}
    labels = get_path(template, ("metadata", "labels"), {}) or {}
    if not selector:
        errors.append(FieldError("Required", "spec.selector"))
    elif any(labels.get(k) != v for k, v in
             (selector.get("matchLabels") or {}).items()):
        errors.append(FieldError("Invalid", "spec.template.metadata.labels",
                                 labels, "`selector` does not match template "
                                 "`labels`"))
    if old is not None and selector != get_path(old, ("spec", "selector")):
        errors.append(FieldError("Invalid", "spec.selector",
                                 RawValue(_selector_text(selector or {})),
                                 "field is immutable"))
    pod_spec = template.get("spec") or {}
    errors += _validate_containers(pod_spec, "spec.template.spec")
    policy = pod_spec.get("restartPolicy", "Always")
    if policy != "Always":
        errors.append(FieldError("NotSupported",
                                 "spec.template.spec.restartPolicy", policy,
                                 'supported values: "Always"'))
    return errors


POD_UPDATE_MSG = ("pod updates may not change fields other than "
                  "`spec.containers[*].image`,`spec.initContainers[*].image`,"
                  "`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
                  "additions to existing tolerations),"
                  "`spec.terminationGracePeriodSeconds` (allow it to be set "
                  "to 1 if it was previously negative)")


def _pod_spec_without_mutables(spec):
    spec = copy.deepcopy(spec or {})
    for container in spec.get("containers", []) + spec.get("initContainers",
                                                           []):
        container.pop("image", None)
    for key in ("activeDeadlineSeconds", "tolerations", "nodeName",
                "terminationGracePeriodSeconds"):
        spec.pop(key, None)
    return spec


def _validate_pod(obj, old):
    spec = obj.get("spec") or {}
    errors = _validate_containers(spec, "spec")
    if old is not None and _pod_spec_without_mutables(spec) != \
            _pod_spec_without_mutables(old.get("spec")):
        errors.append(FieldError("Forbidden", "spec", None, POD_UPDATE_MSG))
    return errors


def validate(kind, obj, old):
    """Field errors for a create (old is None) or an update."""
    errors = []
    if old is None:
        errors += validate_name(kind, obj["metadata"].get("name"))
    if kind == "RuntimeClass":
        errors += _validate_runtime_class(obj, old)
    elif kind == "DaemonSet":
        errors += _validate_daemonset(obj, old)
    elif kind == "Pod":
        errors += _validate_pod(obj, old)
    return errors
