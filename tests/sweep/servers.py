"""Starting a local test server (`bisweep ui`, an MLflow server) on a free port and waiting for it to answer."""
import contextlib
import http.client
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator


class PortTaken(Exception):
    """The port picked for a server was taken meanwhile (another process answers there, or the server exited)."""


def wait_http(url: str, timeout: float = 60.0, poll: float = 0.3, proc: subprocess.Popen | None = None) -> None:
    """Return once `url` answers 200; TimeoutError after `timeout` seconds. With `proc`, the server started for
    it: PortTaken when it exits first or something that is not an HTTP server answers there."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise PortTaken(f"{url}: the server exited ({proc.returncode})")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except http.client.HTTPException as exc:  # not HTTP: a process of a parallel test got the port first
            raise PortTaken(f"{url}: {type(exc).__name__}") from exc
        except OSError:
            time.sleep(poll)
    raise TimeoutError(url)


def serve(start: Callable[[int], subprocess.Popen], pick: Callable[[], int], path: str = "/health",
          stop: Callable[[subprocess.Popen], None] | None = None, tries: int = 3, timeout: float = 60.0,
          ) -> tuple[subprocess.Popen, str]:
    """(process, base URL) of a server `start(port)` started on a port from `pick()`, answering 200 at `path`; a
    new port when the one picked was taken between picking and binding (parallel tests start Ray's servers)."""
    halt = stop or (lambda p: (p.kill(), p.wait(timeout=20)))
    for _ in range(tries):
        port = pick()
        proc = start(port)
        base = f"http://127.0.0.1:{port}"
        try:
            wait_http(base + path, timeout=timeout, proc=proc)
            return proc, base
        except PortTaken:
            halt(proc)
        except BaseException:  # a server that never answered is not left running behind the failing test
            halt(proc)
            raise
    raise RuntimeError(f"no free port held for the server in {tries} tries")


@contextlib.contextmanager
def not_postgres() -> Iterator[int]:
    """A server on 127.0.0.1 that answers every connection with an HTTP error (a port that is not PostgreSQL's);
    yields its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def answer() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                with conn:
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    threading.Thread(target=answer, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()
