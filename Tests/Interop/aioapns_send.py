"""Sends widget, control and Live Activity pushes to ReloadGate with aioapns (PyPI), a client no one here wrote.

Usage: aioapns_send.py HOST PORT CA_PEM KEY_P8 KEY_ID TEAM_ID BUNDLE DEVICE_TOKEN CONTROL_TOKEN ACTIVITY_TOKEN
Prints one JSON object: the results of three pushes with a fresh token, of one controls push (push type
`controls`, the `.push-type.controls` topic, priority 10, expiring now) to CONTROL_TOKEN, of one Live
Activity update (the library's own `PushType.LIVEACTIVITY`, the `.push-type.liveactivity` topic) to
ACTIVITY_TOKEN, then of one push with a token issued two hours ago (the library's own JWT code, with its
clock set back), through the library's API.
"""
import asyncio
import json
import ssl
import sys
import time
from enum import Enum

import aioapns.connection
from aioapns import APNs, NotificationRequest, PushType

host, port, ca, key_file, key_id, team_id, bundle, device, control, activity = sys.argv[1:11]


class ControlsPushType(Enum):
    # aioapns 4.0's PushType has no `controls`; the library sends any enum's value as apns-push-type.
    CONTROLS = "controls"


# Point the library at the gateway: its endpoint is a class attribute (host header and TCP address).
aioapns.connection.APNsDevelopmentClientProtocol.APNS_SERVER = host
aioapns.connection.APNsDevelopmentClientProtocol.APNS_PORT = int(port)


def client():
    context = ssl.create_default_context(cafile=ca)
    return APNs(
        key=open(key_file).read(),
        key_id=key_id,
        team_id=team_id,
        topic=bundle + ".push-type.widgets",
        use_sandbox=True,
        ssl_context=context,
        max_connection_attempts=2,
    )


def request():
    # aioapns knows no `widgets` push type: without apns-push-type the topic's suffix says it.
    return NotificationRequest(device_token=device, message={"aps": {"content-changed": True}})


async def main():
    apns = client()
    fresh = []
    for _ in range(3):
        result = await apns.send_notification(request())
        fresh.append({"status": result.status, "description": result.description, "id": result.notification_id})

    controls = await apns.send_notification(
        NotificationRequest(
            device_token=control,
            message={"aps": {"content-changed": True}},
            push_type=ControlsPushType.CONTROLS,
            apns_topic=bundle + ".push-type.controls",
            priority=10,
            time_to_live=0,
        )
    )
    controls = {"status": controls.status, "description": controls.description}

    # A Live Activity update shaped as Apple's example, with the library's own push type.
    update = await apns.send_notification(
        NotificationRequest(
            device_token=activity,
            message={
                "aps": {
                    "timestamp": int(time.time()),
                    "event": "update",
                    "content-state": {"currentHealthLevel": 0.941, "eventDescription": "Power Panda found a sword!"},
                    "alert": {"title": "Power Panda found a sword!", "body": "In a cave.", "sound": "chime.aiff"},
                }
            },
            push_type=PushType.LIVEACTIVITY,
            apns_topic=bundle + ".push-type.liveactivity",
            priority=10,
        )
    )
    liveactivity = {"status": update.status, "description": update.description}

    # A stale token: the library signs with iat two hours in the past.
    real_time = time.time

    class Clock:
        @staticmethod
        def time():
            return real_time() - 7200

    aioapns.connection.time = Clock
    stale_client = client()
    result = await stale_client.send_notification(request())
    aioapns.connection.time = time
    stale = {"status": result.status, "description": result.description}
    print(json.dumps({"fresh": fresh, "controls": controls, "liveactivity": liveactivity, "stale": stale}))


asyncio.run(main())
