"""`bisweep`: run studies, build their reports, open the MLflow UI, list what is available.

    bisweep run quickstart                  # local Ray, MLflow in results/quickstart/mlflow.db
    bisweep run my_study.yaml --resume      # finish what a crash or Ctrl-C left
    bisweep report quickstart               # tables printed, plots in results/quickstart/report/
    bisweep ui quickstart                   # MLflow UI on http://127.0.0.1:5000
    bisweep list algorithms|problems|studies
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import signal
import sys
import warnings
import webbrowser
from pathlib import Path
from typing import Any, NoReturn

import yaml

import algorithms
import problems
from algorithms.run import Divergence
from problems.shared.errors import ParameterError
from problems.shared.registries import import_modules
from sweep import kinds
from sweep.execution import batching, options
from sweep.execution.disk import disk_full
from sweep.execution.lock import StudyLocked
from sweep.execution.ray_cluster import RAY_START_SECONDS, NodeLost
from sweep.execution.runner import run_study
from sweep.report.build import build_report
from sweep.results import columns, storage_sync
from sweep.results.safe_files import check_tree
from sweep.results.store import ResultStore
from sweep.study import spec
from sweep.study.errors import short
from sweep.study.limits import MAX_RUNS, MAX_RUNS_LIMIT
from sweep.study.model import scale_names
from sweep.study.sources import results_dir, study_name
from sweep.tracking import ui_server
from sweep.tracking.masking import mask
from sweep.tracking.tracker import Tracker, default_tracking_uri, local_artifact_location

columns.use_system_allocator()  # before Arrow is first used: `run` and `report` read every shard of a study


def _results_dir(args: argparse.Namespace, name: str) -> Path:
    """--results-dir, else ./results/<study> (./results/<study>-<scale> at a named scale other than the default)."""
    return results_dir(name, getattr(args, "scale", None), args.results_dir)


# ---------------------------------------------------------------- commands
def cmd_run(args: argparse.Namespace) -> int:
    """Validate the study completely, then run (or finish) it."""
    options.check_num_cpus(args.num_cpus)
    if not 0 < args.ray_start_timeout < float("inf"):
        raise ParameterError(f"ray-start-timeout: must be a positive number of seconds, got {args.ray_start_timeout:g}")
    if args.max_runs is not None and not 1 <= args.max_runs <= MAX_RUNS_LIMIT:  # a driver holds every run's key
        raise ParameterError(f"max-runs: must be a positive integer up to {MAX_RUNS_LIMIT:,}, got {args.max_runs}")
    study = spec.load(args.study, scale=args.scale, max_runs=args.max_runs or MAX_RUNS, count_only=args.validate_only)
    study = options.with_max_failures(study, args.max_failures)
    study = options.with_mlflow_children(study, args.mlflow_children)
    if args.validate_only:
        n, mode = study.configurations, batching.resolve(study)
        print(f"study '{study.name}' (scale {study.scale}) is valid: {n} configurations x {len(study.seeds)} seeds "
              f"= {n * len(study.seeds)} runs; {batching.trial_sizes(study)}\n  {mode.why}")
        if growth := kinds.get(study.kind).growth(study):
            print(f"  {growth}")
        return 0
    args.results_root = _results_dir(args, study.name)  # named if the disk fills up
    outcome = run_study(study, args.results_root, address=args.address, tracking_uri=args.tracking_uri,
                        storage_path=args.storage, resume=args.resume, num_cpus=args.num_cpus,
                        report=not args.no_report, ray_start_timeout=args.ray_start_timeout)
    if outcome.interrupted_by_user:
        raise KeyboardInterrupt  # main's one line and exit code 130
    if outcome.counts["missing"]:
        print(f"bisweep: {outcome.counts['missing']} runs did not run; `bisweep run {args.study} --resume` "
              "finishes them", file=sys.stderr)
    return 0 if outcome.complete else 1


def cmd_report(args: argparse.Namespace) -> int:
    """Build the report from the results on disk and attach it to the study's MLflow parent run."""
    root = _results_dir(args, study_name(args.study))
    if args.storage:  # the results a cluster copied to storage, fetched here first (the report goes back too)
        options.check_storage(args.storage)
        storage_sync.pull(root, args.storage)
    meta = ResultStore(root).read_study()
    check_tree(root)  # no link where the report or MLflow write (sweep/results/safe_files.py)
    import_modules(args.imports or [], "--import")  # only what the user names: a results directory never runs code
    rep = build_report(root, metric=args.metric, goal=args.goal, force=args.force, study=meta)
    if not args.no_mlflow:
        uri = args.tracking_uri or default_tracking_uri(root)
        tracker = Tracker(uri, meta.name, local_artifact_location(uri, root))
        if tracker.find_parent(meta.spec_hash):
            tracker.log_report(rep.directory, rep.artifact_name)
            what = f"partial report ({rep.partial}) logged as {rep.artifact_name}/" if rep.partial else "report logged"
            print(f"{what} to MLflow run {tracker.parent_id}\n  (store {mask(uri)})")
        else:
            print(f"bisweep: no MLflow parent run for this study at {mask(uri)}; report kept on disk", file=sys.stderr)
    if args.storage:
        storage_sync.Mirror(root, args.storage).push()
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    """Serve the MLflow UI of a study's tracking store on 127.0.0.1 (until Ctrl-C)."""
    name = None
    if args.tracking_uri:
        uri = args.tracking_uri
        if uri.startswith(("http://", "https://")):
            print(f"bisweep: {mask(uri)} is an MLflow server: open it in a browser, it serves its own UI")
            return 0
    else:
        name = study_name(args.study) if args.study else None
        if name is None:
            raise ParameterError("study: give a study (or --tracking-uri) whose MLflow store to open")
        root = _results_dir(args, name)
        if not (root / "mlflow.db").exists():
            raise ParameterError(f"study: no MLflow store at {root / 'mlflow.db'}; run the study first")
        uri = default_tracking_uri(root)
    options.check_listen(args.host, args.port)
    options.check_tracking_uri(uri)  # a database that does not answer: one line within seconds, not endless retries
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    if not args.debug:  # the server's own warnings (Starlette's deprecations) are no line of the platform's
        env["PYTHONWARNINGS"] = "ignore"
    # One worker serves one person's browser; MLflow's default of four each import MLflow first (~70 s before the
    # first answer on a busy 2-core machine, against ~20 s). The store's URI goes in the environment (ui_server.start).
    cmd = [sys.executable, "-m", "mlflow", "ui", "--host", args.host, "--port", str(args.port), "--workers", "1"]
    url = f"http://{args.host}:{args.port}" + _experiment_page(uri, name)
    print(f"bisweep: starting the MLflow UI for {mask(uri)} (Ctrl-C stops it)", flush=True)
    # A process group of its own: `mlflow ui` runs its server in worker processes, stopped with it.
    proc, watchdog = ui_server.start(cmd, env, uri)
    previous = signal.signal(signal.SIGTERM, _terminated)  # SIGTERM stops the server too, as Ctrl-C does
    try:
        if not ui_server.wait_answering(proc, args.host, args.port):
            return proc.wait()  # it ended without serving: its own error is above
        print(f"bisweep: MLflow UI at {url}", flush=True)
        if args.open:
            webbrowser.open(url)
        return proc.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        ui_server.stop_group(proc, watchdog=watchdog)


def _terminated(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # `cmd_ui` then stops the server's process group


def _experiment_page(uri: str, experiment: str | None) -> str:
    """The URL fragment of the study's runs table (MLflow 3 opens its GenAI overview otherwise), or ''."""
    if experiment is None:
        return ""
    from mlflow import MlflowClient

    exp = MlflowClient(uri).get_experiment_by_name(experiment)
    return "" if exp is None else f"/#/experiments/{exp.experiment_id}?workflowType=machine_learning"


def cmd_cluster_check(args: argparse.Namespace) -> int:
    """Check a Ray cluster-launcher file offline against Ray's own schema: one line per error (exit 2)."""
    from sweep.execution import cluster_check

    errors, notes = cluster_check.check(args.file)
    for line in errors:
        print(f"bisweep: error: {line}", file=sys.stderr)
    if errors:
        return 2
    for line in notes:
        print(f"bisweep: {line}")
    print(f"bisweep: {args.file} is a valid Ray cluster file")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """List algorithms, problems or studies with their parameters."""
    items = _listing(args.what)
    if args.json:
        print(json.dumps(items, indent=1, default=repr))
        return 0
    for name, info in items.items():
        print(_describe(name, info))
    return 0


def _listing(what: str) -> dict[str, Any]:
    if what == "algorithms":
        return algorithms.available()
    if what == "problems":
        return problems.available()
    out = {}
    for name, source in spec.studies().items():
        data = (yaml.safe_load(source.read_text()) or {}) if isinstance(source, Path) else source
        out[name] = {"doc": data.get("description", ""), "kind": data.get("kind", kinds.DEFAULT_KIND),
                     "file": str(source) if isinstance(source, Path) else spec.defined_in(data["claim"]),
                     "algorithms": _names(data.get("algorithms", []), "label"),
                     "problems": _names(data.get("problems", []), "name"),
                     "scales": scale_names(data), "divergence": _divergence_rule(data.get("divergence"))}
    return out


def _names(entries: list[Any], key: str) -> list[str]:
    """The distinct labels (or names) of a study's algorithm or problem entries, in order."""
    out = [e if isinstance(e, str) else str(e.get(key) or e.get("name")) for e in entries if isinstance(e, (str, dict))]
    return list(dict.fromkeys(out))


def _divergence_rule(block: Any) -> str:
    """The divergence rule a study uses, in words (its own block, else the default)."""
    rule = Divergence.from_dict(block if isinstance(block, dict) else None)
    return f"a watched quantity past {rule.factor:g} × max(|start|, 1) or non-finite; watched: {', '.join(rule.metrics)}"


def _describe(name: str, info: dict[str, Any]) -> str:
    lines = [f"{name}: {info.get('doc', '')}"]
    flags = [k for k in ("first_order", "stochastic", "online", "constrained") if info.get(k)]
    extra = []
    if "loops" in info:
        extra.append(f"{info['loops']} loop")
    if flags:
        extra.append(", ".join(flags))
    if info.get("step_sizes"):
        extra.append("initial step sizes: " + ", ".join(info["step_sizes"]))
    if info.get("paper"):
        extra.append(info["paper"])
    for k in ("kind", "algorithms", "problems", "scales", "divergence", "file"):
        if k in info:
            extra.append(f"{k}: {info[k] if not isinstance(info[k], list) else ', '.join(info[k])}")
    if "online" in info and "loops" not in info:
        extra.append("online" if info["online"] else "offline")
    if extra:
        lines.append("    " + " | ".join(extra))
    for p, d in (info.get("params") or {}).items():
        allowed = f"one of {d['choices']}" if "choices" in d else d["check"]
        lines.append(f"    {p} = {d['default']!r}  ({allowed})  {d['doc']}")
    return "\n".join(lines)


# ---------------------------------------------------------------- parser
STUDY_HELP = "a built-in study name (see `bisweep list studies`) or a study YAML file"
RESULTS_HELP = "the study's results directory (default ./results/<study>, or ./results/<study>-<scale>)"
SCALE_HELP = "the scale the study ran at (finds ./results/<study>-<scale>)"


class _Parser(argparse.ArgumentParser):
    """argparse's parser with its errors in one line (its usage is left to --help)."""

    def error(self, message: str) -> NoReturn:
        first = (message.strip().splitlines() or ["bad command line"])[0]
        self.exit(2, f"bisweep: error: {short(first)} (see `{self.prog} --help`)\n")


def parser() -> argparse.ArgumentParser:
    """The argument parser of `bisweep`."""
    ap = _Parser(prog="bisweep", description="Bilevel-optimization sweeps on Ray Tune with MLflow tracking.")
    ap.add_argument("--debug", action="store_true", help="show the full traceback of an unexpected error")
    sub = ap.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a study (a built-in name or a YAML file)")
    run.add_argument("study", help=STUDY_HELP)
    run.add_argument("--results-dir", help="where results go (default ./results/<study>, ./results/<study>-<scale> "
                                           "at a named scale)")
    run.add_argument("--address", help="HOST:PORT of a running Ray cluster, or 'auto' (default: RAY_ADDRESS if "
                                       "set, as in a Ray Job; else a local Ray of its own with every CPU)")
    run.add_argument("--tracking-uri", help="MLflow tracking URI, e.g. http://127.0.0.1:5000 (default: SQLite file "
                                            "mlflow.db in the results directory)")
    run.add_argument("--storage", help="Ray Tune storage path for checkpoints (default <results>/ray; "
                                       "a shared or s3:// path on multi-node clusters)")
    run.add_argument("--resume", action="store_true", help="finish an interrupted study (re-running does the same)")
    run.add_argument("--max-failures", type=int, help="retries of a trial whose process or node died, each from its "
                                                      "last checkpoint (default: the study's max_failures, 2)")
    run.add_argument("--mlflow-children", metavar="N|all", help="most runs that each get an MLflow child run (default: "
                     "the study's mlflow_children, 10,000; beyond, children for what a reader browses)")
    run.add_argument("--num-cpus", type=int, help="CPUs for a local Ray (default: all)")
    run.add_argument("--no-report", action="store_true", help="skip the report at the end")
    run.add_argument("--ray-start-timeout", type=float, default=RAY_START_SECONDS, metavar="SECONDS",
                     help=f"how long a local Ray may take to start, tried twice (default {RAY_START_SECONDS:g})")
    run.add_argument("--validate-only", action="store_true", help="validate the study and exit")
    run.add_argument("--max-runs", type=int, help=f"refuse a study of more runs than this (default {MAX_RUNS:,})")
    run.add_argument("--scale", help="a named size of the study from its `scales` (built-in studies: ci, default, "
                                     "full); results go to ./results/<study>-<scale> unless it is the default")
    run.set_defaults(func=cmd_run)

    rep = sub.add_parser("report", help="print a study's tables and write its plots (from the results on disk)")
    rep.add_argument("study", help=STUDY_HELP)
    rep.add_argument("--results-dir", help=RESULTS_HELP)
    rep.add_argument("--tracking-uri", help="the MLflow tracking URI the study ran with (default: the SQLite file "
                                            "mlflow.db in the results directory)")
    rep.add_argument("--no-mlflow", action="store_true", help="do not attach the report to the MLflow parent run")
    rep.add_argument("--storage", help="the --storage the study ran with: its results are copied from there first, "
                                       "and the report back")
    rep.add_argument("--force", action="store_true", help="rebuild the report even if nothing changed since it was built")
    rep.add_argument("--scale", help=SCALE_HELP)
    rep.add_argument("--import", dest="imports", action="append", metavar="MODULE",
                     help="import this module first (a study's plugin kinds or claims; repeatable): the results "
                          "directory's own list is never imported")
    rep.add_argument("--metric", help="compare this final value instead of the study's report.metric (e.g. F, "
                                      "grad_F_sq, y_err_sq, test_accuracy); written to report-<metric>-<goal>/")
    rep.add_argument("--goal", choices=("min", "max"), help="whether lower or higher --metric is better "
                                                            "(default: the study's report.goal)")
    rep.set_defaults(func=cmd_report)

    ui = sub.add_parser("ui", help="serve the MLflow UI of a study's tracking store on 127.0.0.1")
    ui.add_argument("study", nargs="?", help=STUDY_HELP + " whose store to open (or give --tracking-uri)")
    ui.add_argument("--results-dir", help=RESULTS_HELP)
    ui.add_argument("--tracking-uri", help="open this store instead (sqlite:///path/mlflow.db; a server URI serves "
                                           "its own UI)")
    ui.add_argument("--scale", help=SCALE_HELP)
    ui.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    ui.add_argument("--port", type=int, default=5000, help="port to listen on (default 5000)")
    ui.add_argument("--open", action="store_true", help="also open a browser")
    ui.set_defaults(func=cmd_ui)

    cluster = sub.add_parser("cluster", help="Ray cluster-launcher files").add_subparsers(
        dest="action", required=True, help="check: validate a cluster file offline")
    check = cluster.add_parser("check", help="validate a cluster file (e.g. cluster.yaml) offline against Ray's schema")
    check.add_argument("file", help="the cluster file `ray up` would take")
    check.set_defaults(func=cmd_cluster_check)

    ls = sub.add_parser("list", help="list algorithms, problems or built-in studies with their parameters")
    ls.add_argument("what", choices=("algorithms", "problems", "studies"), help="what to list")
    ls.add_argument("--json", action="store_true", help="print JSON (every parameter with its default, check and "
                                                        "description) instead of text")
    ls.set_defaults(func=cmd_list)
    return ap


def quiet_third_party_warnings() -> None:
    """Keep the libraries' warnings (deprecations in Ray, MLflow, Starlette, ...) out of the platform's own lines:
    a user can act on none of them; `--debug` shows them."""
    for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
        warnings.filterwarnings("ignore", category=category)
    warnings.filterwarnings("ignore", category=UserWarning, module=r"(?!(problems|algorithms|sweep)(\.|$))")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `bisweep` console script: every failure is one line (--debug: the traceback)."""
    args = parser().parse_args(argv)
    if not args.debug:
        quiet_third_party_warnings()
    try:
        return args.func(args)
    except (ParameterError, FileNotFoundError, StudyLocked) as exc:
        for line in str(exc).splitlines():  # a study file's errors, one line each
            print(f"bisweep: error: {short(line)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bisweep: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    except NodeLost as exc:  # its message is the line to print
        print(str(exc), file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001  the CLI boundary: one line, the traceback on request
        if args.debug:
            raise
        if (full := disk_full(exc, getattr(args, "results_root", None))) is not None:
            print(full, file=sys.stderr)
            return 1
        if isinstance(exc, (BrokenPipeError, ConnectionResetError)) and _raised_in_ray(exc):
            print("bisweep: error: the local Ray stopped under the study (its raylet or a worker died: out of memory, "
                  "or killed); the results written so far are kept: run the same command again to resume",
                  file=sys.stderr)
            return 1
        first = (str(exc).strip().splitlines() or [""])[0]
        print(f"bisweep: error: {type(exc).__name__}: {first} (rerun with --debug for the traceback)", file=sys.stderr)
        return 1


def _raised_in_ray(exc: BaseException) -> bool:
    """Whether the exception was raised in Ray's code (a pipe to its raylet broke), not in writing our output."""
    tb = exc.__traceback__
    while tb is not None:
        if f"{os.sep}ray{os.sep}" in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return False


def entry() -> None:
    """The `bisweep` console script: `main`, then exit without tearing down every imported module.

    Freeing the objects of Ray, Tune and MLflow one by one at interpreter exit took 1.5-3.5 s on this
    machine; everything is written and closed by then, so the exit handlers run and the process ends.
    """
    code = main()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
