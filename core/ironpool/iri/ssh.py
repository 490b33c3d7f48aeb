"""Reach a unix socket on another host through SSH, without exposing it on the network.

:class:`SSHTunnel` listens on a unix socket in a private temporary folder. Every connection it
accepts becomes one SSH channel of type ``direct-streamlocal@openssh.com`` (OpenSSH PROTOCOL
§2.4, what ``ssh -L local:/remote.sock`` uses) to the remote socket path, and bytes are pumped
both ways. gRPC then dials the local socket. sshd must allow it (``AllowStreamLocalForwarding``,
the default ``yes``).
"""

from __future__ import annotations

import contextlib
import getpass
import logging
import os
import selectors
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import paramiko
from paramiko.common import cMSG_CHANNEL_OPEN
from paramiko.message import Message

from ironpool.iri.endpoint import Endpoint

log = logging.getLogger(__name__)

STREAMLOCAL_CHANNEL = "direct-streamlocal@openssh.com"
_BUFSIZE = 64 * 1024


class SSHTunnelError(ConnectionError):
    """The SSH connection or the channel to the remote socket could not be opened."""


@dataclass(frozen=True)
class SSHOptions:
    """How to authenticate to sshd and how to trust its host key.

    Keys come from ``key_filename`` if given, else from the ssh-agent and ``~/.ssh/id_*``.
    Host keys are checked against the system and user ``known_hosts`` (plus ``known_hosts``
    if given); an unknown key is rejected unless ``accept_new_host_keys`` (then it is added,
    and saved to ``known_hosts`` when that is set), like ``StrictHostKeyChecking=accept-new``.
    """

    key_filename: str | None = None
    known_hosts: str | None = None
    accept_new_host_keys: bool = False
    allow_agent: bool = True
    look_for_keys: bool = True
    connect_timeout: float = 10.0
    keepalive_interval: int = 30


def open_streamlocal_channel(
    transport: paramiko.Transport, socket_path: str, timeout: float = 10.0
) -> paramiko.Channel:
    """Open a ``direct-streamlocal@openssh.com`` channel to ``socket_path`` on the server.

    paramiko only builds the payload for ``direct-tcpip``; this mirrors its
    ``Transport.open_channel`` with the streamlocal payload: string socket path, string
    reserved, uint32 reserved.
    """
    if not transport.is_active():
        raise SSHTunnelError("SSH session not active")
    # paramiko has no public hook for a custom channel-open payload, hence its internals here.
    t = transport
    with t.lock:
        window_size = t._sanitize_window_size(None)  # type: ignore[attr-defined]
        max_packet_size = t._sanitize_packet_size(None)  # type: ignore[attr-defined]
        chanid = t._next_channel()  # type: ignore[attr-defined]
        m = Message()
        m.add_byte(cMSG_CHANNEL_OPEN)
        m.add_string(STREAMLOCAL_CHANNEL)
        m.add_int(chanid)
        m.add_int(window_size)
        m.add_int(max_packet_size)
        m.add_string(socket_path)
        m.add_string("")
        m.add_int(0)
        chan = paramiko.Channel(chanid)
        t._channels.put(chanid, chan)  # type: ignore[attr-defined]
        t.channel_events[chanid] = event = threading.Event()
        t.channels_seen[chanid] = True
        chan._set_transport(t)  # type: ignore[attr-defined]
        chan._set_window(window_size, max_packet_size)  # type: ignore[attr-defined]
    t._send_user_message(m)  # type: ignore[attr-defined]
    deadline = time.monotonic() + timeout
    while not event.wait(0.1):
        if not t.is_active():
            break
        if time.monotonic() > deadline:
            raise SSHTunnelError(f"timed out opening a channel to {socket_path}")
    opened = t._channels.get(chanid)  # type: ignore[attr-defined]
    if opened is not None and t.is_active():
        return opened
    cause = t.get_exception()
    raise SSHTunnelError(f"sshd refused a channel to {socket_path}: {cause or 'session closed'}")


class SSHTunnel:
    """A local unix socket that forwards every connection to a remote unix socket over SSH.

    One SSH connection is shared by all forwarded connections; it is re-established when a new
    local connection arrives after it dropped. ``start()`` connects eagerly so that bad
    credentials or an unknown host key fail at once, not inside gRPC.
    """

    def __init__(self, endpoint: Endpoint, options: SSHOptions | None = None) -> None:
        if endpoint.scheme != "ssh":
            raise ValueError(f"SSHTunnel needs an ssh:// endpoint, not {endpoint}")
        self.endpoint = endpoint
        self.options = options or SSHOptions()
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()
        self._dir = ""
        self._wake_r, self._wake_w = -1, -1
        self._threads: list[threading.Thread] = []
        self._closed = threading.Event()
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()

    @property
    def local_path(self) -> str:
        if not self._dir:
            raise RuntimeError("tunnel not started")
        return os.path.join(self._dir, "iri.sock")

    @property
    def grpc_target(self) -> str:
        return f"unix:{self.local_path}"

    def start(self) -> SSHTunnel:
        self._connect()
        self._dir = tempfile.mkdtemp(prefix="ironpool-iri-ssh-")
        os.chmod(self._dir, 0o700)
        self._wake_r, self._wake_w = os.pipe()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.local_path)
        path = self.endpoint.path
        self._listen(
            listener,
            lambda: open_streamlocal_channel(self._connect(), path, timeout=self.options.connect_timeout),
            str(self.endpoint),
        )
        return self

    def forward_tcp(self, host: str, port: int) -> tuple[str, int]:
        """Listen on a free loopback port; each connection goes to ``host:port`` as the SSH server
        sees it (a ``direct-tcpip`` channel, like ``ssh -L``). Returns the local address.

        Used for the console URL that ``Exec`` returns, which names the runtime host's loopback.
        """
        if not self._dir:
            raise RuntimeError("tunnel not started")
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        local_port = int(listener.getsockname()[1])

        def opener() -> paramiko.Channel:
            return self._connect().open_channel(
                "direct-tcpip", (host, port), ("127.0.0.1", local_port), timeout=self.options.connect_timeout
            )

        self._listen(listener, opener, f"{self.endpoint.host} -> {host}:{port}")
        return "127.0.0.1", local_port

    def __enter__(self) -> SSHTunnel:
        return self.start() if not self._dir else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop accepting, end every forwarded connection and the SSH session, remove the socket."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._wake_w >= 0:
            # Never read: it keeps every accept loop's selector woken until they have all exited.
            os.write(self._wake_w, b"x")
        for thread in self._threads:
            thread.join(timeout=5)
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)
        self._wake_r = self._wake_w = -1
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)

    # --- SSH session -------------------------------------------------------------------

    def _connect(self) -> paramiko.Transport:
        with self._lock:
            # A forward accepted just before close() must not open a session nobody closes.
            if self._closed.is_set():
                raise SSHTunnelError(f"tunnel to {self.endpoint} is closed")
            if self._client is not None:
                transport = self._client.get_transport()
                if transport is not None and transport.is_active():
                    return transport
                self._client.close()
                self._client = None
            opts = self.options
            client = paramiko.SSHClient()
            client.load_system_host_keys()
            if opts.known_hosts and Path(opts.known_hosts).exists():
                client.load_host_keys(opts.known_hosts)
            policy: paramiko.MissingHostKeyPolicy = (
                paramiko.AutoAddPolicy() if opts.accept_new_host_keys else paramiko.RejectPolicy()
            )
            client.set_missing_host_key_policy(policy)
            target = f"{self.endpoint.host}:{self.endpoint.port}"
            try:
                client.connect(
                    self.endpoint.host,
                    port=self.endpoint.port,
                    username=self.endpoint.user or getpass.getuser(),
                    key_filename=opts.key_filename,
                    allow_agent=opts.allow_agent,
                    look_for_keys=opts.look_for_keys,
                    timeout=opts.connect_timeout,
                    banner_timeout=opts.connect_timeout,
                    auth_timeout=opts.connect_timeout,
                )
            except paramiko.BadHostKeyException as exc:
                client.close()
                raise SSHTunnelError(f"ssh {target}: host key mismatch: {exc}") from exc
            except paramiko.SSHException as exc:
                client.close()
                raise SSHTunnelError(f"ssh {target}: {exc}") from exc
            except OSError as exc:
                client.close()
                raise SSHTunnelError(f"ssh {target}: cannot connect: {exc}") from exc
            if opts.accept_new_host_keys and opts.known_hosts:
                client.save_host_keys(opts.known_hosts)
            transport = client.get_transport()
            assert transport is not None
            transport.set_keepalive(opts.keepalive_interval)
            self._client = client
            return transport

    # --- forwarding ------------------------------------------------------------------------

    def _listen(self, listener: socket.socket, opener: Callable[[], paramiko.Channel], what: str) -> None:
        listener.listen(64)
        listener.setblocking(False)
        thread = threading.Thread(
            target=self._accept_loop, args=(listener, opener, what), name=f"iri-ssh {what}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _accept_loop(
        self, listener: socket.socket, opener: Callable[[], paramiko.Channel], what: str
    ) -> None:
        sel = selectors.DefaultSelector()
        sel.register(listener, selectors.EVENT_READ)
        sel.register(self._wake_r, selectors.EVENT_READ)
        try:
            while not self._closed.is_set():
                for key, _ in sel.select():
                    if key.fileobj is not listener:
                        return
                    try:
                        conn, _addr = listener.accept()
                    except BlockingIOError:
                        continue
                    except OSError as exc:
                        log.warning("ssh tunnel %s: accept failed: %s", what, exc)
                        continue
                    conn.setblocking(True)
                    threading.Thread(
                        target=self._serve, args=(conn, opener, what), name="iri-ssh-forward", daemon=True
                    ).start()
        finally:
            sel.close()
            listener.close()

    def _serve(self, conn: socket.socket, opener: Callable[[], paramiko.Channel], what: str) -> None:
        with self._conns_lock:
            self._conns.add(conn)
        chan: paramiko.Channel | None = None
        try:
            chan = opener()
            upstream = threading.Thread(target=_pump_to_channel, args=(conn, chan), daemon=True)
            upstream.start()
            _pump_from_channel(chan, conn)
            upstream.join()
        except (SSHTunnelError, paramiko.SSHException, OSError, EOFError) as exc:
            # The local client (gRPC) sees its connection close and reports UNAVAILABLE.
            log.warning("ssh forward %s failed: %s", what, exc)
        finally:
            if chan is not None:
                # The SSH session may already be gone (server closed, tunnel shut down): closing the
                # channel then has nobody to tell, which is fine.
                with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
                    chan.close()
            with contextlib.suppress(OSError):
                conn.close()
            with self._conns_lock:
                self._conns.discard(conn)


def _pump_to_channel(conn: socket.socket, chan: paramiko.Channel) -> None:
    try:
        while data := conn.recv(_BUFSIZE):
            chan.sendall(data)
    except (OSError, EOFError, paramiko.SSHException):
        pass  # either side went away; the finally below propagates the close
    finally:
        with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
            chan.shutdown_write()


def _pump_from_channel(chan: paramiko.Channel, conn: socket.socket) -> None:
    try:
        while data := chan.recv(_BUFSIZE):
            conn.sendall(data)
    except (OSError, EOFError, paramiko.SSHException):
        pass  # either side went away; the finally below propagates the close
    finally:
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)
