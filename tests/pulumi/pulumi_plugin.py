"""The real dynamic-provider plugin, ``python -m pulumi.dynamic``, driven over gRPC as the engine does.

The Pulumi CLI launches this very module for dynamic resources, reads the port it prints and calls
``Configure``, ``Check``, ``Diff``, ``Create``, ``Read``, ``Update`` and ``Delete`` on it. Properties go
over the wire as protobuf Structs (numbers become doubles), the provider is unpickled from the
``__provider`` property in this other process, and at most four calls run at once: all of that is
real here. :class:`Plugin` adds only plain-dict conveniences.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import grpc
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime import rpc
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

_SERIALIZER = concurrent.futures.ThreadPoolExecutor(1)
DIFF_SOME, DIFF_NONE = provider_pb2.DiffResponse.DIFF_SOME, provider_pb2.DiffResponse.DIFF_NONE
Props = dict[str, Any]


def to_struct(props: Mapping[str, Any]) -> Any:
    """``props`` as the protobuf Struct the engine sends (serialised on a private event loop, so it
    also works while the SDK's own loop runs in this thread)."""
    return _SERIALIZER.submit(lambda: asyncio.run(rpc.serialize_properties(dict(props), {}))).result()


def from_struct(struct: Any, keep_unknowns: bool = False) -> Props:
    """A Struct the plugin answered with, as plain Python."""
    return dict(rpc.deserialize_properties(struct, keep_unknowns))


def provider_payload(provider: Any) -> str:
    """The ``__provider`` property a dynamic resource carries: the pickled provider, base64."""
    return str(serialize_provider(provider))


class PluginError(Exception):
    """A call failed; ``details`` holds what the plugin reported (the provider's traceback)."""

    def __init__(self, method: str, error: grpc.RpcError) -> None:
        self.code = error.code()
        self.details = error.details() or ""
        super().__init__(f"{method} failed ({self.code.name}): {self.details.strip().splitlines()[-1:]}")


class Plugin:
    """One ``python -m pulumi.dynamic`` process and a gRPC stub to it."""

    def __init__(self, project: str = "proj", env: Mapping[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.project = project
        full_env = {**os.environ, "PULUMI_PROJECT": project, **(env or {})}
        # The address argument is the engine's; the plugin ignores it, as under the CLI.
        self.process = subprocess.Popen([sys.executable, "-u", "-m", "pulumi.dynamic", "127.0.0.1:1"],
                                        stdout=subprocess.PIPE, env=full_env, cwd=cwd)
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode().strip()
        if not line.isdigit():
            self.process.kill()
            raise RuntimeError(f"the plugin printed {line!r} instead of its port")
        self.channel = grpc.insecure_channel(f"127.0.0.1:{line}")
        grpc.channel_ready_future(self.channel).result(timeout=10)
        self.stub = provider_pb2_grpc.ResourceProviderStub(self.channel)

    def close(self) -> None:
        self.channel.close()
        self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> Plugin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def urn(self, typ: str, name: str, stack: str = "dev") -> str:
        return f"urn:pulumi:{stack}::{self.project}::{typ}::{name}"

    def _call(self, method: str, request: Any) -> Any:
        try:
            return getattr(self.stub, method)(request)
        except grpc.RpcError as exc:
            raise PluginError(method, exc) from None

    # -- the engine's calls, with plain dicts ------------------------------------------------------

    def configure(self, config: Mapping[str, Any], secret_keys: tuple[str, ...] = ()) -> None:
        """The stack configuration, secret values wrapped as the engine sends them."""
        args = {k: rpc.wrap_rpc_secret(v) if k in secret_keys else v for k, v in config.items()}
        self._call("Configure", provider_pb2.ConfigureRequest(args=to_struct(args)))

    def check(self, urn: str, olds: Props, news: Props) -> tuple[Props, list[tuple[str, str]]]:
        req = provider_pb2.CheckRequest(urn=urn, olds=to_struct(olds), news=to_struct(news))
        resp = self._call("Check", req)
        return from_struct(resp.inputs, True), [(f.property, f.reason) for f in resp.failures]

    def diff(self, resource_id: str, urn: str, olds: Props, news: Props, old_inputs: Props) -> Any:
        return self._call("Diff", provider_pb2.DiffRequest(
            id=resource_id, urn=urn, olds=to_struct(olds), news=to_struct(news),
            old_inputs=to_struct(old_inputs)))

    def create(self, urn: str, inputs: Props) -> tuple[str, Props]:
        resp = self._call("Create", provider_pb2.CreateRequest(urn=urn, properties=to_struct(inputs)))
        return resp.id, from_struct(resp.properties)

    def read(self, resource_id: str, urn: str, outputs: Props,
             inputs: Props) -> tuple[str, Props, Props | None]:
        resp = self._call("Read", provider_pb2.ReadRequest(
            id=resource_id, urn=urn, properties=to_struct(outputs), inputs=to_struct(inputs)))
        new_inputs = from_struct(resp.inputs) if resp.HasField("inputs") else None
        return resp.id, from_struct(resp.properties), new_inputs

    def update(self, resource_id: str, urn: str, olds: Props, news: Props, old_inputs: Props) -> Props:
        resp = self._call("Update", provider_pb2.UpdateRequest(id=resource_id, urn=urn, olds=to_struct(olds),
                                                              news=to_struct(news),
                                                              old_inputs=to_struct(old_inputs)))
        return from_struct(resp.properties)

    def delete(self, resource_id: str, urn: str, outputs: Props, old_inputs: Props | None = None) -> None:
        self._call("Delete", provider_pb2.DeleteRequest(
            id=resource_id, urn=urn, properties=to_struct(outputs), old_inputs=to_struct(old_inputs or {})))
