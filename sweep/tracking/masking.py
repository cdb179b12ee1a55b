"""One way to show a URI or an address: its password (or its token) as ***.

Every place a URI is printed, logged, raised in an error or stored goes through `mask`, which finds the secret
with the parser the URI's user would (SQLAlchemy's `make_url` for a database URI, as MLflow reads it; urllib's
`urlsplit` for the rest, Ray's `user:password@host:port` included), never a hand-written pattern: a password
with a '/' (`postgresql://u:pa/ss@host/db`) is hidden whole. `mask_text` does the same for free text that may
quote a URI (an exception message of a database driver or an HTTP client), and hides every secret `mask` has
seen in this process wherever it appears.
"""
from __future__ import annotations

import re
from urllib.parse import quote, unquote, urlsplit

#: URI schemes SQLAlchemy reads (MLflow's database stores): their URIs are parsed as SQLAlchemy parses them.
DATABASE_SCHEMES = ("postgresql", "postgres", "mysql", "mssql", "sqlite", "oracle")
#: A URI in free text (found here, then masked by `mask`'s parsers).
_URI = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]*[^\s'\"<>`.,;:)\]]")  # not the sentence's last mark
#: Query parameters that carry a secret (password=, token=, secret=, ...).
_QUERY = re.compile(r"(?P<head>[?&](?:[A-Za-z_]*(?:password|passwd|pwd|token|secret|key)[A-Za-z_]*)=)(?P<secret>[^&\s#]*)",
                    re.IGNORECASE)
#: Shorter secrets are not searched for in free text (they would hide ordinary words).
MIN_SECRET = 4

HIDDEN = "***"
_seen: set[str] = set()  # every secret `mask` has taken out, to hide it in free text too


def _remember(secret: str | None) -> None:
    if secret and len(secret) >= MIN_SECRET:
        _seen.update({secret, quote(secret, safe=""), unquote(secret)})


def _database(uri: str) -> str | None:
    """A database URI with its password hidden, as SQLAlchemy reads it (None when SQLAlchemy cannot)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(uri)
    except (ArgumentError, ValueError):
        return None
    if url.password is None:
        return uri
    _remember(str(url.password))
    return url.render_as_string(hide_password=True)


def _authority(uri: str) -> str:
    """Any other URI, or a bare `user:password@host:port` (a Ray address), with what precedes its host hidden: the
    password, or the whole user part when it is a token alone (`http://TOKEN@host`)."""
    scheme, sep, rest = uri.partition("://")
    head, rest = (scheme + sep, rest) if sep else ("", uri)
    parts = urlsplit(uri if sep else "//" + uri)
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else None
    end = len(rest)
    for stop in "?#":
        end = min(end, rest.find(stop) if stop in rest else end)
    if "@" in rest[:end] and (userinfo is None or "@" in parts.path):  # a '/' in the password: urllib cut it short
        userinfo = rest[:rest.rfind("@", 0, end)]
    if userinfo is None:
        return uri
    user, colon, password = userinfo.partition(":")
    _remember(password if colon else user)
    shown = f"{user}:{HIDDEN}" if colon else HIDDEN
    return head + shown + rest[len(userinfo):]


def mask(uri: str | None) -> str:
    """The URI (or host:port address) as it may be shown or stored ('' for None)."""
    if not uri:
        return ""
    scheme = uri.partition("://")[0].split("+")[0].lower() if "://" in uri else ""
    shown = _database(uri) if scheme in DATABASE_SCHEMES else None
    shown = _authority(uri) if shown is None else shown
    return _QUERY.sub(_query_secret, shown)


def _query_secret(m: re.Match[str]) -> str:
    _remember(m["secret"])
    return m["head"] + HIDDEN


def mask_text(text: str) -> str:
    """`text` with the password of every URI in it, every secret query value and every secret `mask` has seen
    shown as ***."""
    text = _URI.sub(lambda m: mask(m[0]), text)
    for secret in sorted(_seen, key=len, reverse=True):  # whole: 'tok' stays in 'token'
        text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", HIDDEN, text)
    return _QUERY.sub(lambda m: m["head"] + HIDDEN, text)
