# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""Mapping API field paths to module options."""

from __future__ import annotations

from ironpool.api.errors import Cause, Invalid

from ansible_collections.ironpool.iaas.plugins.module_utils.errors import describe_api_error, option_for

FIELDS = {"spec.volumes": "volumes", "spec.volumes[0]": "image", "spec.machineClassRef": "machine_class"}


def test_the_longest_matching_prefix_names_the_option() -> None:
    assert option_for("spec.volumes[0].localDisk.image", FIELDS) == "image"
    assert option_for("spec.volumes[1].device", FIELDS) == "volumes"
    assert option_for("spec.machineClassRef.name", FIELDS) == "machine_class"
    assert option_for("spec.volumesX", FIELDS) is None
    assert option_for("spec.power", FIELDS) is None


def test_api_errors_read_as_options() -> None:
    exc = Invalid(message="Machine is invalid", causes=[
        Cause("spec.machineClassRef.name", "Required value"), Cause("spec.power", "Unsupported value")])
    assert describe_api_error(exc, FIELDS) == (
        "machine_class: Required value (spec.machineClassRef.name); spec.power: Unsupported value")
    assert describe_api_error(Invalid(message="plain"), FIELDS) == "plain"
