"""IP addresses that belong to nobody, which detect.py's rules keep Presidio from redacting (each
because a clean row lost one):

- loopback (``127.0.0.1``, ``::1``), unspecified and "this network" (``0.0.0.0``, ``0.0.0.0/0``: any
  address), link-local (``169.254.169.254``, a cloud's metadata service; ``fe80::``), multicast
  (``224.0.0.251`` for mDNS, ``224.0.0.0/4``, ``ff02::fb``) and IPv4's reserved class E (a netmask
  ``255.255.255.0``, the broadcast ``255.255.255.255``);
- the documentation ranges (RFC 5737: ``192.0.2.0/24``, ``198.51.100.0/24``, ``203.0.113.0/24``;
  RFC 3849: ``2001:db8::/32``);
- the public DNS resolvers every how-to names (Google's ``8.8.8.8``, Cloudflare's ``1.1.1.1``,
  Quad9's ``9.9.9.9``, OpenDNS's ``208.67.222.222`` and their IPv6 twins): a service's, no one's.

Private ranges (``10.0.0.0/8``, ``192.168.0.0/16`` ...) are somebody's network and stay personal
data; so does an IPv4 address mapped into IPv6 (IPv6's "reserved" ``::/8`` holds those, so only
its named ranges are nobody's).
"""

from __future__ import annotations

import ipaddress
import re

__all__ = ["in_dotted_quad", "nobodys"]

_DOTTED_QUAD = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}(?:/\d{1,2})?")
_DOCUMENTATION = tuple(
    ipaddress.ip_network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
)
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")
_RESOLVERS = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "8.8.8.8", "8.8.4.4", "1.1.1.1", "1.0.0.1", "9.9.9.9", "149.112.112.112", "208.67.222.222",
        "208.67.220.220", "2001:4860:4860::8888", "2001:4860:4860::8844", "2606:4700:4700::1111",
        "2606:4700:4700::1001", "2620:fe::fe",
    )
)  # fmt: skip


def nobodys(value: str) -> bool:
    """Whether the address or network ``value`` (``224.0.0.0/4``, ``fe80::1%eth0``) is one of the above."""
    try:
        ip = ipaddress.ip_address(re.split(r"[/%]", value, maxsplit=1)[0])
    except ValueError:
        return False
    named = ip.is_loopback or ip.is_unspecified or ip.is_link_local or ip.is_multicast or ip in _RESOLVERS
    if ip.version == 4:
        named = named or ip.is_reserved or ip in _THIS_NETWORK
    return named or any(ip in network for network in _DOCUMENTATION if network.version == ip.version)


def in_dotted_quad(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` is (part of) a dotted quad, with or without its prefix length
    (``203.0.113.0/24``): an address or a network, never a phone number."""
    while start and (text[start - 1].isdigit() or text[start - 1] in "./"):
        start -= 1
    while end < len(text) and (text[end].isdigit() or text[end] in "./"):
        end += 1
    return bool(_DOTTED_QUAD.fullmatch(text[start:end].strip("./")))
