"""Where a study's MLflow child runs are written: in bulk into a SQL store, or through the tracking API.

MLflow's store API writes one run per call and spends ~0.5 ms per metric in its ORM (measured: a
`log_batch` of 300 metrics took 150 ms on this 2-core machine under load, `create_run` 44 ms,
`set_terminated` 31 ms), so at 100 runs/s it falls ever further behind. `SqlSink` writes a whole batch
of runs (new runs, their tags and params, metrics, latest metrics, ends) in one transaction of bulk
inserts into MLflow's own tables (its SQLAlchemy models, so the columns are MLflow's), for the stores
MLflow itself keeps in a database: `sqlite:///...` (the default) and `postgresql://...`. `ApiSink` serves
every other store (an `http://` tracking server): `log_batch` calls of at most 1,000 metrics, several
runs at once on a few threads so that the server's workers share them.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

MAX_METRICS_PER_BATCH = 1000  # MLflow's limits of one log_batch call
MAX_PARAMS_PER_BATCH = 100
API_THREADS = 4
RUN_NAME, PARENT = "mlflow.runName", "mlflow.parentRunId"
FLOAT_MAX = 1.7976931348623157e308  # MLflow stores ±inf as ±this and NaN as 0 with is_nan


@dataclasses.dataclass
class NewRun:
    """A child run to create."""

    name: str
    tags: dict[str, str]
    params: dict[str, str]
    start_ms: int
    end_ms: int | None = None  # a run created and ended in one write: when it ended (else the write's time)


@dataclasses.dataclass
class Batch:
    """What one flush writes, by run key: new runs, metric points (key, value, timestamp ms, step), ends."""

    new: dict[str, NewRun] = dataclasses.field(default_factory=dict)
    metrics: dict[str, list[tuple[str, float, int, int]]] = dataclasses.field(default_factory=dict)
    ended: dict[str, tuple[str, str | None]] = dataclasses.field(default_factory=dict)  # (status, error)
    size: int = 0  # metric points buffered (counted as they are added: asked before each of thousands of adds)

    def __bool__(self) -> bool:
        return bool(self.new or self.metrics or self.ended)

    def add(self, run_key: str, points: list[tuple[str, float, int, int]]) -> None:
        """A run's metric points (key, value, timestamp ms, step)."""
        self.metrics.setdefault(run_key, []).extend(points)
        self.size += len(points)


def mlflow_status(status: str) -> str:
    """A run's MLflow status: FINISHED for finished and diverged runs (the status tag says which), else FAILED."""
    return "FINISHED" if status in ("finished", "diverged") else "FAILED"


def sink_for(client: Any, experiment_id: str, parent_id: str) -> ApiSink | SqlSink:
    """The fast SQL sink when the client's store is MLflow's SQLAlchemy store, else the API sink."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    store = client._tracking_client.store
    if isinstance(store, SqlAlchemyStore):
        return SqlSink(store, client.get_experiment(experiment_id).artifact_location, experiment_id, parent_id)
    return ApiSink(client, experiment_id, parent_id)


# ---------------------------------------------------------------- the tracking API
class ApiSink:
    """Child runs through the MLflow client: one create_run per new run, log_batch calls of ≤ 1,000 metrics."""

    def __init__(self, client: Any, experiment_id: str, parent_id: str) -> None:
        self.client, self.experiment_id, self.parent_id = client, experiment_id, parent_id
        self._pool = ThreadPoolExecutor(API_THREADS, thread_name_prefix="bisweep-mlflow-api")

    def children(self) -> dict[str, str]:
        """Run key tag -> run id of the parent's children."""
        out, token = {}, None
        while True:
            page = self.client.search_runs([self.experiment_id], filter_string=f"tags.`{PARENT}` = '{self.parent_id}'",
                                           max_results=1000, page_token=token)
            for r in page:
                out.setdefault(r.data.tags.get("bisweep.run_key", ""), r.info.run_id)
            token = page.token
            if not token:
                return out

    def steps(self, run_id: str) -> set[int]:
        """Steps already logged for a run (the steps of any of its metrics: a record's go out together)."""
        keys = self.client.get_run(run_id).data.metrics
        return {m.step for key in keys for m in self.client.get_metric_history(run_id, key)}

    def write(self, batch: Batch, ids: dict[str, str]) -> None:
        """Create the new runs, then send each run's metrics, params and end; runs in parallel."""
        keys = list(batch.new)
        for key, run_id in zip(keys, self._pool.map(lambda k: self._create(batch.new[k]), keys)):
            ids[key] = run_id
        touched = set(batch.metrics) | set(batch.ended) | set(batch.new)
        list(self._pool.map(lambda k: self._send(ids[k], batch, k), touched))

    def _create(self, new: NewRun) -> str:
        return self.client.create_run(self.experiment_id, start_time=new.start_ms, tags=new.tags,
                                      run_name=new.name).info.run_id

    def _send(self, run_id: str, batch: Batch, key: str) -> None:
        from mlflow.entities import Metric, Param, RunTag

        metrics = [Metric(k, v, ts, step) for k, v, ts, step in batch.metrics.get(key, [])]
        new = batch.new.get(key)
        params = [Param(k, v) for k, v in new.params.items()] if new else []
        tags = []
        if key in batch.ended:
            status, error = batch.ended[key]
            tags = [RunTag("status", status)] + ([RunTag("error", error)] if error else [])
        first = True
        while first or metrics or params or tags:
            self.client.log_batch(run_id, metrics=metrics[:MAX_METRICS_PER_BATCH],
                                  params=params[:MAX_PARAMS_PER_BATCH], tags=tags[:MAX_PARAMS_PER_BATCH])
            metrics, params = metrics[MAX_METRICS_PER_BATCH:], params[MAX_PARAMS_PER_BATCH:]
            tags, first = tags[MAX_PARAMS_PER_BATCH:], False
        if key in batch.ended:
            self.client.set_terminated(run_id, mlflow_status(batch.ended[key][0]), end_time=new and new.end_ms)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


# ---------------------------------------------------------------- MLflow's own SQL tables
ID_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_TIME_DIGITS, _SEQ_DIGITS = 9, 4  # milliseconds (9 digits last 3,000 years), then a sequence
_sequence = itertools.count(secrets.randbelow(36 ** _SEQ_DIGITS))


def _base36(n: int, width: int) -> str:
    out = []
    for _ in range(width):
        n, r = divmod(n, 36)
        out.append(ID_DIGITS[r])
    return "".join(reversed(out))


def _ordered_id() -> str:
    """A run id of 13 characters that grows with time: the millisecond clock, then a sequence (base 36).

    Every index of the metrics, params, tags and latest-metrics tables holds the run id: 13 characters instead
    of MLflow's 32 hex digits take ~2 KB off a tiny run's store (MLflow accepts any id of letters, digits,
    '_' and '-'). Increasing ids append to the end of those indexes; random ones scatter a batch's inserts over
    them (3.75 M metric rows: 95 → N runs/s). The sequence starts at a random one of 36^4 values per process,
    so that drivers writing to one store in the same millisecond are unlikely to collide (a collision would fail
    that write on the run table's primary key; its runs are then sent again with the next one, new ids drawn).
    """
    return _base36(time.time_ns() // 1_000_000, _TIME_DIGITS) + _base36(next(_sequence) % 36 ** _SEQ_DIGITS,
                                                                         _SEQ_DIGITS)


def _parts(items: list[str], size: int = 500) -> list[list[str]]:
    """Chunks small enough for one `IN (...)` of any database."""
    return [items[i:i + size] for i in range(0, len(items), size)]


def _stored(v: float) -> tuple[float, bool]:
    """(value, is_nan) as MLflow stores a metric value: NaN as 0, ±inf as ±FLOAT_MAX."""
    if v != v:
        return 0.0, True
    return (v if -FLOAT_MAX <= v <= FLOAT_MAX else math.copysign(FLOAT_MAX, v)), False


RUN_COLUMNS = ("run_uuid", "name", "source_type", "source_name", "entry_point_name", "user_id", "status",
               "start_time", "end_time", "deleted_time", "source_version", "lifecycle_stage", "experiment_id",
               "artifact_uri")
KEY_VALUE_COLUMNS = ("run_uuid", "key", "value")
METRIC_COLUMNS = ("run_uuid", "key", "value", "timestamp", "step", "is_nan")


class SqlSink:
    """Child runs written straight into MLflow's database, a whole batch per transaction.

    A run created and ended in one batch (a tiny run) is inserted once in its final state: its status, end
    time and status tag, with no update or delete after. Rows go to SQLite through its driver's executemany
    (SQLAlchemy's per-row parameter processing cost as much as the inserts themselves).
    """

    def __init__(self, store: Any, artifact_location: str, experiment_id: str, parent_id: str) -> None:
        from mlflow.store.tracking.dbmodels import models

        self.engine, self.m = store.engine, models
        self.artifact_location = artifact_location.rstrip("/")
        self.experiment_id, self.parent_id = int(experiment_id), parent_id
        self._latest: dict[str, dict[str, tuple]] = {}  # run id -> key -> (step, ts, value, is_nan) while it runs

    def _t(self, model: Any) -> Any:
        return model.__table__

    def children(self) -> dict[str, str]:
        """Run key tag -> run id of the parent's children."""
        import sqlalchemy as sa

        tags = self._t(self.m.SqlTag)
        parents = sa.select(tags.c.run_uuid).where(tags.c.key == PARENT, tags.c.value == self.parent_id)
        query = sa.select(tags.c.value, tags.c.run_uuid).where(tags.c.key == "bisweep.run_key",
                                                                tags.c.run_uuid.in_(parents))
        with self.engine.connect() as conn:
            return {key: run_id for key, run_id in conn.execute(query)}

    def steps(self, run_id: str) -> set[int]:
        """Steps already logged for a run (the steps of any of its metrics: a record's go out in one write)."""
        import sqlalchemy as sa

        t = self._t(self.m.SqlMetric)
        with self.engine.connect() as conn:
            return {s for (s,) in conn.execute(sa.select(t.c.step).distinct().where(t.c.run_uuid == run_id))}

    def write(self, batch: Batch, ids: dict[str, str]) -> None:
        """One transaction: the new runs, every metric point, the latest metrics, the ends."""
        for key in batch.new:
            ids[key] = _ordered_id()
        now = int(time.time() * 1000)
        try:
            with self.engine.begin() as conn:
                self._create(conn, batch, ids, now)
                self._metrics(conn, batch, ids)
                self._end(conn, {k: v for k, v in batch.ended.items() if k not in batch.new}, ids, now)
        except Exception:  # rolled back: the new runs do not exist, the latest values kept may not be stored
            for key in batch.metrics:
                self._latest.pop(ids.get(key, ""), None)
            for key in batch.new:
                ids.pop(key, None)
            raise

    def _create(self, conn: Any, batch: Batch, ids: dict[str, str], now: int) -> None:
        if not batch.new:
            return
        runs, tags, params = [], [], []
        for key, new in batch.new.items():
            run_id = ids[key]
            ended = batch.ended.get(key)
            status, end_time, final = ("RUNNING", None, {}) if ended is None else (
                mlflow_status(ended[0]), new.end_ms or now,
                {"status": ended[0], **({"error": ended[1]} if ended[1] else {})})
            runs.append((run_id, new.name, "UNKNOWN", "", "", "unknown", status, new.start_ms, end_time, None, "",
                         "active", self.experiment_id, f"{self.artifact_location}/{run_id}/artifacts"))
            tags += [(run_id, k, v) for k, v in {**new.tags, RUN_NAME: new.name, **final}.items()]
            params += [(run_id, k, v) for k, v in new.params.items()]
        self._insert(conn, self.m.SqlRun, RUN_COLUMNS, runs)
        self._insert(conn, self.m.SqlTag, KEY_VALUE_COLUMNS, tags)
        self._insert(conn, self.m.SqlParam, KEY_VALUE_COLUMNS, params)

    def _metrics(self, conn: Any, batch: Batch, ids: dict[str, str]) -> None:
        rows, touched, fresh = [], {}, []
        for key, points in batch.metrics.items():
            run_id = ids[key]
            if key in batch.new and key in batch.ended:  # all of it is in this batch: no state kept
                latest = touched[run_id] = {}
                fresh.append(run_id)
            else:
                if run_id not in self._latest:
                    self._latest[run_id] = self._stored_latest(conn, run_id) if key not in batch.new else {}
                latest = touched[run_id] = self._latest[run_id]
            for k, v, ts, step in points:
                value, is_nan = _stored(v)
                rows.append((run_id, k, value, ts, step, is_nan))
                old = latest.get(k)
                if old is None or (step, ts, value) > old[:3]:
                    latest[k] = (step, ts, value, is_nan)
        if not rows:
            return
        self._insert(conn, self.m.SqlMetric, METRIC_COLUMNS, rows)
        table = self._t(self.m.SqlLatestMetric)
        fresh_ids = set(fresh)
        for part in _parts([r for r in touched if r not in fresh_ids]):  # the latest point of each key: replaced
            conn.execute(table.delete().where(table.c.run_uuid.in_(part)))
        self._insert(conn, self.m.SqlLatestMetric, METRIC_COLUMNS, [(r, k, v, ts, s, n) for r, latest in touched.items()
                                                                    for k, (s, ts, v, n) in latest.items()])

    def _insert(self, conn: Any, model: Any, columns: tuple[str, ...], rows: list[tuple]) -> None:
        """Insert rows (tuples in `columns` order) in one executemany."""
        if not rows:
            return
        table = self._t(model)
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql(f"INSERT INTO {table.name} ({', '.join(columns)}) "
                                 f"VALUES ({', '.join('?' * len(columns))})", rows)
        else:
            conn.execute(table.insert(), [dict(zip(columns, r)) for r in rows])

    def _stored_latest(self, conn: Any, run_id: str) -> dict[str, tuple]:
        """The latest metrics of a run created before this session."""
        import sqlalchemy as sa

        t = self._t(self.m.SqlLatestMetric)
        rows = conn.execute(sa.select(t.c.key, t.c.step, t.c.timestamp, t.c.value, t.c.is_nan)
                            .where(t.c.run_uuid == run_id))
        return {k: (s, ts, v, bool(n)) for k, s, ts, v, n in rows}

    def _end(self, conn: Any, ended: dict[str, tuple[str, str | None]], ids: dict[str, str], now: int) -> None:
        """End runs created by an earlier batch: their status, end time and status (and error) tags."""
        if not ended:
            return
        runs, tags = self._t(self.m.SqlRun), self._t(self.m.SqlTag)
        by_status: dict[str, list[str]] = {}
        for key, (status, error) in ended.items():
            by_status.setdefault(status, []).append(ids[key])
            if error:
                conn.execute(tags.delete().where(tags.c.run_uuid == ids[key], tags.c.key == "error"))
                conn.execute(tags.insert(), [{"run_uuid": ids[key], "key": "error", "value": error}])
            self._latest.pop(ids[key], None)
        for status, run_ids in by_status.items():
            for part in _parts(run_ids):
                conn.execute(runs.update().where(runs.c.run_uuid.in_(part)).values(status=mlflow_status(status),
                                                                                end_time=now))
                conn.execute(tags.delete().where(tags.c.run_uuid.in_(part), tags.c.key == "status"))
            conn.execute(tags.insert(), [{"run_uuid": r, "key": "status", "value": status} for r in run_ids])

    def close(self) -> None:
        """Nothing held open between batches."""
