"""What listens where, read the way `ss -ltn` reads it: /proc/<pid>/net/tcp{,6} list the TCP
sockets of the network namespace process <pid> is in (/proc/self/net: the reader's own); and
whether this host allows a network namespace at all, asked of util-linux, not of netns.py."""
from __future__ import annotations

import ipaddress
import shutil
import subprocess
from pathlib import Path

LISTEN = "0A"


def listening(net_dir: str | Path) -> set[tuple[str, int]]:
    """(address, port) of every listening TCP socket in the namespace of `net_dir`."""
    found = set()
    for name, width in (("tcp", 8), ("tcp6", 32)):
        try:
            lines = Path(net_dir, name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != LISTEN:
                continue
            address, port = fields[1].split(":")
            found.add((_address(address, width), int(port, 16)))
    return found


def _address(hex_address: str, width: int) -> str:
    """/proc/net/tcp's address (each 32-bit word in host byte order, little-endian here) as text."""
    raw = b"".join(bytes.fromhex(hex_address[i:i + 8])[::-1] for i in range(0, width, 8))
    return str(ipaddress.ip_address(raw))


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return ip.is_loopback or (ip.version == 6 and ip.ipv4_mapped is not None and ip.ipv4_mapped.is_loopback)


def namespaces_allowed() -> bool | None:
    """Can util-linux make a network namespace here (a plain one with CAP_SYS_ADMIN, else one
    owned by a user namespace of our own)? None: `unshare` is not installed, so no one can say."""
    if shutil.which("unshare") is None:
        return None
    return any(subprocess.run(cmd, capture_output=True).returncode == 0
               for cmd in (["unshare", "--net", "true"], ["unshare", "--user", "--map-root-user", "--net", "true"]))
