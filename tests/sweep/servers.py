"""Waiting for a local test server (an MLflow server) to answer."""
import time
import urllib.request


def wait_http(url: str, timeout: float = 60.0, poll: float = 0.3) -> None:
    """Return once `url` answers 200; TimeoutError after `timeout` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(poll)
    raise TimeoutError(url)
