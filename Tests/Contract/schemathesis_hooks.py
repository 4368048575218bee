"""Schemathesis hooks for ReloadGate's API listener (scripts/check-api-contract).

Most generated calls use the test app's bundle in the path (a random one only exercises the 404), and every
call of the reload webhook is signed with the app's webhook secret, over the exact bytes sent, as the
gateway requires (`reloadgate-signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">`). The bundle and
the secret come from the environment (RG_CONTRACT_BUNDLE, RG_CONTRACT_SECRET; RG_CONTRACT_DEVICE a registered
device token). RG_CONTRACT_DEBUG names a file to log every call and its answer to.
"""
import hashlib
import hmac
import json
import os
import random
import time

import schemathesis

BUNDLE = os.environ["RG_CONTRACT_BUNDLE"]
SECRET = os.environ["RG_CONTRACT_SECRET"].encode()
DEVICE = os.environ.get("RG_CONTRACT_DEVICE", "")


@schemathesis.hook
def before_call(context, case, kwargs):
    parameters = case.path_parameters or {}
    if os.environ.get("RG_CONTRACT_DEBUG"):
        with open(os.environ["RG_CONTRACT_DEBUG"], "a") as log:
            log.write(f"{case.operation.method} {case.operation.path} {parameters}\n")
    if "bundle" in parameters and random.random() < 0.8:
        parameters["bundle"] = BUNDLE
    if "token" in parameters and DEVICE and random.random() < 0.5:
        parameters["token"] = DEVICE
    if "widget" in parameters and random.random() < 0.5:
        parameters["widget"] = "w1"
    if case.operation.path.endswith("/reloads") and case.operation.method.lower() == "post":
        body = case.body
        if not isinstance(body, (bytes, dict, list, str, int, float, bool)) and body is not None:
            body = b""  # no body generated
        elif not isinstance(body, bytes):
            body = json.dumps(body).encode()
        case.body = body
        stamp = str(int(time.time()))
        digest = hmac.new(SECRET, stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
        headers = case.headers if case.headers is not None else {}
        # Most calls signed right; a few keep what was generated (the 401s are documented too).
        if random.random() < 0.9:
            headers["reloadgate-signature"] = f"t={stamp},v1={digest}"
        case.headers = headers


@schemathesis.hook
def after_call(context, case, response):
    if os.environ.get("RG_CONTRACT_DEBUG"):
        with open(os.environ["RG_CONTRACT_DEBUG"], "a") as log:
            log.write(f"  -> {response.status_code} {response.request.url} {response.content[:150]!r}\n")
