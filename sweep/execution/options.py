"""Checks of a run's options before anything is written or started: one line naming the option.

Each check is fast (a closed port or an unknown host answers in well under 15 s) and says what is
allowed, so a mistyped option never turns into a hang, a traceback or a half-written results directory.
"""
from __future__ import annotations

import base64
import dataclasses
import importlib.util
import os
import re
import socket
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urlsplit

from problems.shared.errors import ParameterError
from sweep.study.model import Study
from sweep.tracking.masking import mask, mask_text

#: Tracking-store schemes MLflow 3 accepts here (file stores are refused by MLflow itself).
TRACKING_SCHEMES = ("sqlite", "http", "https", "postgresql", "mysql", "mssql")
TRACKING_HELP = "sqlite:///<absolute path>.db, http(s)://host:port, or postgresql|mysql|mssql://user@host/db"
CONNECT_TIMEOUT = 5.0


def check_num_cpus(num_cpus: int | None) -> None:
    """--num-cpus: a positive integer up to this machine's CPUs (or absent: every CPU). Trials are CPU-bound, so
    a local Ray told of more CPUs than there are only runs more of them at once, each slower, in more memory."""
    have = os.cpu_count() or 1
    if num_cpus is not None and num_cpus < 1:
        raise ParameterError(f"num-cpus: must be a positive integer (omit it to use all {have}), got {num_cpus}")
    if num_cpus is not None and num_cpus > have:
        raise ParameterError(f"num-cpus: must be at most {have}, the CPUs of this machine (a cluster's through "
                             f"--address), got {num_cpus}")


def check_resources(resources: dict[str, float], address: str | None, num_cpus: int | None) -> None:
    """A local Ray that can never fit one trial (its CPUs or GPUs) is an error; a cluster may scale up."""
    if address:
        return
    have = num_cpus or os.cpu_count() or 1
    if resources["cpu"] > have:
        raise ParameterError(f"resources.cpu: a trial asks for {resources['cpu']:g} CPUs but the local Ray has {have}; "
                             f"at most {have}, or --address a cluster that has them")
    if (gpu := resources.get("gpu", 0.0)) and gpu > (gpus := local_gpus()):
        raise ParameterError(f"resources.gpu: a trial asks for {gpu:g} GPUs but this machine has {gpus:g}; "
                             "0 here, or --address a cluster with GPU nodes")


def local_gpus() -> float:
    """The GPUs a local Ray would find here (Ray's own count: NVIDIA devices, as CUDA_VISIBLE_DEVICES limits)."""
    try:
        from ray._private.accelerators import get_accelerator_manager_for_resource
    except ImportError:  # Ray's private module moved: it counts the GPUs itself at start
        return float("inf")
    return float(get_accelerator_manager_for_resource("GPU").get_current_node_num_accelerators() or 0)


def cluster_warning(per_trial: dict[str, float], cluster: dict[str, float]) -> str | None:
    """One warning line when a connected cluster has fewer CPUs or GPUs than a trial asks for (it may autoscale)."""
    for name in ("cpu", "gpu"):
        want, have = per_trial.get(name, 0.0), cluster.get(name.upper(), 0.0)
        if want > have:
            return (f"bisweep: warning: a trial asks for {want:g} {name.upper()}s and the cluster has {have:g} now; "
                    "trials wait until it scales up")
    return None


def ray_address(address: str | None) -> tuple[str | None, str]:
    """The Ray to use and the option it came from: --address, else RAY_ADDRESS (which a Ray Job sets for its
    driver), else None: a local Ray of the study's own, even when a cluster started by `ray start` runs here."""
    if address:
        return address, "address"
    return os.environ.get("RAY_ADDRESS") or None, "RAY_ADDRESS"


def check_address(address: str | None, field: str = "address") -> None:
    """--address (or RAY_ADDRESS, `field`): host:port of a reachable Ray head (or 'auto'); refused at once otherwise."""
    if address is not None and address.startswith("ray://") and importlib.util.find_spec("grpc") is None:
        raise ParameterError(f"{field}: {mask(address)} is a Ray Client address, which needs the package ray[client] "
                             "(pip install 'ray[client]'); or give the head's host:port (e.g. 127.0.0.1:6379)")
    if address is None or address == "auto" or address.startswith("ray://"):
        return
    unset = "; unset it to start a local Ray" if field == "RAY_ADDRESS" else ""
    m = re.fullmatch(r"\[?([^\]\s]+?)\]?:(\d{1,5})", address)
    # a URL (the dashboard's) is no head, and a head takes no user:password@ (Ray's auth is a token)
    if m is None or "://" in address or "@" in address or not 0 < int(m.group(2)) < 65536:
        raise ParameterError(f"{field}: must be host:port of a Ray head (e.g. 127.0.0.1:6379) or 'auto', "
                             f"got {mask(address)!r}{unset}")
    refused = _refused(m.group(1), int(m.group(2)), f"Ray head answers at {address}")
    if refused:
        raise ParameterError(f"{field}: {refused}; start the cluster (`ray start --head`) or check the address{unset}")


def _refused(host: str, port: int, answers: str) -> str | None:
    """Why nothing accepts a TCP connection at host:port within CONNECT_TIMEOUT ("cannot resolve host …" or
    "no {answers} (reason)"), or None when something does."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        return f"cannot resolve host {host!r} ({exc})"
    family, kind, proto, _, sockaddr = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.settimeout(CONNECT_TIMEOUT)
        try:
            sock.connect(sockaddr)
        except OSError as exc:
            return f"no {answers} ({'timed out' if isinstance(exc, socket.timeout) else exc.strerror or exc})"
    return None


def check_listen(host: str, port: int) -> None:
    """--host and --port of a server to start here: a port in 1–65535 that nothing listens on at host."""
    if not 0 < port < 65536:
        raise ParameterError(f"port: must be 1 to 65535, got {port}")
    try:
        family, kind, proto, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise ParameterError(f"host: cannot resolve {host!r} ({exc})") from None
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will: TIME_WAIT is no obstacle
        try:
            sock.bind(sockaddr)
        except OSError as exc:
            raise ParameterError(f"port: cannot listen on {host}:{port} ({exc.strerror or exc}); give another "
                                 "--port (or --host)") from None


def check_tracking_uri(uri: str | None) -> None:
    """--tracking-uri: a scheme MLflow can use here."""
    if uri is None:
        return
    scheme = urlsplit(uri).scheme.split("+")[0]
    if scheme not in TRACKING_SCHEMES or (scheme == "sqlite" and not uri.startswith("sqlite:///")):
        raise ParameterError(f"tracking-uri: must be {TRACKING_HELP}, got {mask(uri)!r}")
    if scheme == "sqlite":
        _check_sqlite_file(Path(uri[len("sqlite:///"):]))
    if scheme in ("http", "https"):
        _check_server(uri)
    elif scheme in DATABASE_PORTS:
        _check_database(uri, scheme)


def _check_server(uri: str) -> None:
    """An MLflow server answers its health check (asked once: the MLflow client would retry for minutes)."""
    parts = urlsplit(uri)
    try:
        parts.port  # noqa: B018  raises for a port that is no number
        cut = "@" in parts.path  # a '/' in the password: urllib ends the host there
    except ValueError:
        cut = True
    if cut:
        raise ParameterError(f"tracking-uri: cannot read the host of {mask(uri)}: a '/' (or ':') in the user name or "
                             "password must be percent-encoded ('/' as %2F)")
    # urllib takes user:password@ for a part of the host name: the credentials go in a header, as MLflow sends them
    request = urllib.request.Request(parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl().rstrip("/")
                                     + "/health")
    if parts.username is not None:
        token = base64.b64encode(f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        urllib.request.urlopen(request, timeout=2 * CONNECT_TIMEOUT).close()
    except OSError as exc:
        raise ParameterError(f"tracking-uri: no MLflow server answers at {mask(uri)} ({mask_text(str(exc))})") from None


#: Default ports of the database servers MLflow can keep its store in.
DATABASE_PORTS = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}


def _check_database(uri: str, scheme: str) -> None:
    """A database server on host:port accepts connections (MLflow's store would retry for minutes), and for
    PostgreSQL speaks its protocol; a URI without a host (a local socket) is left to MLflow. The URI is read as
    SQLAlchemy (MLflow's store) reads it, so a password holding '/' is no part of the host."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(uri)
        host, port = url.host, url.port or DATABASE_PORTS[scheme]
    except ValueError:  # a port that is no number
        raise ParameterError(f"tracking-uri: cannot read {mask(uri)!r}: the port is not a number") from None
    except ArgumentError as exc:
        raise ParameterError(f"tracking-uri: cannot read {mask(uri)!r} ({mask_text(str(exc))[:200]})") from None
    refused = host and _refused(host, port, f"database server answers at {host}:{port}")
    if refused:
        raise ParameterError(f"tracking-uri: {refused}")
    if host and scheme == "postgresql" and not _speaks_postgresql(host, port):
        raise ParameterError(f"tracking-uri: not a PostgreSQL server at {host}:{port} (it does not answer "
                             "PostgreSQL's SSL request); check the host and port")


#: PostgreSQL's SSLRequest: length 8, code 1234.5679; a server answers one byte, 'S' or 'N' (before any login).
SSL_REQUEST = (8).to_bytes(4, "big") + (80877103).to_bytes(4, "big")


def _speaks_postgresql(host: str, port: int) -> bool:
    """Whether the server at host:port answers PostgreSQL's SSL request as a PostgreSQL server does (an HTTP or
    other server answers something else, or nothing within CONNECT_TIMEOUT)."""
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT) as sock:
            sock.sendall(SSL_REQUEST)
            return sock.recv(1) in (b"S", b"N")
    except OSError:
        return False


#: The first 16 bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"


def _check_sqlite_file(path: Path) -> None:
    """An SQLite store's path: a database file, an empty file or nothing yet (MLflow then makes it) in an existing,
    writable directory (MLflow would make the missing directories, at the file system's root for a mistyped one)."""
    parent = path.absolute().parent
    if not parent.is_dir():
        raise ParameterError(f"tracking-uri: the directory {parent} does not exist; create it or give the path of "
                             "a database file in an existing directory")
    if not path.exists() and not os.access(parent, os.W_OK):
        raise ParameterError(f"tracking-uri: the directory {parent} is not writable")
    if path.is_dir():
        raise ParameterError(f"tracking-uri: {path} is a directory, not an SQLite database file")
    if path.is_file():
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
        if head and head != SQLITE_HEADER:
            raise ParameterError(f"tracking-uri: {path} is not an SQLite database; give a new file's path or "
                                 "an MLflow store's")


def check_results_dir(root: Path, field: str = "results-dir") -> None:
    """--results-dir (or another directory option, `field`): a directory (or a path where one can be made), not a
    file."""
    for p in (root, *root.parents):
        if p.exists():
            if not p.is_dir():
                raise ParameterError(f"{field}: {p} is a file, not a directory; give a directory path")
            if not os.access(p, os.W_OK):
                raise ParameterError(f"{field}: {p} is not writable")
            return


def check_storage(storage: str | None) -> None:
    """--storage: a directory path, or a URI of a file system Ray Tune can open (pyarrow's, as Tune opens it; for
    s3:// the bucket's region is looked up, so a bucket that cannot be reached fails here, not after Ray starts)."""
    if storage is None:
        return
    if "://" not in storage:
        check_results_dir(Path(storage).resolve(), "storage")
        return
    import pyarrow.fs  # Ray Tune's own file-system layer (a dependency of ray[tune])

    try:
        pyarrow.fs.FileSystem.from_uri(storage)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ParameterError(f"storage: cannot use {mask(storage)} ({mask_text(first)})") from None


def with_max_failures(study: Study, max_failures: int | None) -> Study:
    """The study with --max-failures instead of its own `max_failures` (retries of a trial whose node or process
    died; a retry continues from the trial's last checkpoint). It changes no run, so not the study's identity."""
    if max_failures is None:
        return study
    if max_failures < 0:
        raise ParameterError(f"max-failures: must be a non-negative integer (retries of a failed trial), got {max_failures}")
    return dataclasses.replace(study, max_failures=max_failures)


def with_mlflow_children(study: Study, value: str | None) -> Study:
    """The study with --mlflow-children (a positive integer or 'all') instead of its own `mlflow_children`: the
    most runs that each get an MLflow child run. It changes no run, so not the study's identity."""
    if value is None:
        return study
    if value.strip().lower() == "all":
        return dataclasses.replace(study, mlflow_children=None)
    try:
        most = int(value)
    except ValueError:
        most = 0
    if most < 1:
        raise ParameterError(f"mlflow-children: must be a positive integer or 'all', got {value[:80]!r}")
    return dataclasses.replace(study, mlflow_children=most)
