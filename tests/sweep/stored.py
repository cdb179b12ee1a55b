"""A results directory read as tests check it: the runs ended, their summaries, and their records as stored (the
per-run files of older drivers and the shards alike, a record stored twice kept twice: exactly-once is checked)."""
from pathlib import Path

from sweep.results.shards import ShardLog
from sweep.results.store import DONE_STATUSES, ResultStore


def summaries(res: Path) -> list[dict]:
    """Every ended run's summary, with its configuration (`point`, from study.json: a Parquet shard's summary does
    not repeat it)."""
    store = ResultStore(res)
    points = {p["key"]: p for p in store.read_study().points}
    return [{"point": points.get(s["run_key"].rsplit(".s", 1)[0]), **s} for s in store.summaries()]


def done(res: Path) -> set[str]:
    """The runs finished or diverged (what a resumed driver skips)."""
    return {k for k, status in ResultStore(res).ended().items() if status in DONE_STATUSES}


def stored_records(res: Path, key: str) -> list[dict]:
    """A run's records as stored, in order, none merged."""
    store = ResultStore(res)
    return store._read_lines(key) + ShardLog(store.root).read().get(key, ([], None))[0]


def has_records(res: Path) -> bool:
    """Whether any record is stored (a run is under way)."""
    return bool(ShardLog(Path(res)).entries()) or ((res / "records").is_dir() and any((res / "records").iterdir()))
