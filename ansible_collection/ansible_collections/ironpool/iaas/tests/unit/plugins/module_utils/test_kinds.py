# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""The kinds the modules name without the API's models match the apiserver's resource table."""

from __future__ import annotations

import dataclasses

import pytest
from ironpool.api.errors import BadRequest
from ironpool.api.resources import by_kind

from ansible_collections.ironpool.iaas.plugins.module_utils.kinds import known_kinds, resource


@pytest.mark.parametrize(("api_version", "kind"), known_kinds())
def test_a_named_kind_matches_the_table_but_for_its_model(api_version: str, kind: str) -> None:
    served = by_kind(api_version, kind)
    named = resource(api_version, kind)
    assert named.model is None
    assert dataclasses.replace(named, model=served.model) == served
    assert named.path("default", "x") == served.path("default", "x")


def test_any_other_kind_comes_from_the_table() -> None:
    assert resource("networking.ironcore.dev/v1alpha1", "Network") is \
        by_kind("networking.ironcore.dev/v1alpha1", "Network")
    with pytest.raises(BadRequest, match="no kind"):
        resource("v1", "Nothing")
