"""How clients reach ``ironpool up``: its local CA and serving certificate, and the kubeconfig.

The CA (``pki/ca.crt``, ``pki/ca.key``) is made once per data directory; the serving certificate
names every address the apiserver is reached at and is renewed when that changes (another
``--listen``) or it nears expiry. The CA also verifies client certificates, so an administrator can
sign one for a user (CN = user, O = groups) with the CA's key, as with a kubeadm cluster.
"""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import yaml

from ironpool.apiserver import CertificateAuthority, TlsFiles, ensure_serving_cert, write_private

KUBECONFIG_NAME = "ironpool"


def serving_hosts(listen_host: str) -> list[str]:
    """The names and addresses the serving certificate must carry for ``listen_host``."""
    hosts = ["localhost", "127.0.0.1", "::1"]
    try:
        wildcard = ipaddress.ip_address(listen_host).is_unspecified
    except ValueError:
        wildcard = False
    if wildcard:
        name = socket.gethostname()
        hosts += [name, socket.getfqdn(name)]
    elif listen_host not in hosts:
        hosts.insert(0, listen_host)
    return list(dict.fromkeys(h for h in hosts if h))


def prepare_tls(pki: Path, listen_host: str) -> TlsFiles:
    """The CA and serving certificate in ``pki``, made or renewed as needed."""
    ca = CertificateAuthority.ensure(pki)
    serving = ensure_serving_cert(ca, pki, serving_hosts(listen_host))
    return TlsFiles(str(serving.cert), str(serving.key), client_ca_file=str(ca.paths.cert))


def write_kubeconfig(path: Path, server: str, token: str, ca_file: str | None,
                     namespace: str = "default", user: str = "admin") -> Path:
    """A kubeconfig for ``server`` with one context, ``ironpool`` (mode 0600: it holds a token)."""
    cluster: dict[str, str] = {"server": server}
    if ca_file:
        cluster["certificate-authority"] = ca_file
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": KUBECONFIG_NAME, "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": KUBECONFIG_NAME,
                      "context": {"cluster": KUBECONFIG_NAME, "user": user, "namespace": namespace}}],
        "current-context": KUBECONFIG_NAME,
        "preferences": {},
    }
    write_private(path, yaml.safe_dump(config, sort_keys=False).encode())
    return path
