"""The requester of a CertificateSigningRequest is the apiserver's word: whatever a client puts in
``spec.username``/``groups`` (by POST or by a server-side apply that creates), the stored request
names who sent it, so a bootstrap token cannot pass for another pool's. A bootstrap token may only
create and read requests: it cannot approve its own."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric import ec
from ironpool.apiserver.app import build_app
from ironpool.apiserver.auth.authentication import Authenticator, parse_token_file
from ironpool.certificates.bootstrap import PoolIdentity, request_pem
from ironpool.store.sqlite import SQLiteStore

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
TOKENS = ('a,admin,1,"system:masters"\n'
          'abcdef.0123456789abcdef,system:bootstrap:abcdef,b,'
          '"system:bootstrappers,system:bootstrappers:ironpool:pool:p1"\n')
BOOT = {"Authorization": "Bearer abcdef.0123456789abcdef"}
FORGED = {"username": "system:bootstrap:zzzzzz", "groups": ["system:bootstrappers",
                                                           "system:bootstrappers:ironpool:pool:p2"]}


def _csr(name: str) -> dict[str, object]:
    pem = request_pem(ec.generate_private_key(ec.SECP256R1()),
                      PoolIdentity("compute.ironcore.dev:system:machinepool:p2",
                                   "compute.ironcore.dev:system:machinepools"))
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {"request": base64.b64encode(pem).decode(), "signerName": "ironpool.dev/pool-client",
                     "usages": ["client auth"], **FORGED}}


async def test_the_requester_is_who_sent_the_request(store: SQLiteStore, tmp_path: Path) -> None:
    app = build_app(store, Authenticator(parse_token_file(TOKENS)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        posted = await c.post(CSRS, json=_csr("posted"), headers=BOOT)
        assert posted.status_code == 201, posted.text
        spec = posted.json()["spec"]
        assert spec["username"] == "system:bootstrap:abcdef"
        assert "system:bootstrappers:ironpool:pool:p1" in spec["groups"]
        assert "system:bootstrappers:ironpool:pool:p2" not in spec["groups"]

        def apply(name: str, token: str) -> Any:
            return c.patch(f"{CSRS}/{name}", json=_csr(name), params={"fieldManager": "t", "force": "true"},
                           headers={"Authorization": f"Bearer {token}",
                                    "Content-Type": "application/apply-patch+yaml"})

        assert (await apply("applied", "abcdef.0123456789abcdef")).status_code == 403  # no patch right
        applied = await apply("applied", "a")
        assert applied.status_code in (200, 201), applied.text
        assert applied.json()["spec"]["username"] == "admin"  # an apply that creates: the same word
        approval = {**posted.json(), "status": {"conditions": [{"type": "Approved", "status": "True"}]}}
        refused = await c.put(f"{CSRS}/posted/approval", json=approval, headers=BOOT)
        assert refused.status_code == 403, refused.text
        listed = await c.get("/apis/compute.ironcore.dev/v1alpha1/machines", headers=BOOT)
        assert listed.status_code == 403  # the token buys certificate requests, nothing else
        admin = await c.put(f"{CSRS}/posted/approval", json=approval, headers={"Authorization": "Bearer a"})
        assert admin.status_code == 200 and admin.json()["status"]["conditions"][0]["type"] == "Approved"
        undo = {**admin.json(), "status": {"conditions": []}}
        kept = await c.put(f"{CSRS}/posted/approval", json=undo, headers={"Authorization": "Bearer a"})
        assert kept.status_code == 422 and "status.conditions" in kept.text
