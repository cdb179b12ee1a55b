"""The test-server helper: a port taken between picking and binding is given up for another."""
import socket
import subprocess
import sys
import threading

import pytest

from tests.sweep.servers import serve


def test_a_port_a_non_http_process_took_is_given_up_for_another(free_port):
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]

    def answer_binary():  # what a parallel test's Ray (gRPC) answers on a port it got first
        while True:
            try:
                conn, _ = squatter.accept()
            except OSError:
                return
            conn.sendall(b"\x00\x00\x12\x04\xfe\xff binary\r\n\r\n")
            conn.close()

    threading.Thread(target=answer_binary, daemon=True).start()
    ports = iter([taken, free_port()])
    started = []

    def start(port):
        started.append(port)
        return subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    proc, base = serve(start, lambda: next(ports), path="/", timeout=30)
    try:
        assert started == [taken, started[1]] and base == f"http://127.0.0.1:{started[1]}" and proc.poll() is None
    finally:
        proc.kill()
        proc.wait(timeout=20)
        squatter.close()


def test_a_server_that_never_answers_is_stopped_before_the_timeout_is_raised(free_port):
    procs = []

    def start(port):  # listens nowhere: never answers
        procs.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]))
        return procs[-1]

    with pytest.raises(TimeoutError):
        serve(start, free_port, timeout=1)
    assert len(procs) == 1 and procs[0].poll() is not None  # killed and reaped, not left running
