"""One authenticated user cannot take the server from everyone else, against a real apiserver process
over real sockets: a user opening far more watches than its limit gets 429 past it and holds at most
its share of connections, while another user, an administrator, a pool's heartbeat and ``/healthz``
connect and are served; selectors past their bounds are refused naming the bound. (The figures at
scale, 10,000 watches and eight clients with the largest selector, are ``bench/fairness.py``'s.)"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ironpool.api.selectors import MAX_SELECTOR_BYTES, MAX_SELECTOR_TERMS

from tests.hardening.harness import (
    ADMIN,
    POOL,
    POOL_USER,
    SECRETS,
    USER,
    USER_NAMESPACE,
    Prober,
    Server,
    assert_healthy,
    grant_edit,
    start_server,
    stop_server,
)
from tests.helpers.wait import wait_for

MAX_CONNECTIONS = 400
PER_USER_CONNECTIONS = 150
PER_USER_WATCHES = 50
ATTEMPTS = 600
LEASES = "/apis/coordination.k8s.io/v1/namespaces/ironpool-machinepool-lease/leases"
USER_SECRETS = f"/api/v1/namespaces/{USER_NAMESPACE}/secrets"

# The attacker is a process of its own: one watch request per new connection, one after another, each
# connection kept open whatever the answer; then what the server left open is counted.
WATCH_HOG = """
import json, select, socket, sys
port, token, path, attempts = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
request = (f"GET {path}?watch=1&timeoutSeconds=300 HTTP/1.1\\r\\nHost: x\\r\\n"
           f"Authorization: Bearer {token}\\r\\n\\r\\n").encode()
held, codes = [], {}
for _ in range(attempts):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(request)
        head = s.recv(65536).split(b"\\r\\n", 1)[0].decode()
    except OSError as exc:
        codes["error"] = codes.get("error", 0) + 1
        continue
    code = head.split(" ")[1] if head.startswith("HTTP/1.1 ") else "closed"
    codes[code] = codes.get(code, 0) + 1
    held.append(s)
# A socket the server closed reads as ready with nothing in it; read until nothing more happens.
open_ = set(held)
while True:
    ready, _, _ = select.select(list(open_), [], [], 0.5)
    if not ready:
        break
    for s in ready:
        if not s.recv(65536):
            open_.discard(s)
print(json.dumps({"codes": codes, "open": len(open_)}), flush=True)
sys.stdin.read()
"""


@pytest.fixture(scope="module")
def fair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """An apiserver with small caps, so the attack is quick; the ordinary user bound to edit."""
    tmp: Path = tmp_path_factory.mktemp("fair")
    running = start_server(tmp, "--max-connections", str(MAX_CONNECTIONS),
                           "--max-connections-per-user", str(PER_USER_CONNECTIONS),
                           "--max-watches-per-user", str(PER_USER_WATCHES))
    try:
        grant_edit(running)
        yield running
    finally:
        stop_server(running)


def test_a_user_holding_watches_leaves_room_for_everyone_else(fair: Server) -> None:
    attacker = subprocess.Popen([sys.executable, "-c", WATCH_HOG, str(fair.port), USER, USER_SECRETS,
                                 str(ATTEMPTS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert attacker.stdout is not None and attacker.stdin is not None
        with Prober(fair) as probe:
            report = json.loads(attacker.stdout.readline())
            print(f"attacker: {report}")
            # Its watches up to the limit; 429 past it (and past its share of connections).
            assert report["codes"] == {"200": PER_USER_WATCHES, "429": ATTEMPTS - PER_USER_WATCHES}
            assert report["open"] <= PER_USER_CONNECTIONS
            # Meanwhile everyone else connects and is served: an administrator, a pool's heartbeat,
            # another namespace's reader, and the user's own requests on a connection it has.
            with fair.client(ADMIN) as admin:
                assert admin.get(SECRETS).status_code == 200
                admin_watch = admin.get(SECRETS, params={"watch": "1", "timeoutSeconds": "1"})
                assert admin_watch.status_code == 200
            with fair.client(POOL) as pool:
                lease = {"metadata": {"name": POOL_USER.rsplit(":", 1)[1]},
                         "spec": {"holderIdentity": "p1", "leaseDurationSeconds": 40}}
                assert pool.post(LEASES, json=lease).status_code in (201, 409)
            with fair.client(USER) as user:
                refused = user.get(USER_SECRETS, params={"watch": "1", "timeoutSeconds": "1"})
                assert refused.status_code == 429, refused.text
                assert "too many" in refused.json()["message"]
        assert probe.samples and not probe.failures, probe.failures[:3]
    finally:
        attacker.stdin.close()  # type: ignore[union-attr]
        attacker.wait(timeout=30)
    # Its watches ended with its connections: it may watch again.
    with fair.client(USER) as user:
        wait_for(lambda: user.get(USER_SECRETS, params={"watch": "1", "timeoutSeconds": "1"}).status_code
                 == 200, 30, "the user's watch slots given back")


def test_watches_that_are_not_read_hold_little_memory(fair: Server) -> None:
    """A watch starts with every object of its collection; one whose client never reads held the
    whole collection decoded (the benchmark's 1,000 such watches of 1,000 Secrets took 15 GB, and
    the kernel ended the process). Now each holds a page of it and one write's worth."""
    grant_edit(fair, "team-big")
    secrets_path = "/api/v1/namespaces/team-big/secrets"
    big = {"metadata": {"name": ""}, "stringData": {"blob": "x" * 16_000}}
    with fair.client(USER) as user:
        for i in range(300):
            big["metadata"]["name"] = f"big-{i:03d}"
            r = user.post(secrets_path, json=big)
            assert r.status_code in (201, 409), r.text
    before = fair.rss()
    attacker = subprocess.Popen([sys.executable, "-c", WATCH_HOG, str(fair.port), USER, secrets_path,
                                 str(PER_USER_WATCHES)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)
    try:
        assert attacker.stdout is not None
        report = json.loads(attacker.stdout.readline())  # once nothing more arrives on its sockets
        assert report["codes"] == {"200": PER_USER_WATCHES}
        grew = fair.rss() - before
        print(f"{PER_USER_WATCHES} unread watches of 300 x 16 KB: resident memory +{grew / 2**20:.0f} MiB")
        assert grew < 150 * 2**20, grew  # holding each collection decoded: about 600 MiB
        assert fair.alive()
    finally:
        attacker.stdin.close()  # type: ignore[union-attr]
        attacker.wait(timeout=30)


@pytest.mark.latency
def test_healthz_while_a_user_holds_its_watches(fair: Server) -> None:
    attacker = subprocess.Popen([sys.executable, "-c", WATCH_HOG, str(fair.port), USER, USER_SECRETS,
                                 str(ATTEMPTS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert attacker.stdout is not None and attacker.stdin is not None
        json.loads(attacker.stdout.readline())
        with Prober(fair) as probe, fair.client(ADMIN) as admin:
            wait_for(lambda: admin.get(SECRETS).status_code == 200 and len(probe.samples) >= 100, 60,
                     "100 healthz probes during the hold", interval=0.05)
        assert_healthy(probe, at_least=100)
    finally:
        attacker.stdin.close()  # type: ignore[union-attr]
        attacker.wait(timeout=30)


# Eight keep-alive connections of the user, each LISTing with the largest selector allowed, back to back.
SELECTOR_HOG = """
import http.client, sys, threading, time
from urllib.parse import quote
port, token, path, selector = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
seconds = float(sys.argv[5])
url = f"{path}?labelSelector={quote(selector)}"
done = time.monotonic() + seconds
counts = []
def loop():
    conn = http.client.HTTPConnection("127.0.0.1", port)
    n = 0
    while time.monotonic() < done:
        conn.request("GET", url, headers={"Authorization": f"Bearer {token}"})
        r = conn.getresponse()
        r.read()
        assert r.status == 200, r.status
        n += 1
    counts.append(n)
threads = [threading.Thread(target=loop) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(sum(counts), flush=True)
"""


def largest_selector() -> tuple[str, dict[str, str]]:
    """The largest selector allowed (every term a set value, values as long as the bytes allow) and
    labels matching all of it: no requirement fails early."""
    for length in range(63, 0, -1):
        values = [f"v{j}" + "x" * (length - 2) for j in range(4)]
        keys = [f"example.com/key-{i:03d}" for i in range(MAX_SELECTOR_TERMS // 4)]
        selector = ",".join(f"{k} in ({','.join(values)})" for k in keys)
        if len(selector) <= MAX_SELECTOR_BYTES:
            return selector, {k: values[0] for k in keys}
    raise AssertionError("no selector fits")


@pytest.mark.latency
def test_healthz_while_eight_clients_list_with_the_largest_selector(fair: Server) -> None:
    selector, labels = largest_selector()
    with fair.client(USER) as user:
        for i in range(200):
            r = user.post(USER_SECRETS, json={"metadata": {"name": f"labelled-{i:03d}", "labels": labels}})
            assert r.status_code in (201, 409), r.text
    lister = subprocess.Popen([sys.executable, "-c", SELECTOR_HOG, str(fair.port), USER, USER_SECRETS,
                               selector, "15"], stdout=subprocess.PIPE, text=True)
    try:
        with Prober(fair) as probe:
            assert lister.stdout is not None
            lists = int(lister.stdout.readline())
        print(f"{lists} LISTs of 200 objects with a {len(selector)}-byte, {MAX_SELECTOR_TERMS}-term selector")
        assert lists > 0
        assert_healthy(probe, at_least=20)
    finally:
        lister.wait(timeout=60)


def test_selectors_past_their_bounds_are_refused_naming_the_bound(fair: Server) -> None:
    many_terms = ",".join(f"k{i}=v" for i in range(MAX_SELECTOR_TERMS + 1))
    too_long = "k in (" + ",".join(f"value-{i:05d}" for i in range(MAX_SELECTOR_TERMS - 2)) + ")"
    too_long += "," + "a" * (MAX_SELECTOR_BYTES - len(too_long) + 1)
    largest, _ = largest_selector()
    with fair.client(USER) as user:
        for param in ("labelSelector", "fieldSelector"):
            for selector, words in ((many_terms, f"more than the limit of {MAX_SELECTOR_TERMS}"),
                                    (too_long, f"more than the limit of {MAX_SELECTOR_BYTES} bytes")):
                for extra in ({}, {"watch": "1"}):
                    r = user.get(USER_SECRETS, params={param: selector, **extra})
                    assert r.status_code == 400, (param, r.status_code, r.text[:300])
                    assert r.json()["message"].startswith(f"{param}: ") and words in r.json()["message"]
        ok = user.get(USER_SECRETS, params={"labelSelector": largest})
        assert ok.status_code == 200, ok.text[:300]
