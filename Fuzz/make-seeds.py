#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora into Fuzz/Corpus/<target>/ (committed; run again after a
change of the input formats). Needs Python's `cryptography` package for the signed provider tokens
(the key is the fuzz target's fixed key: the P-256 scalar 0x0707...07)."""
import base64, hashlib, hmac, json, os, shutil, sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "Corpus")
NOW = 1790000000
HOSTILE = ["0", "-0", "-1", "5", "10", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
           "99999999999999999999", "253402300799", "253402300800", "1e300", "-1e300", "-1e18", "1e400",
           "0.5", "1795538615.42", "-0.0", "NaN", "Infinity", "0x10", "1_000", " 5", ""]

def write(target, name, data):
    folder = os.path.join(root, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

shutil.rmtree(root, ignore_errors=True)

# push-head: "METHOD PATH" then "name: value" lines.
token = "ab" * 32
base = [f"POST /3/device/{token}", "apns-topic: com.example.scores.push-type.widgets", "apns-push-type: widgets",
        "authorization: bearer x.y.z", "content-length: 32"]
write("push-head", "valid", "\n".join(base))
write("push-head", "certificate", "\n".join([f"POST /3/device/{token}", "apns-push-type: widgets"]))
write("push-head", "every-header", "\n".join(base + ["apns-id: 5E1F0C2A-0000-4000-8000-000000000001", "apns-expiration: 0",
      "apns-priority: 5", "apns-collapse-id: c", "host: gateway.example.com", ":authority: x"]))
write("push-head", "duplicate", "\n".join(base + ["apns-priority: 10", "apns-priority: 5"]))
write("push-head", "bad-path", "GET /3/device/\napns-topic: x")
write("push-head", "query", f"POST /3/device/{token}?a=b\napns-topic: com.example.scores.push-type.widgets")
for i, value in enumerate(HOSTILE):
    write("push-head", f"expiration-{i}", "\n".join(base + [f"apns-expiration: {value}"]))
    write("push-head", f"priority-{i}", "\n".join(base + [f"apns-priority: {value}"]))
    write("push-head", f"content-length-{i}", "\n".join(base[:-1] + [f"content-length: {value}"]))

# provider-token: the text after `bearer `.
from cryptography.hazmat.primitives.asymmetric import ec, utils
from cryptography.hazmat.primitives import hashes
key = ec.derive_private_key(int("07" * 32, 16), ec.SECP256R1())
def b64(data): return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
def token_with(header, claims, raw=True):
    signing = b64(json.dumps(header, separators=(",", ":")).encode()) + "." + b64(claims.encode() if isinstance(claims, str) else json.dumps(claims, separators=(",", ":")).encode())
    der = key.sign(signing.encode(), ec.ECDSA(hashes.SHA256()))
    if raw:
        r, s = utils.decode_dss_signature(der)
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    else:
        signature = der
    return signing + "." + b64(signature)
header = {"alg": "ES256", "kid": "KEY0000001"}
write("provider-token", "valid-raw", token_with(header, {"iss": "TEAM000001", "iat": NOW}))
write("provider-token", "valid-der", token_with(header, {"iss": "TEAM000001", "iat": NOW}, raw=False))
write("provider-token", "fractional-iat", token_with(header, '{"iss":"TEAM000001","iat":1789999999.42}'))
write("provider-token", "string-iat", token_with(header, '{"iss":"TEAM000001","iat":"1789999999"}'))
write("provider-token", "other-team", token_with(header, {"iss": "TEAM000002", "iat": NOW}))
write("provider-token", "unknown-kid", token_with({"alg": "ES256", "kid": "NOKEY"}, {"iss": "TEAM000001", "iat": NOW}))
write("provider-token", "alg-none", b64(b'{"alg":"none","kid":"KEY0000001"}') + "." + b64(b'{"iss":"TEAM000001","iat":1790000000}') + ".")
write("provider-token", "hs256", b64(b'{"alg":"HS256","kid":"KEY0000001"}') + "." + b64(b'{"iss":"TEAM000001","iat":1790000000}') + ".AAAA")
write("provider-token", "not-base64", "a$b.c%d.e^f")
for i, value in enumerate(HOSTILE):
    claims = '{"iss":"TEAM000001","iat":' + (value if value not in ("", "NaN", "Infinity", "0x10", "1_000", " 5") else json.dumps(value)) + "}"
    write("provider-token", f"iat-{i}", token_with(header, claims))

# webhook-signature: the header, a newline, the body.
body = '{"kind":"scores","match":{"team":"42"}}'
def sign(t, text): return hmac.new(b"rgs_fuzz", f"{t}.{text}".encode(), hashlib.sha256).hexdigest()
write("webhook-signature", "valid", f"t={NOW},v1={sign(NOW, body)}\n{body}")
write("webhook-signature", "two-signatures", f"t={NOW},v1={'0' * 64},v1={sign(NOW, body)}\n{body}")
write("webhook-signature", "spaces", f"t = {NOW} , v1 = {sign(NOW, body)}\n{body}")
write("webhook-signature", "unknown-scheme", f"t={NOW},v0=abc,v1={sign(NOW, body)}\n{body}")
for i, value in enumerate(HOSTILE):
    write("webhook-signature", f"t-{i}", f"t={value},v1={sign(value, body)}\n{body}")

# api-bodies: a selector byte (0 device, 1 timeline, 2 webhook, 3 control), then the JSON.
device = {"environment": "sandbox", "widgets": [{"id": "w1", "kind": "scores", "family": "systemSmall",
          "configuration": {"team": "42", "n": 3, "live": True}, "pushEnabled": True}], "previousToken": "cd" * 32}
write("api-bodies", "device", b"\x00" + json.dumps(device).encode())
write("api-bodies", "timeline", b"\x01" + b'{"entries":[{"date":"2026-11-22T14:00:00Z","relevance":1},{"date":1790000000.5}],"policy":{"after":1790003600}}')
write("api-bodies", "timeline-never", b"\x01" + b'{"entries":[],"policy":"never"}')
write("api-bodies", "webhook", b"\x02" + json.dumps({"kind": "scores", "match": {"team": "42"}, "devices": ["ab" * 32], "priority": 5,
      "expiration": "2026-11-22T14:00:00Z", "collapseId": "c", "exempt": "appIntent"}).encode())
write("api-bodies", "nested", b"\x00" + b'{"widgets":' + b"[" * 600 + b"]" * 600 + b"}")
# Ends on its 513th opening bracket: Foundation's JSONDecoder traps on it (decision 0102); CI's fuzzing found it.
write("api-bodies", "nested-513-at-the-end", b"\x00" + b'{"widgets":' + b"[" * 512)
# The same after a key with control characters, which the parser refuses first (CI's second input).
write("api-bodies", "nested-513-at-the-end-after-a-bad-key", b"\x00" + b'{"widg' + b"\x03" * 59 + b'ets":' + b"[" * 512)
write("api-bodies", "control", b"\x03" + json.dumps({"kind": "garage", "configuration": {"door": "front", "n": 2}, "environment": "sandbox",
      "previousToken": "cd" * 32}).encode())
write("api-bodies", "webhook-controls", b"\x02" + json.dumps({"pushType": "controls", "kind": "garage", "match": {"door": "front"}}).encode())
for i, value in enumerate(HOSTILE):
    v = value if value not in ("", "NaN", "Infinity", "0x10", "1_000") else json.dumps(value)
    write("api-bodies", f"device-{i}", b"\x00" + ('{"widgets":[{"id":"w","kind":"k","family":"systemSmall","configuration":{"n":' + v + "}}]}").encode())
    write("api-bodies", f"timeline-{i}", b"\x01" + ('{"entries":[{"date":' + v + '}],"policy":{"after":' + v + "}}").encode())
    write("api-bodies", f"webhook-{i}", b"\x02" + ('{"priority":' + v + ',"expiration":' + v + "}").encode())
    write("api-bodies", f"control-{i}", b"\x03" + ('{"kind":"k","configuration":{"n":' + v + "}}").encode())

# push-payload: the body.
write("push-payload", "plain", '{"aps":{"content-changed":true}}')
write("push-payload", "targeted", '{"aps":{"content-changed":true},"reloadgate":{"kind":"scores","match":{"team":"42","n":1e300,"live":false}}}')
write("push-payload", "false", '{"aps":{"content-changed":false}}')
write("push-payload", "nested", '{"aps":' + "[" * 600 + "]" * 600 + "}")
write("push-payload", "large", '{"aps":{"content-changed":true},"x":"' + "a" * 5000 + '"}')
write("push-payload", "activity-update", '{"aps":{"timestamp":1685952000,"event":"update","content-state":{"currentHealthLevel":0.941},"alert":{"title":"Sword","body":"Found","sound":"chime.aiff"}}}')
write("push-payload", "activity-start", '{"aps":{"timestamp":1705560370,"event":"start","content-state":{},"attributes-type":"AdventureAttributes","attributes":{"hero":"Panda"},"input-push-token":1}}')
write("push-payload", "activity-end", '{"aps":{"timestamp":1e10,"event":"end","dismissal-date":253402300800,"relevance-score":-0.5}}')
print("seeds written to", root)
