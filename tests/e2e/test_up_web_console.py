"""End to end in a real browser: the web console of ``ironpool up`` (headless Chromium from Debian's
packages, driven through selenium) over HTTPS with the tiny image on real libvirtd.

A wrong token gets the login page and no data; the administrator's token shows the fleet (the pool with
its capacity), both Machines Running with their addresses (and a label filter narrowing the list), a
Volume's page (its claim and attachment; another Volume deleted from its page), a Machine's serial
console in xterm.js with its boot log from the start, carrying keys to the guest and its output back, a
power-off whose new state the page shows by itself (watches), and a placement preview of manifests
that do not fit, with the scheduler's reason. A ``view`` user (bound cluster-wide) sees the fleet, the
Machines and Volumes but is offered no action, and the server refuses those actions when tried by hand.
A client certificate signed by the installation's CA, in Chromium's NSS database, signs in without a
token. Screenshots of each step are saved under the test's temporary folder (the path is printed).
"""

from __future__ import annotations

import secrets
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from cryptography.x509.oid import NameOID
from ironpool.api.resources import resolve
from ironpool.apiserver import CertificateAuthority
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from up_harness import UpInstance, machine_domain, wait_for

from tests.helpers.browser import ClientCert, headless_chromium
from tests.helpers.guests import GUEST_SECONDS

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

MACHINES = resolve("machines")
COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"


def volume(name: str) -> str:
    return f"""apiVersion: storage.ironcore.dev/v1alpha1
kind: Volume
metadata: {{name: {name}, namespace: default}}
spec: {{volumeClassRef: {{name: fast}}, resources: {{storage: 64Mi}}}}
---
"""


def machine(name: str, n: int, data: str | None = None) -> str:
    extra = f"\n    - name: data\n      volumeRef: {{name: {data}}}" if data else ""
    return f"""apiVersion: compute.ironcore.dev/v1alpha1
kind: Machine
metadata:
  name: {name}
  namespace: default
  labels: {{app: web, n: "{n}"}}
spec:
  machineClassRef: {{name: x-small}}
  power: "On"
  volumes:
    - name: root
      localDisk: {{image: tiny, sizeLimit: 1Gi}}{extra}
  networkInterfaces:
    - name: primary
      ephemeral:
        networkInterfaceTemplate:
          spec:
            networkRef: {{name: lab}}
            ipFamilies: [IPv4]
            ips:
              - ephemeral:
                  prefixTemplate:
                    spec: {{ipFamily: IPv4, prefixLength: 32, parentRef: {{name: lab-v4}}}}
---
"""


NETWORK = """apiVersion: networking.ironcore.dev/v1alpha1
kind: Network
metadata: {name: lab, namespace: default}
---
apiVersion: ipam.ironcore.dev/v1alpha1
kind: Prefix
metadata: {name: lab-v4, namespace: default}
spec: {prefix: 10.10.0.0/24}
---
"""

# Two machines of class small (2 cpu each) where two x-small ones (1 cpu each) use half of 4 cpus, and a
# Volume bigger than any pool.
TOO_BIG = """apiVersion: compute.ironcore.dev/v1alpha1
kind: Machine
metadata: {name: big-1}
spec: {machineClassRef: {name: small}}
---
apiVersion: compute.ironcore.dev/v1alpha1
kind: Machine
metadata: {name: big-2}
spec: {machineClassRef: {name: small}}
---
apiVersion: storage.ironcore.dev/v1alpha1
kind: Volume
metadata: {name: huge}
spec: {volumeClassRef: {name: fast}, resources: {storage: 100Ti}}
"""

# The viewer has `view` alone, bound cluster-wide: it reads the fleet (the pools and classes are
# aggregated into `view`, and only a ClusterRoleBinding reaches cluster-scoped objects).
VIEWER = """apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: viewer-view}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: web-viewer}]
"""


class Page:
    """The browser on one ``ironpool up``'s console, with the steps the test takes and screenshots."""

    def __init__(self, driver: WebDriver, url: str, shots: Path) -> None:
        self.driver, self.url, self.shots = driver, url, shots
        self.taken = 0

    def go(self, route: str) -> None:
        self.driver.get(f"{self.url}/ui/#/{route}")

    def text(self, css: str) -> str:
        """The text shown in the first element ``css`` selects ('' if none), read in one step: the
        page redraws live, so an element found in one call may be gone by the next."""
        return str(self.driver.execute_script(
            "const e = document.querySelector(arguments[0]); return e ? e.innerText : ''", css))

    def has(self, css: str) -> bool:
        return bool(self.driver.find_elements(By.CSS_SELECTOR, css))

    def click(self, css: str) -> None:
        self.driver.find_element(By.CSS_SELECTOR, css).click()

    def wait_text(self, css: str, pattern: Callable[[str], bool], timeout: float, what: str) -> str:
        """The text of ``css`` once ``pattern`` holds; else the test fails quoting what it showed (and a
        screenshot of it is saved)."""
        seen = [""]

        def matches() -> str | None:
            seen[0] = self.text(css)
            return seen[0] if seen[0] and pattern(seen[0]) else None

        try:
            return wait_for(matches, timeout, what)
        except pytest.fail.Exception:
            self.shot("failed")
            pytest.fail(f"{what}: not within {timeout}s; {css} showed {seen[0]!r}")

    def sign_in(self, token: str) -> None:
        self.go("login")
        self.driver.execute_script("sessionStorage.clear()")
        self.driver.refresh()  # a fresh start: no user known to the page
        wait_for(lambda: self.has("#token"), 30, "the login page")
        self.driver.find_element(By.ID, "token").send_keys(token)
        self.click("#login")

    def shot(self, name: str) -> None:
        self.taken += 1
        self.driver.save_screenshot(str(self.shots / f"{self.taken:02d}-{name}.png"))


def test_the_web_console_in_a_real_browser(make_up: Callable[..., UpInstance], tmp_path: Path) -> None:
    up = make_up(extra_args=["--capacity-cpu", "4", "--capacity-memory", "4Gi"])
    up.start()
    assert f"{up.url}/ui/" in up.output(), up.output()  # `up` says where the console is
    manifests = up.workdir / "web.yaml"
    # web-2 claims a Volume (its page shows the claim and the attachment); another one is deleted from
    # its page.
    manifests.write_text(NETWORK + volume("web-2-data") + volume("scratch") + machine("web-1", 1)
                         + machine("web-2", 2, data="web-2-data"))
    up.cli("apply", "-f", str(manifests))
    client = up.client()

    def addresses(name: str) -> list[str]:
        m = client.get_raw(MACHINES, name, "default")
        if (m.get("status") or {}).get("state") != "Running":
            return []
        return [ip for nic in m["status"].get("networkInterfaces") or [] for ip in nic.get("ips") or []]

    ips = {n: wait_for(lambda n=n: addresses(n), 4 * GUEST_SECONDS, f"{n} Running with an address")
           for n in ("web-1", "web-2")}
    # Running is the domain's state; the guest takes its terminal a moment later (what is typed before
    # its init opens the console is lost): wait for init's report loop in the console log.
    iri_id, _ = machine_domain(client.get_raw(MACHINES, "web-1", "default")["status"]["machineID"])
    wait_for(lambda: "ironpool-tiny-image: nics:" in up.console_log(iri_id), GUEST_SECONDS,
             "web-1's init to report its NICs on the serial console")
    shots = tmp_path / "screenshots"
    shots.mkdir()
    print(f"web console screenshots: {shots}")
    viewer = up.cli("token", "create", "web-viewer", "--data-dir", str(up.data_dir)).stdout.strip()
    rbac = up.workdir / "viewer.yaml"
    rbac.write_text(VIEWER)
    up.cli("apply", "-f", str(rbac))

    with headless_chromium(trust_cert=up.data_dir / "pki" / "apiserver.crt") as driver:
        page = Page(driver, up.url, shots)
        # A wrong token: the login page says so, and no page shows data, whatever the address asks.
        page.sign_in("not-a-token")
        error = page.wait_text("#login-error", lambda t: "not accepted" in t, 30, "the login page's refusal")
        assert "invalid bearer token" in error, error
        page.shot("wrong-token")
        page.go("machines")
        wait_for(lambda: page.has("#token"), 30, "the login page instead of the Machines")
        assert not page.has("#machines") and "web-1" not in driver.page_source

        # The administrator: the fleet with the pool's capacity, drawn live.
        page.sign_in(up.token())
        wait_for(lambda: driver.execute_script("return document.getElementById('main').dataset.rendered"),
                 30, "the fleet page to render")
        row = page.wait_text(f'#machinepools tr[data-pool="{up.pool}"]', lambda t: "2 cores of 4 cores" in t,
                             60, "the pool with 2 of its 4 cores allocated")
        assert "Ready" in row and "allocated" in row and "GiB" in row, row
        # The heat map: a cell for the machine pool and one for the volume pool.
        assert driver.execute_script("return document.getElementById('heat').dataset.count") == "2"
        assert "1 ready" in page.text("#fleet-summary"), page.text("#fleet-summary")
        page.shot("fleet")

        # Machines: both Running with their addresses; a label selector narrows the list (server side).
        page.go("machines")
        for name in ("web-1", "web-2"):
            got = page.wait_text(f'#machines tr[data-name="{name}"]', lambda t: "Running" in t, 30,
                                 f"{name} Running in the list")
            assert ips[name][0] in got and up.pool in got, got
        page.shot("machines")
        labels = driver.find_element(By.ID, "labels")
        labels.send_keys("n=2")
        page.click("#apply-filter")
        wait_for(lambda: not page.has('#machines tr[data-name="web-1"]')
                 and page.has('#machines tr[data-name="web-2"]'), 30, "the label filter to leave web-2 alone")
        labels.clear()
        page.click("#apply-filter")

        # A Volume's page: its size, pool, claim and attachment; one deleted from its page goes away.
        page.go("volume/default/web-2-data")
        facts = page.wait_text("#facts", lambda t: "Available" in t and "web-2 on pool" in t, 30,
                               "web-2-data Available and attached to web-2")
        assert "64.0 MiB" in facts and "Machine web-2" in page.text("#volume-claim"), facts
        assert page.has("#delete"), page.text("#actions")
        page.shot("volume")
        page.go("volume/default/scratch")
        page.wait_text("#volume-state", lambda t: "Available" in t, 30, "scratch Available")
        page.click("#delete")
        page.click("#delete-confirm")
        page.wait_text("#volume-error", lambda t: "was deleted" in t, 60, "scratch deleted from its page")

        # web-1's serial console in xterm.js: keys reach the guest (its terminal echoes them back).
        page.go("machine/default/web-1")
        page.wait_text("#machine-state", lambda t: t.endswith("Running"), 30, "web-1's detail page")
        page.click("#open-console")
        page.wait_text("#console-state", lambda t: "Connected" in t, 30, "the console to connect")
        # The boot log from the start (the serial log's tail comes first), then what is typed.
        boot = "ironpool-tiny-image: init started"
        wait_for(lambda: boot in driver.execute_script("return IP.consoleText"), 30,
                 "web-1's boot log in the terminal")
        probe = f"webui-{secrets.token_hex(4)}"
        driver.find_element(By.CSS_SELECTOR, ".xterm-helper-textarea").send_keys(probe + "\n")
        page.wait_text(".xterm-rows", lambda t: probe in t, 60, "the guest to echo what was typed")
        page.shot("console")

        # Power off from the detail page: the state changes on the page by itself.
        page.go("machine/default/web-1")
        page.wait_text("#machine-state", lambda t: t.endswith("Running"), 30, "web-1's detail page")
        page.click("#power-off")
        page.wait_text("#machine-state", lambda t: t.endswith("Shutdown"), 4 * GUEST_SECONDS,
                       "web-1 shown Shutdown after Power off")
        assert page.text("#machine-power").endswith("Off") and page.has("#power-on")
        assert client.get_raw(MACHINES, "web-1", "default")["spec"]["power"] == "Off"
        page.shot("powered-off")

        # The placement preview: what does not fit, and why.
        page.go("preview")
        wait_for(lambda: page.has("#manifests"), 30, "the preview page")
        driver.execute_script("document.getElementById('manifests').value = arguments[0]", TOO_BIG)
        page.click("#run-preview")
        table = page.wait_text("#placement", lambda t: "huge" in t and "big-2" in t, 60,
                               "the preview's answer")
        assert table.count("nowhere") >= 2, table
        assert "does not fit" in table and "100 TiB" in table, table
        page.shot("preview")
        assert not client.list_raw(resolve("reservations"), "default").items  # the dry run was removed

        # A viewer: the fleet and the Machines, no actions; the server refuses them by hand too.
        page.click("#signout")
        page.sign_in(viewer)
        page.wait_text(f'#machinepools tr[data-pool="{up.pool}"]', lambda t: "Ready" in t, 30,
                       "the viewer's fleet")
        page.go("machine/default/web-2")
        page.wait_text("#machine-state", lambda t: t.endswith("Running"), 30, "web-2's page for the viewer")
        actions = page.wait_text("#actions", lambda t: "allows no actions" in t, 30,
                                 "no actions for a viewer")
        assert not any(page.has(b) for b in ("#power-off", "#delete", "#open-console")), actions
        page.shot("viewer")
        page.go("volume/default/web-2-data")
        page.wait_text("#volume-state", lambda t: "Available" in t, 30, "web-2-data's page for the viewer")
        actions = page.wait_text("#actions", lambda t: "allows no actions" in t, 30,
                                 "no Volume actions for a viewer")
        assert not page.has("#delete"), actions

    # Signed in by a client certificate the installation's CA signed, in the browser's own certificate
    # store: no token anywhere, the page shows that user's fleet.
    ca = CertificateAuthority.ensure(up.data_dir / "pki")
    cert, key = ca.issue("web-viewer")
    issuer = ca.cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    key_pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    client_cert = ClientCert(cert.public_bytes(Encoding.PEM), key_pem, str(issuer), up.url)
    served = up.data_dir / "pki" / "apiserver.crt"
    with headless_chromium(trust_cert=served, client_cert=client_cert) as driver:
        taken, page = page.taken, Page(driver, up.url, shots)
        page.taken = taken  # its screenshots follow the first browser's
        page.go("fleet")
        page.wait_text(f'#machinepools tr[data-pool="{up.pool}"]', lambda t: "Ready" in t, 30,
                       "the certificate user's fleet")
        assert page.text("#who") == "web-viewer", page.text("#who")
        assert driver.execute_script("return sessionStorage.getItem('ironpool.token')") is None
        page.shot("client-certificate")
        # Signed out, the login page offers the certificate again.
        page.click("#signout")
        wait_for(lambda: page.has("#login-cert"), 30, "the login page after signing out")
        page.click("#login-cert")
        page.wait_text("#who", lambda t: t == "web-viewer", 30, "signed in again by the certificate")

    with httpx.Client(base_url=up.url, verify=ssl.create_default_context(cafile=str(up.ca_file)),
                      headers={"Authorization": f"Bearer {viewer}"}) as by_hand:
        path = f"{COMPUTE}/namespaces/default/machines/web-2"
        assert by_hand.get(path).status_code == 200
        patched = by_hand.patch(path, json={"spec": {"power": "Off"}},
                                headers={"Content-Type": "application/merge-patch+json"})
        assert patched.status_code == 403 and patched.json()["reason"] == "Forbidden", patched.text
        deleted = by_hand.delete(path)
        assert deleted.status_code == 403, deleted.text
        deleted = by_hand.delete("/apis/storage.ironcore.dev/v1alpha1/namespaces/default/volumes/web-2-data")
        assert deleted.status_code == 403, deleted.text
    final: Any = client.get_raw(MACHINES, "web-2", "default")
    assert final["spec"].get("power", "On") == "On" and final["metadata"].get("deletionTimestamp") is None
