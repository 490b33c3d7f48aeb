"""ironpool.client: the HTTP client, informers and work queues every controller and front end uses.

* :class:`Client` / :class:`AsyncClient` - typed CRUD, patch, watch (``rest``), configured by
  :class:`ClientConfig` (``config``);
* :class:`Informer` / :class:`SharedInformerFactory` - list-watch caches (``informer``);
* :class:`WorkQueue` - the rate-limited work queue (``workqueue``);
* what the front ends (the CLI, the Ansible collection, the Pulumi provider) share: declaring an
  object (``declare``), what "ready" means per kind (``readiness``) and waiting for it (``wait``).

The names are imported on first use: an Ansible module or a CLI command that needs only
:class:`Client` does not pay for the informers and the asyncio transport at every start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ironpool.lazy import lazy_exports

if TYPE_CHECKING:
    from ironpool.client.config import ClientConfig, ConfigError
    from ironpool.client.informer import Informer, SharedInformerFactory
    from ironpool.client.rest import AsyncClient, Client
    from ironpool.client.wire import ListResult, ServerUnreachable, WatchEvent
    from ironpool.client.workqueue import QueueShutDown, WorkQueue, default_rate_limiter

_MODULES = {
    "AsyncClient": "rest", "Client": "rest", "ClientConfig": "config", "ConfigError": "config",
    "Informer": "informer", "SharedInformerFactory": "informer", "ListResult": "wire",
    "ServerUnreachable": "wire", "WatchEvent": "wire", "QueueShutDown": "workqueue",
    "WorkQueue": "workqueue", "default_rate_limiter": "workqueue",
}

__all__ = [
    "AsyncClient",
    "Client",
    "ClientConfig",
    "ConfigError",
    "Informer",
    "ListResult",
    "QueueShutDown",
    "ServerUnreachable",
    "SharedInformerFactory",
    "WatchEvent",
    "WorkQueue",
    "default_rate_limiter",
]


__getattr__ = lazy_exports(__name__, _MODULES)
