# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""The frame of every ironpool.iaas module: shared options, the connection, and errors turned into
task failures (``fail_json``) whose message names the option at fault."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ironpool.iaas.plugins.module_utils.client import (
    HAS_IRONPOOL,
    IRONPOOL_IMPORT_ERROR,
    ConnectionOptionError,
    connect,
    connection_argument_spec,
    missing_ironpool_message,
)
from ansible_collections.ironpool.iaas.plugins.module_utils.errors import OptionError, describe_api_error

try:
    from ironpool.api.errors import ApiError
    from ironpool.client import ServerUnreachable
except ImportError:  # reported by IronpoolModule.execute through missing_required_lib
    pass


class IronpoolModule:
    """Subclasses set ``argument_spec`` (beyond the connection options), ``module_kwargs``
    (``required_if``, ``mutually_exclusive``, ...) and ``fields`` (API field path -> option), and
    implement :meth:`run`, which ends with :meth:`exit`."""

    argument_spec: Mapping[str, Any] = {}
    module_kwargs: Mapping[str, Any] = {}
    fields: Mapping[str, str] = {}

    def __init__(self) -> None:
        spec = connection_argument_spec()
        spec.update(self.argument_spec)
        self.module = AnsibleModule(argument_spec=spec, supports_check_mode=True, **self.module_kwargs)
        self.params: dict[str, Any] = self.module.params
        self.check_mode: bool = self.module.check_mode
        self.diff_mode: bool = bool(self.module._diff)
        self.client: Any = None
        self.namespace = "default"

    def execute(self) -> NoReturn:
        """Connect, :meth:`run`, and fail with a clear message on any error."""
        if not HAS_IRONPOOL:
            self.module.fail_json(msg=missing_ironpool_message(), exception=IRONPOOL_IMPORT_ERROR)
        try:
            self.client = connect(self.params)
        except ConnectionOptionError as exc:
            self.fail(str(exc))
        self.namespace = self.client.config.namespace
        try:
            with self.client:
                self.run()
        except OptionError as exc:
            self.fail(str(exc))
        except ApiError as exc:
            self.fail(describe_api_error(exc, self.fields), reason=exc.reason)
        except ServerUnreachable as exc:
            self.fail(str(exc))
        self.fail("the module ended without a result")  # run() always exits; this is a bug guard

    def run(self) -> None:
        raise NotImplementedError

    def fail(self, msg: str, **result: Any) -> NoReturn:
        self.module.fail_json(msg=msg, **result)
        raise AssertionError("unreachable")  # fail_json exits

    def exit(self, **result: Any) -> NoReturn:
        self.module.exit_json(**result)
        raise AssertionError("unreachable")  # exit_json exits
