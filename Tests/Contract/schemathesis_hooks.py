"""Schemathesis hooks for ReloadGate's API listener (scripts/check-api-contract).

Every generated call names the test app in its path, and every call of the reload webhook is signed with the app's webhook secret, over the exact bytes sent, as the
gateway requires (`reloadgate-signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">`). The bundle and
the secret come from the environment (RG_CONTRACT_BUNDLE, RG_CONTRACT_SECRET; RG_CONTRACT_DEVICE a registered
device token). RG_CONTRACT_DEBUG names a file to log every call and its answer to.
"""
import hashlib
import hmac
import json
import os
import random
import re
import time

import schemathesis
from jsonschema import Draft202012Validator

BUNDLE = os.environ["RG_CONTRACT_BUNDLE"]
SECRET = os.environ["RG_CONTRACT_SECRET"].encode()
DEVICE = os.environ.get("RG_CONTRACT_DEVICE", "")


@schemathesis.hook
def before_call(context, case, kwargs):
    # A new dict assigned (not the generated one changed in place), so that schemathesis judges the request
    # as sent: a negative path value replaced by a real one makes the case a positive one.
    parameters = dict(case.path_parameters or {})
    if os.environ.get("RG_CONTRACT_DEBUG"):
        with open(os.environ["RG_CONTRACT_DEBUG"], "a") as log:
            log.write(f"{case.operation.method} {case.operation.path} {parameters}\n")
    # The real app in every path: a generated bundle only ever meets the unknown app's 404.
    if "bundle" in parameters:
        parameters["bundle"] = BUNDLE
    if "token" in parameters and DEVICE and random.random() < 0.5:
        parameters["token"] = DEVICE
    if "widget" in parameters and random.random() < 0.5:
        parameters["widget"] = "w1"
    if parameters:
        case.path_parameters = parameters
    if case.operation.path.endswith("/reloads") and case.operation.method.lower() == "post":
        # Signed over the exact bytes sent: the body is serialised here and handed to the transport as
        # `data` (which `requests` sends instead of the case's `json`). The case keeps its body as
        # generated, so that the checks judge what was generated.
        body = case.body
        if isinstance(body, (dict, list, str, int, float, bool)) or body is None:
            body = json.dumps(body).encode()
        elif not isinstance(body, bytes):
            body = b""  # no body generated
        kwargs["data"] = body
        stamp = str(int(time.time()))
        digest = hmac.new(SECRET, stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
        # Most calls signed right; a few keep what was generated (the 401s are documented too), and so does
        # a case that tests the signature's absence.
        data = getattr(getattr(getattr(case, "meta", None), "phase", None), "data", None)
        missing = getattr(getattr(data, "scenario", None), "name", "") == "MISSING_PARAMETER" and (
            getattr(data, "parameter", "") or ""
        ).lower() == "reloadgate-signature"
        if not missing and random.random() < 0.9:
            case.headers = {**(case.headers or {}), "reloadgate-signature": f"t={stamp},v1={digest}"}


@schemathesis.hook
def after_call(context, case, response):
    if os.environ.get("RG_CONTRACT_DEBUG"):
        with open(os.environ["RG_CONTRACT_DEBUG"], "a") as log:
            log.write(f"  -> {response.status_code} {response.request.url} {dict(response.request.headers)} {response.request.body!r:.300} {response.content[:150]!r}\n")


TOKEN = re.compile(r"^[0-9A-Fa-f]{64,200}$")


def _path_as_sent_is_valid(case):
    parameters = case.path_parameters or {}
    return (
        parameters.get("bundle", BUNDLE) == BUNDLE
        and TOKEN.match(str(parameters.get("token", DEVICE or "0" * 64))) is not None
        and str(parameters.get("widget", "w1")) != ""
    )


def _query_as_sent_is_valid(case):
    """The declared query parameters as sent match their schemas; undeclared ones are ignored."""
    query = case.query or {}
    for parameter in case.operation.iter_parameters():
        if parameter.location.name != "QUERY" or parameter.name not in query:
            continue
        value = query[parameter.name]
        validator = Draft202012Validator(parameter.definition.get("schema", {}))
        try:
            if not all(validator.is_valid(item) for item in (value if isinstance(value, list) else [value])):
                return False
        except Exception:  # a schema it cannot read: judge the failure as reported
            return False
    return True


@schemathesis.hook
def filter_failure(context, failure, case, response):
    """What is not a finding, kept out narrowly; anything else stays a failure.

    - A request whose parts marked negative are valid as sent: a path value `before_call` replaced (the real
      app, the registered device), or a query whose declared parameters match their schemas beside
      undeclared ones.
    - HTTP lets a client send query parameters and headers an operation does not name, and the gateway
      ignores them (as it ignores a device registration's unknown fields); schemathesis models them as an
      object without other properties and expects the extra one refused. Its coverage phase also counts a
      request carrying only the required headers as invalid, though the operation requires none.
    - A device's widget ids are unique (the document says so in words; `uniqueItems` would compare whole
      widgets, not their ids), so a list repeating an id is refused with 422 naming it.
    - A provider key's `publicKey` must be a P-256 public key in PEM, which no pattern can check; a
      generated string is refused with 422 naming the field.
    """
    meta = getattr(case, "meta", None)
    data = getattr(getattr(meta, "phase", None), "data", None)
    if 200 <= response.status_code < 300 and meta is not None:
        negative = {location.name for location, component in meta.components.items() if component.mode.is_negative}
        location = getattr(getattr(data, "parameter_location", None), "name", "")
        scenario = getattr(getattr(data, "scenario", None), "name", "")
        harmless = set()
        if _path_as_sent_is_valid(case):
            harmless.add("PATH")
        if _query_as_sent_is_valid(case):
            harmless.add("QUERY")
        if location == "HEADER" and scenario in ("OBJECT_UNEXPECTED_PROPERTIES", "OBJECT_ONLY_REQUIRED"):
            harmless.add("HEADER")
        if negative and negative <= harmless:
            return False
    if response.status_code == 422 and b"appears twice" in response.content and "/devices/" in case.operation.path:
        return False
    if response.status_code == 422 and b"publicKey must be a P-256 public key" in response.content and case.operation.path == "/v1/keys":
        return False
    return True
