"""Kubernetes Status errors, shaped and worded as kube-apiserver writes them.

Clients (gpunode, kubectl) read `reason`, `code`, `details.causes` and the
message, so each constructor here copies the real server's wording: a test
that passes against the simulator must pass against k3s.
"""

import json


class ApiError(Exception):
    """An error answer: an HTTP code and a v1 Status body."""

    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self):
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(res, name, kind=None):
    # The real server puts the *resource* (plural) into details.kind for
    # NotFound/AlreadyExists/Conflict and the Kind only for Invalid.
    details = {"name": name} if name else {}  # StatusDetails: omitempty
    if res.group:
        details["group"] = res.group
    details["kind"] = kind or res.plural
    return details


def not_found(res, name):
    return ApiError(404, "NotFound",
                    f'{res.group_resource} "{name}" not found',
                    _details(res, name))


def namespace_not_found(namespace):
    return ApiError(404, "NotFound", f'namespaces "{namespace}" not found',
                    {"name": namespace, "kind": "namespaces"})


def already_exists(res, name):
    return ApiError(409, "AlreadyExists",
                    f'{res.group_resource} "{name}" already exists',
                    _details(res, name))


def conflict(res, name, why):
    return ApiError(409, "Conflict",
                    f'Operation cannot be fulfilled on {res.group_resource} '
                    f'"{name}": {why}', _details(res, name))


def modified_conflict(res, name):
    return conflict(res, name, "the object has been modified; please apply "
                    "your changes to the latest version and try again")


def forbidden(res, name, why):
    # apierrors.NewForbidden: without a name (a list), no quoted name.
    subject = f'{res.group_resource} "{name}"' if name else res.group_resource
    return ApiError(403, "Forbidden", f"{subject} is forbidden: {why}",
                    _details(res, name))


def bad_request(message):
    return ApiError(400, "BadRequest", message)


def unauthorized():
    return ApiError(401, "Unauthorized", "Unauthorized")


def path_not_found():
    return ApiError(404, "NotFound",
                    "the server could not find the requested resource", {})


def method_not_allowed():
    return ApiError(405, "MethodNotAllowed", "the server does not allow this "
                    "method on the requested resource", {})


def not_acceptable():
    return ApiError(406, "NotAcceptable", "only the following media types are "
                    "accepted: application/json, application/yaml, "
                    "application/vnd.kubernetes.protobuf")


def unsupported_media_type():
    return ApiError(415, "UnsupportedMediaType",
                    "the body of the request was in an unknown format - "
                    "accepted media types include: "
                    "application/json-patch+json, "
                    "application/merge-patch+json, "
                    "application/apply-patch+yaml, "
                    "application/strategic-merge-patch+json", {})


def service_unavailable():
    return ApiError(503, "ServiceUnavailable",
                    "the server is currently unable to handle the request", {})


def too_many_requests(retry_after):
    return ApiError(429, "TooManyRequests",
                    "Too many requests, please try again later.",
                    {"retryAfterSeconds": retry_after},
                    {"Retry-After": str(retry_after)})


def expired(requested, oldest):
    return ApiError(410, "Expired",
                    f"too old resource version: {requested} ({oldest})")


def internal(message):
    return ApiError(500, "InternalError",
                    f"Internal error occurred: {message}",
                    {"causes": [{"message": message}]})


class RawValue(str):
    """A value that field errors print as it is (Go's %#v of a struct)."""


def go_value(value):
    """A value as Go's %#v-ish rendering in field errors prints it."""
    if isinstance(value, RawValue):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        inner = ", ".join(f"{json.dumps(k)}:{json.dumps(v)}"
                          for k, v in sorted(value.items()))
        return "map[string]string{" + inner + "}"
    if value is None:
        return "null"
    return str(value)


class FieldError:
    """One entry of a field.ErrorList (Invalid, Required, Forbidden, ...)."""

    REASONS = {
        "Invalid": "FieldValueInvalid",
        "Required": "FieldValueRequired",
        "Forbidden": "FieldValueForbidden",
        "NotSupported": "FieldValueNotSupported",
        "Duplicate": "FieldValueDuplicate",
    }

    def __init__(self, kind, field, value=None, detail=""):
        self.kind = kind
        self.field = field
        self.value = value
        self.detail = detail

    def body(self):
        if self.kind == "Invalid":
            text = f"Invalid value: {go_value(self.value)}"
        elif self.kind == "NotSupported":
            text = f"Unsupported value: {go_value(self.value)}"
        elif self.kind == "Duplicate":
            text = f"Duplicate value: {go_value(self.value)}"
        else:
            text = (f"{self.kind} value" if self.kind == "Required"
                    else self.kind)
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self):
        return f"{self.field}: {self.body()}"

    def cause(self):
        return {"reason": self.REASONS[self.kind], "message": self.body(),
                "field": self.field}


def invalid(res, name, errors, kind_qualified=None):
    """422 Invalid: `<Kind>.<group> "<name>" is invalid: <errors>`."""
    listed = (str(errors[0]) if len(errors) == 1
              else "[" + ", ".join(str(e) for e in errors) + "]")
    details = {"name": name}
    if res is not None and res.group:
        details["group"] = res.group
    details["kind"] = res.kind if res is not None else ""
    details["causes"] = [e.cause() for e in errors]
    prefix = kind_qualified or res.group_kind
    return ApiError(422, "Invalid", f'{prefix} "{name}" is invalid: {listed}',
                    details)


def invalid_patch_options(errors):
    """422 for PatchOptions (e.g. an apply without fieldManager)."""
    listed = (str(errors[0]) if len(errors) == 1
              else "[" + ", ".join(str(e) for e in errors) + "]")
    return ApiError(422, "Invalid",
                    f'PatchOptions.meta.k8s.io "" is invalid: {listed}',
                    {"group": "meta.k8s.io", "kind": "PatchOptions",
                     "causes": [e.cause() for e in errors]})


def apply_conflict(conflicts):
    """409 from server-side apply; `conflicts` is [(manager_label, path)]."""
    causes = [{"reason": "FieldManagerConflict",
               "message": f"conflict with {manager}", "field": path}
              for manager, path in conflicts]
    if len(conflicts) == 1:
        manager, path = conflicts[0]
        message = (f"Apply failed with 1 conflict: conflict with {manager}: "
                   f"{path}")
    else:
        by_manager = {}
        for manager, path in conflicts:
            by_manager.setdefault(manager, []).append(path)
        lines = []
        for manager in sorted(by_manager):
            lines.append(f"conflicts with {manager}:")
            lines.extend(f"- {path}" for path in by_manager[manager])
        message = (f"Apply failed with {len(conflicts)} conflicts: "
                   + "\n".join(lines))
    return ApiError(409, "Conflict", message, {"causes": causes})
