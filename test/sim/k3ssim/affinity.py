"""Which nodes a pod spec selects: nodeSelector and required node affinity,
as k8s.io/component-helpers/scheduling/corev1/nodeaffinity evaluates them
(GetRequiredNodeAffinity(pod).Match(node)), used by the scheduler and by
the DaemonSet controller (pkg/controller/daemon NodeShouldRunDaemonPod).
Taints are not modelled: the simulated nodes have none."""

from .objects import get_path

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _expression_matches(expr, labels):
    """nodeSelectorRequirementsAsSelector: In, NotIn, Exists,
    DoesNotExist, Gt, Lt (Gt/Lt compare integers; a non-integer label
    does not match)."""
    key, op = expr.get("key"), expr.get("operator")
    values = expr.get("values") or []
    present = key in labels
    value = labels.get(key)
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        try:
            have, want = int(value), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _field_matches(expr, node):
    """matchFields: only metadata.name, with In or NotIn."""
    if expr.get("key") != "metadata.name":
        return False
    name = node["metadata"]["name"]
    values = expr.get("values") or []
    if expr.get("operator") == "In":
        return name in values
    if expr.get("operator") == "NotIn":
        return name not in values
    return False


def _term_matches(term, node):
    """A term matches when all its requirements do; an empty term matches
    no node (nodeaffinity.NodeSelector: "an empty term selects nothing")."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    labels = node["metadata"].get("labels") or {}
    return all(_expression_matches(e, labels) for e in expressions) and \
        all(_field_matches(f, node) for f in fields)


def node_matches(pod_spec, node):
    """nodeSelector (every key equal) and, when present, any one of the
    required nodeSelectorTerms."""
    labels = node["metadata"].get("labels") or {}
    selector = pod_spec.get("nodeSelector") or {}
    if not all(labels.get(k) == v for k, v in selector.items()):
        return False
    required = get_path(pod_spec, ("affinity", "nodeAffinity", REQUIRED))
    if required is None:
        return True
    return any(_term_matches(t, node)
               for t in required.get("nodeSelectorTerms") or [])


def target_node(pod):
    """pkg/controller/daemon/util GetTargetNodeName: spec.nodeName, or the
    node the DaemonSet controller's matchFields affinity names."""
    spec = pod.get("spec", {})
    if spec.get("nodeName"):
        return spec["nodeName"]
    terms = get_path(spec, ("affinity", "nodeAffinity", REQUIRED,
                            "nodeSelectorTerms"), []) or []
    for term in terms:
        for expr in term.get("matchFields") or []:
            if expr.get("key") == "metadata.name" and \
                    expr.get("operator") == "In" and \
                    len(expr.get("values") or []) == 1:
                return expr["values"][0]
    return None


def with_node_name_affinity(affinity, node_name):
    """pkg/controller/daemon/util ReplaceDaemonSetPodNodeNameNodeAffinity:
    the required terms become one matchFields term for the node; the rest
    of the affinity stays."""
    affinity = dict(affinity or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    node_affinity[REQUIRED] = {"nodeSelectorTerms": [{"matchFields": [{
        "key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
    affinity["nodeAffinity"] = node_affinity
    return affinity
