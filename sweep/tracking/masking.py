"""One way to show a URI: its password (and any secret query value) as ***.

Every place a URI is printed, logged, raised in an error or stored goes through `mask`; `mask_text` does the
same for free text that may quote a URI (an exception message of a database driver or an HTTP client).
"""
from __future__ import annotations

import re

#: user:password@ in the authority of any scheme://... URI.
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:]*):(?P<secret>[^\s/@]*)@")
#: Query parameters that carry a secret (password=, token=, secret=, ...).
_QUERY = re.compile(r"(?P<head>[?&](?:[A-Za-z_]*(?:password|passwd|pwd|token|secret|key)[A-Za-z_]*)=)(?P<secret>[^&\s#]*)",
                    re.IGNORECASE)

HIDDEN = "***"


def mask_text(text: str) -> str:
    """`text` with the password of every URI in it, and every secret query value, shown as ***."""
    text = _USERINFO.sub(lambda m: f"{m['head']}:{HIDDEN}@", text)
    return _QUERY.sub(lambda m: m["head"] + HIDDEN, text)


def mask(uri: str | None) -> str:
    """The URI as it may be shown or stored ('' for None)."""
    return mask_text(uri or "")
