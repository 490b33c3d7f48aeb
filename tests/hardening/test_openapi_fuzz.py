"""A fuzz pass generated from the apiserver's OpenAPI document (schemathesis) over every path and
verb, against a real apiserver process: requests that fit the schema and requests that do not, as
the administrator. No answer may be a 5xx, the process must live through it, and a refused (4xx)
request must leave what it aimed at unchanged.

The examples are derandomized (the same every run, as CI needs) and few per operation
(``IRONPOOL_FUZZ_EXAMPLES``, default 5, for each of: valid requests in the namespace ``default``,
valid requests anywhere, invalid requests); set it higher to fuzz longer locally. The paths of the
alias groups (OpenKCM's) get one example of each: below their edge they are the IronCore paths.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from ironpool.api.group_aliases import GROUP_ALIASES
from ironpool.apiserver.endpoints.openapi import openapi_document
from schemathesis import GenerationMode

from tests.hardening.harness import ADMIN, Server

STATUSES: Counter[int] = Counter()  # answers seen, reported at the end
FUZZED: set[str] = set()  # the operations fuzzed
AUTH = {"Authorization": f"Bearer {ADMIN}"}
EXAMPLES = int(os.environ.get("IRONPOOL_FUZZ_EXAMPLES", "5"))
SCHEMA = schemathesis.openapi.from_dict(openapi_document())
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    """The fuzzer's own connection (schemathesis sends through requests)."""
    with requests.Session() as s:
        yield s


def target_state(client: httpx.Client, path: str) -> tuple[int, bytes]:
    """What a request to ``path`` aims at: the object it names, or the items of its collection."""
    r = client.get(path)
    if r.status_code != 200:
        return r.status_code, b""
    body = r.json()
    if isinstance(body.get("items"), list):
        return 200, repr(body["items"]).encode()
    return 200, r.content


def test_the_fuzz_pass_covers_every_path_and_verb() -> None:
    document = openapi_document()
    verbs = {(method.upper(), path) for path, item in document["paths"].items() for method in item
             if method in ("get", "put", "post", "patch", "delete")}
    assert {(op.method.upper(), op.path) for op in OPERATIONS} == verbs
    assert len(verbs) > 100


@pytest.mark.parametrize("operation", OPERATIONS, ids=[f"{op.method.upper()} {op.path}" for op in OPERATIONS])
def test_no_server_error(operation: Any, server: Server, client: httpx.Client,
                         session: requests.Session) -> None:
    # Half of the valid requests go to the namespace that exists, so they get past the lookup.
    pinned = {"namespace": "default"} if "{namespace}" in operation.path else None
    strategy = st.one_of(operation.as_strategy(GenerationMode.POSITIVE, path_parameters=pinned),
                         operation.as_strategy(GenerationMode.POSITIVE),
                         operation.as_strategy(GenerationMode.NEGATIVE))
    watch = operation.method.upper() == "GET" and "{name}" not in operation.path
    FUZZED.add(f"{operation.method} {operation.path}")
    aliased = operation.path.startswith("/apis/") and operation.path.split("/")[2] in GROUP_ALIASES

    @settings(max_examples=3 * (1 if aliased else EXAMPLES), derandomize=True, database=None, deadline=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def fuzz(case: Any) -> None:
        if watch and case.query:
            case.query["timeoutSeconds"] = "1"  # a watch the fuzzer opens ends quickly
        path = case.formatted_path
        read_path = path.removesuffix("/status").removesuffix("/binding").removesuffix("/eviction")
        before = target_state(client, read_path)
        response = case.call(base_url=server.url, session=session, headers=AUTH, timeout=30)
        STATUSES[response.status_code] += 1
        what = (case.method, path, case.query, response.status_code, response.text[:1000])
        assert response.status_code < 500, what
        assert server.alive(), server.log()[-3000:]
        if 400 <= response.status_code < 500 and case.method.upper() != "GET":
            assert target_state(client, read_path) == before, what

    fuzz()


def test_fuzz_leaves_no_error_in_the_log(server: Server) -> None:
    print(f"fuzz: {sum(STATUSES.values())} requests, answers {sorted(STATUSES.items())}")
    # The pass reached the API: some requests succeeded, and many were refused.
    assert sum(count for code, count in STATUSES.items() if code < 300) > len(FUZZED) // 4
    assert sum(count for code, count in STATUSES.items() if 400 <= code < 500) > len(FUZZED)
    log = server.log()
    assert "Traceback" not in log, log[-3000:]

