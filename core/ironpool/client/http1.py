"""The asyncio client's transport for unary requests: aiohttp's keep-alive connection pool.

A controller or the scheduler sends thousands of small requests a second, so what a request costs
the client matters. Measured on the scheduler benchmark (``bench/scheduler.py --mode api``, 5,000
pools, 2,000 Machines, SQLite; the scheduler's CPU ms per placement, four runs each, 2 shared cores):

==========================================  ============================  =====================
transport                                   scheduler CPU ms / placement  client CPU µs per GET
==========================================  ============================  =====================
httpx ``AsyncClient``                       2.41                          ~1,660
httpcore ``AsyncConnectionPool`` directly   1.65 - 2.17 (mean 1.88)       ~1,250
aiohttp ``ClientSession`` (this module)     1.10 - 1.33 (mean 1.19)       ~100
a hand-written HTTP/1.1 pool (removed)      0.95 - 0.99 (mean 0.96)       ~75
==========================================  ============================  =====================

(The last column: 3,000 GETs of one small object, 16 in flight, against a local apiserver.)
The hand-written pool was about 20 % cheaper per placement than aiohttp: not enough to keep a
protocol implementation of our own, so the well-kept library carries the requests. Watch streams
stay on httpx (their cost is per event, not per request).

Failures are raised as the httpx exceptions the failover logic (:mod:`.failover`) reads:
``ConnectError``/``ConnectTimeout`` (nothing was sent), ``RemoteProtocolError`` (the server closed
the connection without an answer, as a reused keep-alive connection it had closed does),
``ReadError``/``ReadTimeout`` (the answer was lost: a write may have been applied).
"""

from __future__ import annotations

import ssl

import aiohttp
import httpx

# uvicorn closes a keep-alive connection after 5 s without a request; reusing one that old races it.
_IDLE_REUSE = 4.0


class Http1Pool:
    """Keep-alive HTTP/1.1 connections to one server (``http://`` or ``https://`` URL).

    The aiohttp session is made on the first request, inside the event loop that uses it.
    """

    def __init__(self, server: str, headers: dict[str, str], tls: ssl.SSLContext | bool,
                 timeout: float) -> None:
        self.server = server.rstrip("/")
        self.headers = dict(headers)
        self.timeout = timeout
        # True: the system's CAs (aiohttp's default context); False: no verification.
        self._ssl: ssl.SSLContext | bool = tls
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=_IDLE_REUSE, ssl=self._ssl)
        return aiohttp.ClientSession(
            headers=self.headers, connector=connector, skip_auto_headers=("User-Agent",),
            timeout=aiohttp.ClientTimeout(total=self.timeout, connect=self.timeout))

    async def request(self, method: str, path: str, params: dict[str, str], body: bytes | None,
                      headers: dict[str, str]) -> tuple[int, bytes]:
        """Send one request and read its whole answer: ``(status, body)``."""
        session = self._session
        if session is None or session.closed:
            session = self._session = self._open()
        try:
            async with session.request(method, self.server + path, params=params or None, data=body,
                                       headers=headers) as resp:
                return resp.status, await resp.read()
        except aiohttp.ClientConnectorError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        except aiohttp.ConnectionTimeoutError as exc:
            raise httpx.ConnectTimeout(f"connecting to {self.server} timed out") from exc
        except TimeoutError as exc:  # aiohttp's ServerTimeoutError is one too
            raise httpx.ReadTimeout(f"no answer from {self.server} in {self.timeout}s") from exc
        except aiohttp.ServerDisconnectedError as exc:
            raise httpx.RemoteProtocolError(str(exc) or "the server closed the connection") from exc
        except aiohttp.ClientError as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
