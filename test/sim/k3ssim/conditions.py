"""Status conditions as the kubelet and the scheduler set them."""

from .registry import now_iso


def condition(conditions, kind):
    return next((c for c in conditions or [] if c.get("type") == kind), None)


def set_condition(conditions, kind, status, now, reason=None, message=None):
    existing = condition(conditions, kind)
    if existing is None:
        existing = {"type": kind}
        conditions.append(existing)
    if existing.get("status") != status:
        existing["lastTransitionTime"] = now_iso(now)
    existing["status"] = status
    existing["lastProbeTime"] = None
    for key, value in (("reason", reason), ("message", message)):
        if value:
            existing[key] = value
        else:
            existing.pop(key, None)
