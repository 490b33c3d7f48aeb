"""ironpool.client: the HTTP client, informers and work queues every controller and front end uses.

* :class:`Client` / :class:`AsyncClient` - typed CRUD, patch, watch (``rest``), configured by
  :class:`ClientConfig` (``config``);
* :class:`Informer` / :class:`SharedInformerFactory` - list-watch caches (``informer``);
* :class:`WorkQueue` - the rate-limited work queue (``workqueue``).
"""

from ironpool.client.config import ClientConfig, ConfigError
from ironpool.client.informer import Informer, SharedInformerFactory
from ironpool.client.rest import AsyncClient, Client
from ironpool.client.wire import ListResult, ServerUnreachable, WatchEvent
from ironpool.client.workqueue import QueueShutDown, WorkQueue, default_rate_limiter

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
