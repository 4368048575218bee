"""The chaos run of scripts/chaos: faults of the store and of the gateways, and every request's fate.

Each scenario starts what it needs (a private PostgreSQL cluster through scripts/test-postgres, gateways
from the release binary, a tmpfs for the disk), puts a steady load on every gateway from one client, makes
its faults, and then reads the store: a request answered 200/202 must be there (pushes by apns-id, webhook
calls by a collapse id of their own), a refused or unanswered one must not be. Loopback only.
"""

import argparse
import asyncio
import base64
import collections
import hashlib
import hmac
import glob
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid

import httpx
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLE = "com.example.chaos"
TEAM = "CHAOSTEAM1"
KID = "CHAOSKEY01"
CLIENT_TIMEOUT = 30.0


def log(*parts):
    print("chaos:", *parts, flush=True)


class ProviderKey:
    """The sender's ES256 key and its provider token (renewed every 20 minutes, as Apple asks)."""

    def __init__(self, directory):
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.public_path = os.path.join(directory, "key.pem")
        with open(self.public_path, "wb") as f:
            f.write(self.key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        self.made = 0
        self.cached = None

    def token(self):
        if self.cached and time.time() - self.made < 1200:
            return self.cached
        b64 = lambda data: base64.urlsafe_b64encode(data).rstrip(b"=").decode()
        header = b64(json.dumps({"alg": "ES256", "kid": KID}).encode())
        self.made = int(time.time())
        claims = b64(json.dumps({"iss": TEAM, "iat": self.made}).encode())
        r, s = decode_dss_signature(self.key.sign(f"{header}.{claims}".encode(), ec.ECDSA(hashes.SHA256())))
        self.cached = f"{header}.{claims}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"
        return self.cached


class Gateway:
    """One `reloadgate serve` process in a directory of its own."""

    def __init__(self, binary, directory, environment):
        self.binary, self.directory, self.environment = binary, directory, environment
        self.process = None
        self.api = self.apns = None
        self.killed = False
        self.deaths = 0

    def start(self):
        os.makedirs(self.directory, exist_ok=True)
        env = dict(os.environ, RELOADGATE_LISTEN_PORT="0", RELOADGATE_INGRESS_PORT="0", RELOADGATE_LOG_LEVEL="warning",
                   RELOADGATE_INGRESS_REQUESTS_PER_SECOND_PER_TOKEN="1000000", **self.environment)
        self.out = open(os.path.join(self.directory, "serve.out"), "w")
        self.err = open(os.path.join(self.directory, "serve.err"), "a")
        self.process = subprocess.Popen([self.binary, "serve"], cwd=self.directory, env=env, stdout=self.out, stderr=self.err)
        self.killed = False
        deadline = time.time() + 60
        while time.time() < deadline:
            text = open(os.path.join(self.directory, "serve.out")).read()
            api = apns = None
            for line in text.splitlines():
                if "APNs pushes to https://127.0.0.1:" in line:
                    apns = int(line.split("https://127.0.0.1:")[1].split("/")[0])
                elif "listening on https://127.0.0.1:" in line:
                    api = int(line.split("https://127.0.0.1:")[1].split(" ")[0])
            if api and apns:
                self.api, self.apns = api, apns
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise SystemExit(f"chaos: a gateway did not start in {self.directory}:\n" + open(os.path.join(self.directory, "serve.err")).read())

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def check_death(self):
        """Counts a death the run did not cause (a crash: SIGILL, a trap, exit without SIGTERM)."""
        if self.process is not None and self.process.poll() is not None and not self.killed:
            self.deaths += 1
            log(f"a gateway died (status {self.process.returncode}) in {self.directory}")
            self.killed = True  # counted once
            return True
        return False

    def stop(self):
        if self.alive():
            self.killed = True
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Record:
    __slots__ = ("kind", "gateway", "key", "sent", "answered", "status", "decision", "outcome", "token")

    def __init__(self, kind, gateway, key, token=None):
        self.kind, self.gateway, self.key, self.token = kind, gateway, key, token
        self.sent = time.monotonic()
        self.answered = None
        self.status = None  # an HTTP status, "unanswered" (30 s), or "connection" (refused, reset)
        self.decision = None
        # A refusal's outcome: "unknown" when the commit may have been made (its answer was lost: a push's
        # `reloadgate-outcome`, a webhook call's code `store-outcome-unknown`), "not-stored" otherwise
        # (docs/OPERATIONS.md, "What a failed answer means").
        self.outcome = None


class Load:
    """A steady load on every gateway: pushes to registered devices, pushes to new tokens, webhook calls."""

    def __init__(self, gateways, key, credentials, devices, workers=6, pace=0.01, priority="10", webhooks=True):
        self.gateways, self.key, self.credentials, self.devices = gateways, key, credentials, devices
        self.workers, self.pace, self.priority, self.webhooks = workers, pace, priority, webhooks
        self.records = []
        self.running = False

    async def send_push(self, client, gateway, token):
        record = Record("push", gateway, str(uuid.uuid4()), token)
        self.records.append(record)
        await self.finish(record, self.post_push(client, gateway, record))

    def post_push(self, client, gateway, record):
        headers = {"authorization": f"bearer {self.key.token()}", "apns-topic": f"{BUNDLE}.push-type.widgets",
                   "apns-push-type": "widgets", "apns-id": record.key, "apns-priority": self.priority}
        url = f"https://127.0.0.1:{gateway.apns}/3/device/{record.token}"
        return client.post(url, headers=headers, content=b'{"aps":{"content-changed":true}}')

    def resend(self, records):
        """Sends each request of `records` again (a push with its apns-id to its token, a webhook call with its
        idempotency-key) to the first gateway that answers: what a client does after a refusal whose outcome
        is unknown. Returns their statuses."""
        async def go():
            statuses = []
            async with httpx.AsyncClient(http2=True, verify=False, timeout=httpx.Timeout(CLIENT_TIMEOUT)) as client:
                for record in records:
                    status = "connection"
                    for gateway in [record.gateway] + [g for g in self.gateways if g is not record.gateway]:
                        try:
                            post = self.post_push if record.kind == "push" else self.post_webhook
                            status = (await post(client, gateway, record)).status_code
                            break
                        except (httpx.TransportError, OSError):
                            continue
                    statuses.append(status)
            return statuses
        return asyncio.run(go())

    async def send_webhook(self, client, gateway):
        record = Record("webhook", gateway, uuid.uuid4().hex[:32])
        self.records.append(record)
        await self.finish(record, self.post_webhook(client, gateway, record))

    def post_webhook(self, client, gateway, record):
        # The collapse id is the call's idempotency-key too: a retry of a call whose outcome was unknown is
        # answered from the record, not decided again.
        body = json.dumps({"kind": "scores", "priority": 5, "collapseId": record.key}, separators=(",", ":"))
        stamp = str(int(time.time()))
        signature = hmac.new(self.credentials["webhookSecret"].encode(), f"{stamp}.{body}".encode(), hashlib.sha256).hexdigest()
        headers = {"reloadgate-signature": f"t={stamp},v1={signature}", "content-type": "application/json",
                   "idempotency-key": record.key}
        url = f"https://127.0.0.1:{gateway.api}/v1/apps/{BUNDLE}/reloads"
        return client.post(url, headers=headers, content=body.encode())

    async def finish(self, record, request):
        try:
            response = await asyncio.wait_for(request, CLIENT_TIMEOUT)
            record.status = response.status_code
            record.decision = response.headers.get("reloadgate-decision")
            record.outcome = response.headers.get("reloadgate-outcome")
            if record.kind == "webhook" and response.status_code == 503:
                code = response.json().get("code") if response.headers.get("content-type", "").startswith("application/json") else None
                record.outcome = "unknown" if code == "store-outcome-unknown" else "not-stored"
        except asyncio.TimeoutError:
            record.status = "unanswered"
        except (httpx.TransportError, OSError):
            record.status = "connection"
        record.answered = time.monotonic()

    async def worker(self, index):
        clients = {}
        # Half the workers speak HTTP/1.1, as curl and most webhook senders do; the others HTTP/2.
        http2 = index % 2 == 0
        try:
            while self.running:
                gateway = self.gateways[random.randrange(len(self.gateways))]
                client = clients.get(id(gateway))
                if client is None:
                    client = httpx.AsyncClient(http2=http2, verify=False, timeout=httpx.Timeout(CLIENT_TIMEOUT + 5))
                    clients[id(gateway)] = client
                choice = random.random()
                if self.webhooks and choice < 0.1:
                    await self.send_webhook(client, gateway)
                elif choice < 0.3:
                    await self.send_push(client, gateway, os.urandom(32).hex())
                else:
                    await self.send_push(client, gateway, random.choice(self.devices))
                if self.records[-1].status == "connection":
                    # A connection refused or reset (a gateway killed or stopping): a new one next time.
                    await client.aclose()
                    clients.pop(id(gateway), None)
                    await asyncio.sleep(0.2)
                await asyncio.sleep(self.pace)
        finally:
            for client in clients.values():
                await client.aclose()

    async def run_while(self, body):
        """Runs the load while `body` (a coroutine making faults) runs; waits for every request's fate."""
        self.running = True
        tasks = [asyncio.create_task(self.worker(i)) for i in range(self.workers)]
        try:
            await body()
        finally:
            self.running = False
            await asyncio.gather(*tasks)


def run(command, cwd=None, env=None, check=True):
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise SystemExit(f"chaos: {' '.join(command)} failed: {result.stderr}")
    return result.stdout


class Cluster:
    """The private PostgreSQL cluster (scripts/test-postgres)."""

    def __init__(self, directory):
        self.directory = directory
        self.base = run([os.path.join(ROOT, "scripts/test-postgres"), "start", directory]).strip()

    def database(self, name):
        run(["psql", "-q", self.base, "-c", f"CREATE DATABASE {name}"])
        return self.base.split("/postgres?")[0] + f"/{name}?sslmode=disable"

    def halt(self):
        run([os.path.join(ROOT, "scripts/test-postgres"), "halt", self.directory])

    def resume(self):
        run([os.path.join(ROOT, "scripts/test-postgres"), "resume", self.directory])

    def stop(self):
        run([os.path.join(ROOT, "scripts/test-postgres"), "stop", self.directory], check=False)


def stored_postgres(url, records):
    """How many requests the database holds for each key of `records` (pushes by apns-id, webhook calls by
    collapse id); keys it does not hold are left out."""
    pushes = [r.key for r in records if r.kind == "push"]
    calls = [r.key for r in records if r.kind == "webhook"]
    found = collections.Counter()
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write("CREATE TEMP TABLE wanted (key text);\nCOPY wanted FROM STDIN;\n")
        for key in pushes + calls:
            f.write(key + "\n")
        f.write("\\.\nSELECT apnsId FROM request JOIN wanted ON wanted.key = request.apnsId\n"
                "UNION ALL SELECT collapseId FROM request JOIN wanted ON wanted.key = request.collapseId;\n")
        script = f.name
    try:
        out = run(["psql", "-qtA", url.split("?")[0], "-f", script])
        found.update(line.strip() for line in out.splitlines() if line.strip())  # one line a request
    finally:
        os.unlink(script)
    return found


def stored_sqlite(path, records):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        found = set()
        keys = [r.key for r in records]
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            marks = ",".join("?" * len(chunk))
            for (key,) in db.execute(f"SELECT apnsId FROM request WHERE apnsId IN ({marks})", chunk):
                found.add(key)
            for (key,) in db.execute(f"SELECT collapseId FROM request WHERE collapseId IN ({marks})", chunk):
                found.add(key)
        return found
    finally:
        db.close()


class Tally:
    """One fault's figures."""

    def __init__(self, name):
        self.name = name
        self.sent = 0
        self.by_status = {}
        self.unanswered = 0
        self.acked_missing = 0
        self.refused_stored = 0
        self.deaths = 0
        self.recovery = []
        self.slowest_refusal = 0.0
        # Requests refused with an unknown outcome that the store holds: kept only if their retry is
        # answered with the first answer and not decided again (retry_unknown); unconfirmed, they break.
        self.unknown = []
        self.unknown_confirmed = 0

    def add(self, records, stored, fault_ends=()):
        for r in records:
            self.sent += 1
            key = str(r.status)
            self.by_status[key] = self.by_status.get(key, 0) + 1
            if r.status == "unanswered":
                self.unanswered += 1
            elif r.status in (200, 202):
                if r.key not in stored:
                    self.acked_missing += 1
                    log(f"{self.name}: {r.kind} {r.key} answered {r.status} but not in the store")
            elif isinstance(r.status, int) and r.status >= 400:
                self.slowest_refusal = max(self.slowest_refusal, r.answered - r.sent)
                if r.key in stored and r.outcome == "unknown":
                    self.unknown.append(r)
                elif r.key in stored:
                    self.refused_stored += 1
                    log(f"{self.name}: {r.kind} {r.key} answered {r.status} ({r.outcome}) but stored")
        for end in fault_ends:
            good = [r.answered for r in records if r.status in (200, 202) and r.sent >= end]
            if good:
                self.recovery.append(min(good) - end)

    def retry_unknown(self, load, count):
        """Sends again each request refused with an unknown outcome that the store holds: its retry must get
        the first answer (200 for a push, 202 for a webhook call) and leave one request with its key
        (`count`: records -> requests stored by key, read after the retries)."""
        if not self.unknown:
            return
        statuses = load.resend(self.unknown)
        rows = count(self.unknown)
        for r, status in zip(self.unknown, statuses):
            if status == (200 if r.kind == "push" else 202) and rows.get(r.key) == 1:
                self.unknown_confirmed += 1
            else:
                log(f"{self.name}: {r.kind} {r.key} refused with an unknown outcome and stored: its retry answered "
                    f"{status}, {rows.get(r.key, 0)} requests with its key")

    def line(self):
        statuses = ", ".join(f"{k}: {v}" for k, v in sorted(self.by_status.items()))
        recovery = f"{max(self.recovery):.1f}" if self.recovery else "-"
        return (f"| {self.name} | {self.sent} | {statuses} | {self.unanswered} | {self.acked_missing} | "
                f"{self.refused_stored} | {self.unknown_confirmed} of {len(self.unknown)} | {self.deaths} | {recovery} | {self.slowest_refusal:.2f} |")

    def broken(self):
        unconfirmed = len(self.unknown) - self.unknown_confirmed
        return self.unanswered + self.acked_missing + self.refused_stored + unconfirmed + self.deaths > 0


def setup_app(binary, directory, environment, key):
    os.makedirs(directory, exist_ok=True)
    env = dict(os.environ, **environment)
    credentials = json.loads(run([binary, "apps", "add", BUNDLE, "--team", TEAM, "--json"], cwd=directory, env=env))
    run([binary, "keys", "add", "--kid", KID, "--team", TEAM, "--public-key", key.public_path], cwd=directory, env=env)
    return credentials


def register(gateway, credentials, count):
    devices = []
    with httpx.Client(http2=True, verify=False, timeout=30) as client:
        for i in range(count):
            token = os.urandom(32).hex()
            body = {"environment": "sandbox", "widgets": [
                {"id": "w1", "kind": "scores", "family": "systemSmall", "configuration": {"team": str(i % 5)}, "pushEnabled": True}]}
            response = client.put(f"https://127.0.0.1:{gateway.api}/v1/apps/{BUNDLE}/devices/{token}",
                                  headers={"authorization": f"Bearer {credentials['apiKey']}"}, json=body)
            if response.status_code != 200:
                raise SystemExit(f"chaos: registering a device failed: {response.status_code} {response.text}")
            devices.append(token)
    return devices


async def wait_for_good_answer(load, since, limit=60.0):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if any(r.status in (200, 202) and r.sent >= since for r in load.records):
            return
        await asyncio.sleep(0.2)


def postgres_scenarios(args, work, key, only):
    tallies = []
    cluster = Cluster(os.path.join(work, "cluster"))
    try:
        if only in (None, "crash"):
            tallies.append(crash(args, work, key, cluster, gateways=1, rounds=args.rounds))
            if args.cluster_rounds:
                tallies.append(crash(args, work, key, cluster, gateways=3, rounds=args.cluster_rounds))
        if only in (None, "lock"):
            tallies.append(lock(args, work, key, cluster))
        if only in (None, "gateways"):
            tallies.extend(kill_and_pause(args, work, key, cluster))
    finally:
        cluster.stop()
    return tallies


def start_gateways(args, work, key, cluster, count, name, extra=None):
    url = cluster.database(name)
    environment = {"RELOADGATE_STORE_KIND": "postgres", "RELOADGATE_STORE_URL": url, **(extra or {})}
    first = os.path.join(work, name, "g0")
    credentials = setup_app(args.bin, first, environment, key)
    gateways = []
    for i in range(count):
        directory = os.path.join(work, name, f"g{i}")
        if i > 0:
            os.makedirs(os.path.join(directory, "data"), exist_ok=True)
            shutil.copy(os.path.join(first, "data/secrets.key"), os.path.join(directory, "data/secrets.key"))
        gateway = Gateway(args.bin, directory, environment)
        gateway.start()
        gateways.append(gateway)
    return url, credentials, gateways


def crash(args, work, key, cluster, gateways, rounds):
    name = f"crash{gateways}"
    tally = Tally(f"database crash x{rounds} (down {args.down:.0f} s / {args.long_down:.0f} s), {gateways} gateway{'s' if gateways > 1 else ''}")
    url, credentials, started = start_gateways(args, work, key, cluster, gateways, name)
    try:
        devices = register(started[0], credentials, 40)
        load = Load(started, key, credentials, devices)
        ends = []

        async def faults():
            await asyncio.sleep(2)
            for round in range(rounds):
                cluster.halt()
                # Short outages (requests wait for a connection and commit once it is back) and long ones
                # (past the 5 s a request waits for a connection: refused, and the gateway degraded).
                await asyncio.sleep(args.down if round % 2 == 0 else args.long_down)
                cluster.resume()
                ends.append(time.monotonic())
                for gateway in started:
                    tally.deaths += gateway.check_death()
                await wait_for_good_answer(load, ends[-1])
                await asyncio.sleep(1 + random.random() * 2)
                log(f"{name}: round {round + 1} of {rounds}, {len(load.records)} requests so far")
            await asyncio.sleep(2)

        asyncio.run(load.run_while(faults))
        for gateway in started:
            tally.deaths += gateway.check_death()
        time.sleep(2)
        tally.add(load.records, stored_postgres(url, load.records), fault_ends=ends)
        tally.retry_unknown(load, lambda records: stored_postgres(url, records))
    finally:
        for gateway in started:
            gateway.stop()
    return tally


def lock(args, work, key, cluster):
    tally = Tally(f"request table locked {args.lock:.0f} s (deadline {args.deadline} ms)")
    url, credentials, started = start_gateways(args, work, key, cluster, 1, "lock", {"RELOADGATE_STORE_DEADLINE": str(args.deadline)})
    try:
        devices = register(started[0], credentials, 40)
        load = Load(started, key, credentials, devices)
        marks = {}

        async def faults():
            await asyncio.sleep(2)
            holder = await asyncio.create_subprocess_exec(
                "psql", "-q", url.split("?")[0], "-c",
                f"BEGIN; LOCK TABLE request IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep({args.lock}); COMMIT;",
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
            marks["start"] = time.monotonic()
            await holder.wait()
            marks["end"] = time.monotonic()
            await wait_for_good_answer(load, marks["end"])
            await asyncio.sleep(2)

        asyncio.run(load.run_while(faults))
        tally.deaths += started[0].check_death()
        stored = stored_postgres(url, load.records)
        during = [r for r in load.records if marks["start"] <= r.sent <= marks["end"]]
        tally.add(load.records, stored, fault_ends=[marks["end"]])
        tally.retry_unknown(load, lambda records: stored_postgres(url, records))
        late = [r for r in during if r.answered - r.sent > args.deadline / 1000 + 1.0]
        tally.late = len(late)
        tally.during = len(during)
        log(f"lock: {len(during)} requests sent while the lock held, {len(late)} answered later than the deadline + 1 s")
    finally:
        for gateway in started:
            gateway.stop()
    return tally


def kill_and_pause(args, work, key, cluster):
    url, credentials, started = start_gateways(args, work, key, cluster, 3, "gateways")
    tallies = []
    try:
        devices = register(started[0], credentials, 40)
        for fault in ("kill -9", "SIGSTOP"):
            tally = Tally(f"{fault} of one of 3 gateways")
            load = Load(started, key, credentials, devices)
            marks = {}

            async def faults():
                await asyncio.sleep(3)
                victim = started[1]
                if fault == "kill -9":
                    victim.killed = True
                    victim.process.kill()
                    await asyncio.sleep(args.down + 4)
                    victim.start()
                else:
                    victim.process.send_signal(signal.SIGSTOP)
                    await asyncio.sleep(args.pause)
                    victim.process.send_signal(signal.SIGCONT)
                marks["end"] = time.monotonic()
                await wait_for_good_answer(load, marks["end"])
                await asyncio.sleep(3)

            asyncio.run(load.run_while(faults))
            for gateway in started:
                tally.deaths += gateway.check_death()
            time.sleep(2)
            stored = stored_postgres(url, load.records)
            tally.add(load.records, stored, fault_ends=[marks["end"]])
            tally.retry_unknown(load, lambda records: stored_postgres(url, records))
            tallies.append(tally)
    finally:
        for gateway in started:
            gateway.stop()
    return tallies


def usage(directory):
    """Bytes the files under `directory` take."""
    total = 0
    for parent, _, names in os.walk(directory):
        for name in names:
            try:
                total += os.lstat(os.path.join(parent, name)).st_blocks * 512
            except OSError:
                pass
    return total


def wal_kib(directory):
    try:
        return os.path.getsize(os.path.join(directory, "data/reloadgate.sqlite-wal")) // 1024
    except OSError:
        return 0


def disk(args, work, key):
    tally = Tally("disk full, then freed (SQLite)")
    mount = os.path.join(work, "disk")
    os.makedirs(mount)
    # Room for the WAL's bound (64 MiB: SQLiteStore.writerCheckpointPages) and the rest: under this load the WAL
    # grows 3-4 MiB a second here before the filler comes, and a faster machine filled a 24 MiB disk by itself.
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160m", "tmpfs", mount], capture_output=True).returncode != 0:
        log("disk: cannot mount a tmpfs (not root?): left out")
        return None
    gateway = None
    try:
        directory = os.path.join(mount, "g0")
        credentials = setup_app(args.bin, directory, {}, key)
        gateway = Gateway(args.bin, directory, {})
        gateway.start()
        devices = register(gateway, credentials, 40)
        load = Load([gateway], key, credentials, devices, pace=0.002)
        marks = {}

        async def faults():
            await asyncio.sleep(2)
            filler = os.path.join(mount, "filler")
            free = os.statvfs(mount)
            log(f"disk: filling it; {free.f_bavail * free.f_frsize // 1024} KiB and {free.f_favail} inodes free, "
                f"the gateway's files {usage(directory) // 1024} KiB (WAL {wal_kib(directory)} KiB)")
            try:
                # Opening can already fail with ENOSPC (no inode or no byte left): the disk is full either way.
                with open(filler, "wb") as f:
                    try:
                        while True:
                            f.write(b"\0" * (1 << 16))
                            f.flush()
                    except OSError:
                        pass
            except OSError as error:
                log(f"disk: it was full before the filler: {error}")
            marks["full"] = time.monotonic()
            await asyncio.sleep(args.full)
            if os.path.exists(filler):
                os.unlink(filler)
            marks["end"] = time.monotonic()
            await wait_for_good_answer(load, marks["end"])
            await asyncio.sleep(2)

        asyncio.run(load.run_while(faults))
        tally.deaths += gateway.check_death()
        gateway.stop()
        stored = stored_sqlite(os.path.join(directory, "data/reloadgate.sqlite"), load.records)
        tally.add(load.records, stored, fault_ends=[marks["end"]])
        torn = 0
        whole = 0
        # The outbox and its rotated files (outbox.jsonl.1, ...): each must hold whole lines only.
        for path in glob.glob(os.path.join(directory, "data/outbox.jsonl*")):
            with open(path, "rb") as f:
                content = f.read()
            lines = content.split(b"\n")
            if lines and lines[-1] != b"":
                torn += 1
            for line in lines[:-1]:
                try:
                    json.loads(line)
                    whole += 1
                except ValueError:
                    torn += 1
        tally.torn = torn
        log(f"disk: outbox of {whole} whole lines, {torn} not whole")
    finally:
        if gateway:
            gateway.stop()
        subprocess.run(["umount", "-l", mount], capture_output=True)
    return tally


def main():
    parser = argparse.ArgumentParser(description="ReloadGate under faults of its store and its neighbours.")
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build/release/reloadgate"))
    parser.add_argument("--only", choices=["crash", "lock", "gateways", "disk"])
    parser.add_argument("--rounds", type=int, default=20, help="database crash rounds with one gateway")
    parser.add_argument("--cluster-rounds", type=int, default=5, help="database crash rounds with three gateways")
    parser.add_argument("--down", type=float, default=2.0, help="seconds the database (or a killed gateway) stays down")
    parser.add_argument("--long-down", type=float, default=8.0, help="seconds the database stays down in every other round")
    parser.add_argument("--lock", type=float, default=45.0, help="seconds the request table stays locked")
    parser.add_argument("--deadline", type=int, default=5000, help="store.deadline of the lock round (ms)")
    parser.add_argument("--pause", type=float, default=15.0, help="seconds a gateway stays stopped (SIGSTOP)")
    parser.add_argument("--full", type=float, default=5.0, help="seconds the disk stays full")
    parser.add_argument("--short", action="store_true", help="CI's round: 3 crashes, a 8 s lock, short pauses")
    args = parser.parse_args()
    if args.short:
        args.rounds, args.cluster_rounds, args.lock, args.pause, args.full, args.deadline = 3, 1, 8.0, 5.0, 3.0, 2000
    args.bin = os.path.abspath(args.bin)
    if not os.access(args.bin, os.X_OK):
        raise SystemExit(f"chaos: no {args.bin}; run: swift build -c release --product reloadgate")
    if shutil.which("psql") is None:
        raise SystemExit("chaos: psql is missing (apt-get install postgresql-client)")
    work = tempfile.mkdtemp(prefix="reloadgate-chaos.")
    os.chmod(work, 0o755)
    key = ProviderKey(work)
    started = time.time()
    tallies = []
    try:
        if args.only in (None, "crash", "lock", "gateways"):
            tallies.extend(postgres_scenarios(args, work, key, args.only))
        if args.only in (None, "disk"):
            result = disk(args, work, key)
            if result:
                tallies.append(result)
    finally:
        if os.environ.get("CHAOS_KEEP"):
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"chaos: {time.time() - started:.0f} s on {os.cpu_count()} cores; client timeout {CLIENT_TIMEOUT:.0f} s")
    print("| fault | requests | answers by status | never answered | 200/202 missing from the store | refused but stored | outcome unknown and stored: retry given the first answer, decided once | process deaths | s to first good answer after the fault (worst) | slowest refusal s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    broken = False
    for tally in tallies:
        print(tally.line())
        broken = broken or tally.broken()
        if getattr(tally, "late", 0):
            log(f"{tally.name}: {tally.late} of {tally.during} requests sent during the lock answered later than the deadline + 1 s")
            broken = True
        if getattr(tally, "torn", 0):
            log(f"{tally.name}: {tally.torn} outbox lines not whole")
            broken = True
    print()
    if broken:
        print("chaos: a promise broke (see above)")
        sys.exit(1)
    print("chaos: every request answered, nothing acknowledged lost, nothing refused stored, no process died")


if __name__ == "__main__":
    main()
