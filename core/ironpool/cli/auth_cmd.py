"""``ironpool auth can-i VERB RESOURCE [NAME]``: ask the apiserver whether the current user may do
something (a SelfSubjectAccessReview, as ``kubectl auth can-i`` sends). Prints ``yes`` or ``no``
and exits 0 or 1, like kubectl."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel

from ironpool.api.errors import ApiError
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.resources import resolve
from ironpool.cli.connection import client_config, connection_options
from ironpool.cli.errors import cli_errors
from ironpool.client.rest import Client

SSAR = ResourceInfo("authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews",
                    "selfsubjectaccessreview", (), False, BaseModel, False)


def review_spec(verb: str, resource: str, name: str | None, namespace: str | None) -> dict[str, Any]:
    """The ``spec`` of a review: a non-resource URL (``/version``) or ``resource[/subresource]`` of a
    served kind (any name the CLI knows: ``machines``, ``machine``, ``m``, ``machines.compute...``)."""
    if resource.startswith("/"):
        return {"nonResourceAttributes": {"verb": verb, "path": resource}}
    base, _, sub = resource.partition("/")
    try:
        info = resolve(base)
    except ApiError:
        group, plural, namespaced = "", base, True  # not served here: asked as given (kubectl warns)
    else:
        group, plural, namespaced = info.group, info.plural, info.namespaced
    attrs = {"verb": verb, "group": group, "resource": plural}
    if sub:
        attrs["subresource"] = sub
    if name:
        attrs["name"] = name
    if namespaced and namespace:
        attrs["namespace"] = namespace
    return {"resourceAttributes": attrs}


@click.group("auth")
def auth() -> None:
    """Inspect authorization."""


@auth.command("can-i")
@click.argument("verb")
@click.argument("resource")
@click.argument("name", required=False)
@click.option("-A", "--all-namespaces", is_flag=True, help="Ask about every namespace at once.")
@connection_options()
def can_i(verb: str, resource: str, name: str | None, all_namespaces: bool, server: str | None,
          token: str | None, token_file: Path | None, namespace: str | None) -> None:
    """Whether you may VERB RESOURCE (``machines``, ``machines/status``, ``/version``), optionally
    the one named NAME, in the namespace (-n, default from config) or everywhere (-A).

    Exit status 0 means yes, 1 no (as kubectl auth can-i)."""
    with cli_errors():
        config = client_config(server, token, token_file, namespace)
        spec = review_spec(verb, resource, name, None if all_namespaces else config.namespace)
        with Client(config) as client:
            review = client.create_raw(SSAR, {"apiVersion": "authorization.k8s.io/v1",
                                              "kind": "SelfSubjectAccessReview", "spec": spec})
    status = review.get("status") or {}
    if status.get("allowed"):
        click.echo("yes")
        sys.exit(0)
    reason = status.get("reason")
    click.echo(f"no - {reason}" if reason else "no")
    sys.exit(1)
