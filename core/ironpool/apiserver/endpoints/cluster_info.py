"""``kube-public/cluster-info``, as kubeadm publishes it: a ConfigMap, readable without
authentication, whose ``data.kubeconfig`` names the cluster's CA (``certificate-authority-data``) and
server. A joining host reads it over TLS it cannot verify yet and trusts the CA only if its public
key hashes to the pin it was given (``--discovery-token-ca-cert-hash``), so the join command need not
carry the CA. Only this one object is served at this path (ironpool serves no ConfigMaps otherwise)."""

from __future__ import annotations

import base64

import yaml
from starlette.requests import Request
from starlette.responses import Response

from ironpool.api import errors
from ironpool.apiserver.endpoints.responses import error_response, json_response

CLUSTER_INFO_PATH = "/api/v1/namespaces/kube-public/configmaps/cluster-info"


def cluster_info(ca_pem: bytes, server: str) -> dict[str, object]:
    """The ConfigMap: a kubeconfig with the CA and server, and nothing secret."""
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "", "cluster": {"certificate-authority-data": base64.b64encode(ca_pem).decode(),
                                              "server": server}}],
        "contexts": [], "current-context": "", "users": [],
    }
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cluster-info", "namespace": "kube-public"},
            "data": {"kubeconfig": yaml.safe_dump(kubeconfig, sort_keys=False)}}


class ClusterInfoEndpoint:
    """Serves the cluster-info ConfigMap of an apiserver that knows its CA (else a 404)."""

    def __init__(self, ca_pem: bytes | None) -> None:
        self.ca_pem = ca_pem

    async def handle(self, request: Request) -> Response:
        if self.ca_pem is None:
            return error_response(errors.NotFound('configmaps "cluster-info" not found (this apiserver was '
                                                  "given no client CA to publish)", kind="configmaps",
                                                  name="cluster-info"))
        host = request.headers.get("host") or f"{request.url.hostname}:{request.url.port}"
        return json_response(cluster_info(self.ca_pem, f"{request.url.scheme}://{host}"))
