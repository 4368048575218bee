"""Sends Apple's recipes for widget and control pushes to ReloadGate with a client library from PyPI that no
one here wrote: aioapns or pyapns_client, each pointed at the gateway by its host and port only.

Usage: recipe_send.py LIBRARY HOST PORT CA_PEM KEY_P8 KEY_ID TEAM_ID BUNDLE PUSHES_JSON
PUSHES_JSON: [{"pushType": "widgets" | "controls", "token": "..."}]. A widgets push has no apns-priority and
no apns-expiration; a controls push has priority 10 and expires now (pyapns_client sends the header 0;
aioapns has only a time to live, and its 0 is the second the push is sent).
Prints a JSON list: each push's status and reason ("" when 200).
"""
import asyncio
import json
import ssl
import sys
from enum import Enum

library, host, port, ca, key_file, key_id, team_id, bundle, pushes = sys.argv[1:10]
pushes = json.loads(pushes)
message = {"aps": {"content-changed": True}}


def with_aioapns():
    import aioapns.connection
    from aioapns import APNs, NotificationRequest, PRIORITY_HIGH

    class PushType(Enum):
        # aioapns 4.0's PushType has neither `widgets` nor `controls`; it sends any enum's value.
        WIDGETS = "widgets"
        CONTROLS = "controls"

    # The endpoint is a class attribute (host header and TCP address).
    aioapns.connection.APNsDevelopmentClientProtocol.APNS_SERVER = host
    aioapns.connection.APNsDevelopmentClientProtocol.APNS_PORT = int(port)

    async def run():
        results = []
        for push in pushes:
            apns = APNs(
                key=open(key_file).read(), key_id=key_id, team_id=team_id,
                topic=f"{bundle}.push-type.{push['pushType']}", use_sandbox=True,
                ssl_context=ssl.create_default_context(cafile=ca), max_connection_attempts=2,
            )
            if push["pushType"] == "controls":
                request = NotificationRequest(device_token=push["token"], message=message, push_type=PushType.CONTROLS,
                                              priority=PRIORITY_HIGH, time_to_live=0)
            else:
                request = NotificationRequest(device_token=push["token"], message=message, push_type=PushType.WIDGETS)
            result = await apns.send_notification(request)
            results.append({"status": str(result.status), "reason": result.description or ""})
        return results

    return asyncio.run(run())


def with_pyapns_client():
    from pyapns_client import APNSClient, IOSNotification, IOSPayload
    from pyapns_client import exceptions

    client = APNSClient(mode=APNSClient.MODE_DEV, root_cert_path=ca, auth_key_path=key_file, auth_key_id=key_id, team_id=team_id)
    client._base_url = f"https://{host}:{port}"  # its endpoints are Apple's; the gateway's instead
    results = []
    for push in pushes:
        payload = IOSPayload(custom=message)
        if push["pushType"] == "controls":
            notification = IOSNotification(payload=payload, topic=f"{bundle}.push-type.controls", push_type="controls",
                                           priority="10", expiration="0")
        else:
            notification = IOSNotification(payload=payload, topic=f"{bundle}.push-type.widgets", push_type="widgets")
        try:
            client.push(notification=notification, device_token=push["token"])
            results.append({"status": "200", "reason": ""})
        except exceptions.APNSException as error:
            results.append({"status": str(error.status_code), "reason": type(error).__name__.removesuffix("Exception")})
    client.close()
    return results


print(json.dumps({"aioapns": with_aioapns, "pyapns_client": with_pyapns_client}[library]()))
