"""Who is asking and what they may do: kube-apiserver's x509 authenticator,
the Node authorizer (with AuthorizeNodeWithSelectors, GA since 1.34) and
RBAC's static rules for nodes, and the NodeRestriction admission plugin.

k3s starts kube-apiserver with --authorization-mode=Node,RBAC and
--enable-admission-plugins=NodeRestriction. `system:masters` is allowed
everything (the RBAC authorizer's superuser group); the kubelets'
`system:nodes` group has no RBAC binding since 1.8, so the Node authorizer
alone decides for them. Any other user has no binding here: denied.
"""

import threading
from dataclasses import dataclass, field

from . import apierrors as errors

MASTERS = "system:masters"
NODES_GROUP = "system:nodes"
NODE_USER_PREFIX = "system:node:"


@dataclass
class User:
    name: str
    groups: list = field(default_factory=list)

    def node_name(self):
        """pkg/auth/nodeidentifier/default.go NodeIdentity: (name, is_node);
        a node is a user named system:node:NAME in group system:nodes."""
        if NODES_GROUP not in self.groups or \
                not self.name.startswith(NODE_USER_PREFIX):
            return None, False
        return self.name[len(NODE_USER_PREFIX):], True


# The user of the request this handler thread serves; None for the
# simulator's own controllers (they write as the system, unchecked).
_current = threading.local()


def current_user():
    return getattr(_current, "user", None)


def set_current_user(user):
    _current.user = user


def user_of(cert):
    """k8s.io/apiserver/pkg/authentication/request/x509
    CommonNameUserConversion: the user is the subject's CN, the groups its
    O values."""
    name, groups = "", []
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                name = value
            elif key == "organizationName":
                groups.append(value)
    return User(name, groups + ["system:authenticated"])


@dataclass
class Attributes:
    """authorizer.Attributes of a resource request, as
    k8s.io/apiserver/pkg/endpoints/request/requestinfo.go fills them."""
    user: User
    verb: str
    res: object  # resources.Resource
    namespace: str
    name: str
    subresource: str
    field_selector: list  # [(field, negate, value)]


# plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go NodeRules, the
# rules for resources the Node authorizer does not subdivide (the ones the
# simulator serves): (group, resource, verbs).
NODE_RULES = (
    ("", "events", ("create", "update", "patch")),
    ("", "services", ("get", "list", "watch")),
    ("", "endpoints", ("get",)),
    ("node.k8s.io", "runtimeclasses", ("get", "list", "watch")),
)


def _no_opinion(reason=""):
    return False, reason


class NodeAuthorizer:
    """plugin/pkg/auth/authorizer/node/node_authorizer.go. The graph is
    read from the store: a pod bound to the node links the ConfigMaps and
    Secrets it references (graph_populator.go, graph.go AddPod)."""

    def __init__(self, store, by_kind):
        self.store = store
        self.pods = by_kind["Pod"]

    def authorize(self, attrs):
        """(allowed, reason) for a node user; Authorize."""
        node_name, _ = attrs.user.node_name()
        if not node_name:
            return _no_opinion(f'unknown node for user "{attrs.user.name}"')
        group_resource = (attrs.res.group, attrs.res.plural)
        if group_resource in (("", "secrets"), ("", "configmaps")):
            return self._read_namespaced_object(node_name, attrs)
        if group_resource == ("", "nodes"):
            return self._node(node_name, attrs)
        if group_resource == ("", "pods"):
            return self._pod(node_name, attrs)
        for group, resource, verbs in NODE_RULES:  # rbac.RulesAllow
            if group_resource == (group, resource) and \
                    not attrs.subresource and attrs.verb in verbs:
                return True, ""
        return _no_opinion()

    def _read_namespaced_object(self, node_name, attrs):
        """authorizeReadNamespacedObject."""
        if attrs.verb not in ("get", "list", "watch"):
            return _no_opinion("can only read resources of this type")
        if attrs.subresource:
            return _no_opinion("cannot read subresource")
        if not attrs.namespace:
            return _no_opinion("can only read namespaced object of this type")
        return self._path(node_name, attrs)

    def _path(self, node_name, attrs):
        """authorize: a path in the graph from the object to the node."""
        if not attrs.name:
            return _no_opinion("No Object name found")
        if self._related(node_name, attrs):
            return True, ""
        return _no_opinion(f"no relationship found between node "
                           f"'{node_name}' and this object")

    def _related(self, node_name, attrs):
        with self.store.lock:
            pods = [p for p in self.store.list(self.pods, attrs.namespace)
                    if p.get("spec", {}).get("nodeName") == node_name]
        if attrs.res.plural == "pods":
            return any(p["metadata"]["name"] == attrs.name for p in pods)
        kind = "configMap" if attrs.res.plural == "configmaps" else "secret"
        return any(attrs.name in pod_references(p, kind) for p in pods)

    @staticmethod
    def _node(node_name, attrs):
        """authorizeNode."""
        if attrs.subresource == "":
            if attrs.verb in ("create", "update", "patch"):
                return True, ""  # NodeRestriction limits it to its own
            if attrs.verb in ("get", "list", "watch"):
                if attrs.name == node_name:
                    return True, ""
                if attrs.name == "":
                    return _no_opinion(f"node '{node_name}' cannot read all "
                                       f"nodes, only its own Node object")
                return _no_opinion(f"node '{node_name}' cannot read "
                                   f"'{attrs.name}', only its own Node "
                                   f"object")
        elif attrs.subresource == "status" and \
                attrs.verb in ("update", "patch"):
            return True, ""
        return _no_opinion()

    def _pod(self, node_name, attrs):
        """authorizePod."""
        if attrs.subresource == "":
            if attrs.verb == "get":
                return self._path(node_name, attrs)  # authorizeGet
            if attrs.verb in ("list", "watch"):
                for fld, negate, value in attrs.field_selector:
                    if fld == "spec.nodeName" and not negate and \
                            value == node_name:
                        return True, ""
                if attrs.name:
                    return self._path(node_name, attrs)
                return _no_opinion("can only list/watch pods with "
                                   "spec.nodeName field selector")
            if attrs.verb in ("create", "delete"):
                return True, ""  # mirror pods, limited by NodeRestriction
        elif attrs.subresource == "status" and \
                attrs.verb in ("update", "patch"):
            return True, ""
        elif attrs.subresource == "eviction" and attrs.verb == "create":
            return True, ""
        return _no_opinion()


def pod_references(pod, kind):
    """Names of the ConfigMaps (kind "configMap") or Secrets ("secret") a
    pod references: volumes (also projected), env, envFrom and, for secrets,
    imagePullSecrets (plugin/pkg/auth/authorizer/node/graph.go AddPod via
    pkg/api/v1/pod VisitPodConfigmapNames / VisitPodSecretNames)."""
    spec = pod.get("spec", {})
    names = set()
    name_key = "name" if kind == "configMap" else "secretName"
    for volume in spec.get("volumes") or []:
        source = volume.get(kind)
        if source:
            names.add(source.get(name_key))
        for projected in (volume.get("projected") or {}).get("sources") or []:
            if projected.get(kind):
                names.add(projected[kind].get("name"))
    containers = (spec.get("containers") or []) + \
        (spec.get("initContainers") or [])
    for container in containers:
        for env in container.get("env") or []:
            ref = (env.get("valueFrom") or {}).get(kind + "KeyRef")
            if ref:
                names.add(ref.get("name"))
        for env_from in container.get("envFrom") or []:
            ref = env_from.get(kind + "Ref")
            if ref:
                names.add(ref.get("name"))
    if kind == "secret":
        for ref in spec.get("imagePullSecrets") or []:
            names.add(ref.get("name"))
    names.discard(None)
    return names


def _sanitize(text):
    # responsewriters.sanitizer: the message is HTML-escaped.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def forbidden(attrs, reason):
    """k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go
    Forbidden + forbiddenMessage, then apierrors.NewForbidden."""
    resource = attrs.res.plural
    if attrs.subresource:
        resource += "/" + attrs.subresource
    scope = (f'in the namespace "{attrs.namespace}"' if attrs.namespace
             else "at the cluster scope")
    message = _sanitize(f'User "{attrs.user.name}" cannot {attrs.verb} '
                        f'resource "{resource}" in API group '
                        f'"{attrs.res.group}" {scope}')
    if reason:
        message += ": " + reason
    return errors.forbidden(attrs.res, attrs.name, message)


class Authorizer:
    """The union of Node and RBAC, as k3s configures kube-apiserver."""

    def __init__(self, store, by_kind):
        self.node = NodeAuthorizer(store, by_kind)

    def check(self, attrs):
        """Raises the 403 Status when the request is not allowed."""
        if MASTERS in attrs.user.groups:
            return
        _, is_node = attrs.user.node_name()
        allowed, reason = (self.node.authorize(attrs) if is_node
                           else (False, ""))
        if not allowed:
            raise forbidden(attrs, reason)


# ---------------------------------------------------- NodeRestriction

# pkg/kubelet/apis/well_known_labels.go: the labels a kubelet may set.
KUBELET_LABELS = {
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type",
    "kubernetes.io/os", "kubernetes.io/arch",
    "beta.kubernetes.io/os", "beta.kubernetes.io/arch",
}
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
NODE_RESTRICTION_NAMESPACE = "node-restriction.kubernetes.io"


def _label_namespace(key):
    return key.split("/", 1)[0] if "/" in key else ""


def _under(namespace, domain):
    return namespace == domain or namespace.endswith("." + domain)


def is_kubelet_label(key):
    """well_known_labels.go IsKubeletLabel."""
    if key in KUBELET_LABELS:
        return True
    namespace = _label_namespace(key)
    return any(_under(namespace, d) for d in KUBELET_LABEL_NAMESPACES)


def forbidden_labels(labels, old_labels):
    """noderestriction/admission.go getModifiedLabels + getForbiddenLabels,
    sorted as sets.String.List()."""
    modified = {k for k in set(labels) | set(old_labels)
                if labels.get(k) != old_labels.get(k)}
    out = set()
    for key in modified:
        namespace = _label_namespace(key)
        if _under(namespace, NODE_RESTRICTION_NAMESPACE):
            out.add(key)
        kubernetes = _under(namespace, "kubernetes.io") or \
            _under(namespace, "k8s.io")
        if kubernetes and not is_kubelet_label(key):
            out.add(key)
    return sorted(out)


def admit_node_restriction(res, live, new):
    """plugin/pkg/admission/noderestriction/admission.go Admit (nodes and
    pods) for the request's user; raises the admission 403."""
    user = current_user()
    node_name, is_node = user.node_name() if user else (None, False)
    if not is_node:
        return
    name = new["metadata"]["name"]
    if not node_name:
        raise errors.forbidden(res, name, f'could not determine node from '
                               f'user "{user.name}"')
    if res.kind == "Node":
        _admit_node(res, node_name, live, new)
    elif res.kind == "Pod":
        _admit_pod(res, node_name, live, new)


def _admit_node(res, node_name, live, new):
    """admitNode."""
    name = new["metadata"]["name"]
    if name != node_name:
        raise errors.forbidden(res, name, f'node "{node_name}" is not allowed '
                               f'to modify node "{name}"')
    labels = new["metadata"].get("labels") or {}
    if live is None:
        bad = forbidden_labels(labels, {})
        if bad:
            raise errors.forbidden(
                res, name, f'node "{node_name}" is not allowed to set the '
                f'following labels: {", ".join(bad)}')
        return
    if (new.get("spec") or {}).get("taints") != \
            (live.get("spec") or {}).get("taints"):
        raise errors.forbidden(res, name, f'node "{node_name}" is not allowed '
                               f'to modify taints')
    bad = forbidden_labels(labels, live["metadata"].get("labels") or {})
    if bad:
        raise errors.forbidden(res, name, f'is not allowed to modify labels: '
                               f'{", ".join(bad)}')


def _admit_pod(res, node_name, live, new):
    """admitPodCreate: a node creates only mirror pods. (Its updates of
    pods are status updates, a subresource the simulator does not serve;
    the Node authorizer refuses updates of the pod itself.)"""
    if live is None and "kubernetes.io/config.mirror" not in (
            new["metadata"].get("annotations") or {}):
        raise errors.forbidden(res, new["metadata"]["name"], f'pod does not '
                               f'have "kubernetes.io/config.mirror" '
                               f'annotation, node "{node_name}" can only '
                               f'create mirror pods')
