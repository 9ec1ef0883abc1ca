"""Which server an endpoint names, however it is spelled: the identity the GPU lock's file
is named by (measure/lock.py), so a host name and its address share one lock.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from ..core.errors import ConfigError

_DEFAULT_PORTS = {"http": 80, "https": 443}


def server_identity(endpoint: str) -> tuple[str, int]:
    """(host, port) naming one server however the endpoint spells it.

    The scheme's default port fills a missing one; path, trailing slash and letter case
    go. A host that is this machine (loopback, ``localhost``, its host name, or any address
    of its interfaces) is ``localhost``; any other host is its lowest resolved address, so
    a name and its address share one lock. A name that does not resolve stays itself (the
    probe reports it unreachable). A server reached under unrelated addresses (a load
    balancer, an SSH tunnel) needs ``--specperf-gpu-lock PATH`` given the same in every run.
    """
    host, port = _host_port(endpoint)
    addresses = _resolve(host, port)
    if host == "localhost" or any(_is_local(a) for a in addresses):
        return "localhost", port
    return (min(addresses) if addresses else host), port


def _resolve(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return sorted({str(info[4][0]).split("%", 1)[0] for info in infos})


def _is_local(address: str) -> bool:
    """Whether an address belongs to this machine: loopback, or one a socket can bind to
    (the kernel accepts a bind only to its own interfaces' addresses)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if ip.is_loopback or ip.is_unspecified:
        return True
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
    except OSError:
        return False
    return True


def _host_port(endpoint: str) -> tuple[str, int]:
    # urlsplit reads "host:port" without a scheme as scheme "host", so add one.
    url = endpoint if "://" in endpoint else f"http://{endpoint}"
    parts = urlsplit(url)
    try:
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError as exc:
        raise ConfigError(_endpoint_message(endpoint, "its port is not a number")) from exc
    if not parts.hostname:
        raise ConfigError(_endpoint_message(endpoint, "it has no host"))
    if port is None:
        why = f"scheme {parts.scheme!r} has no default port"
        raise ConfigError(_endpoint_message(endpoint, why))
    return parts.hostname.lower().rstrip("."), port


def _endpoint_message(endpoint: str, why: str) -> str:
    return (
        f"Cannot derive a GPU lock path from endpoint {endpoint!r}: {why}. "
        "Give the endpoint as http://HOST:PORT, or pass --specperf-gpu-lock PATH."
    )


