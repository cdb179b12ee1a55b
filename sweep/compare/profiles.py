"""Performance profiles (Dolan & Moré 2002) and data profiles (Moré & Wild 2009) over a problem family.

A *function* is one seeded problem instance (problem, instance); a *unit* is one run replicate of it
(problem, instance, seed), on which every algorithm is run once. A run solves a unit at level τ at the
first record where the convergence test of Moré & Wild holds:

    F(x0) − F(x) ≥ (1 − τ) (F(x0) − F_L),   i.e.   F(x) ≤ F_L + τ (F(x0) − F_L),

with F_L the exact optimum of the function where it is known, else (here) the smallest value any finished run
found on it (flagged, so a plot can say so; a benchmark passes a reference solve instead: no compared run sets it). F_L is a property of the function: a benchmark computes it once
from every run on the instance (`lower_bounds` over all configurations) and passes it to `hitting_costs`, so
the target is the same for every algorithm and budget. For ‖∇F‖² targets the same test with F_L = 0 is the
relative reduction ‖∇F(x)‖² ≤ τ ‖∇F(x0)‖². Runs that failed or diverged never solve a unit, even if a
record before the failure passed the test; their records do not enter F_L either.

Cost axes: gradient-equivalents ("calls"), samples drawn by the oracles ("samples": a full-batch gradient
of a finite sum draws n, a minibatch one its batch) or compute seconds ("seconds"). A gradient-equivalent weighs
every oracle call by `GRADIENT_EQUIVALENTS`: 1 for a gradient pair (∇x, ∇y) of f or g, 1 for an HVP
∇²yy g·v and 1 for a cross product ∇²xy g·v. Reverse-mode differentiation computes an HVP or a
cross product for a small constant times the cost of a gradient, and the oracle-complexity convention of
the bilevel literature (Ji, Yang & Liang 2021; Dagréou et al. 2022) and of benchmark_bilevel counts each
as one oracle call; weight 1 also keeps the axis equal to the `oracle_calls` budget that stops runs (`calls/total`).
Function values and dense Hessian/Jacobian calls count 1 as well; dense calls cost up to dim_y HVPs,
so for SSIGD/DS-BLO read the seconds axis (or pass other weights).

Performance profile: r = t / min_s t over the algorithms on the unit (exactly 1 for every tied best,
+inf for a unit the algorithm does not solve); ρ_s(α) = fraction of units with r ≤ α.
Data profile: d_s(κ) = fraction of units solved within cost κ (unnormalized: gradient-equivalents and
seconds are already comparable across dimensions, unlike Moré & Wild's simplex gradients).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from problems.counting import ORACLE_KINDS
from sweep.results import safe_files

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Weight of one call of each oracle kind in gradient-equivalents (see the module docstring).
GRADIENT_EQUIVALENTS: dict[str, float] = {k: 1.0 for k in ORACLE_KINDS}
TAUS = (1e-1, 1e-3, 1e-5)
FUNCTION = ("problem", "instance")
UNIT = FUNCTION + ("seed",)
COST_AXES = ("calls", "samples", "seconds")
#: Known lower bound of each target quantity: a column of exact optima, or a number for every function.
EXACT: dict[str, str | float] = {"F": "F_opt", "grad_F_sq": 0.0}
#: Statuses whose records may solve a unit.
SOLVING = ("finished",)


# ------------------------------------------------------------------ histories
def gradient_equivalents(record: Mapping[str, Any], weights: Mapping[str, float] = GRADIENT_EQUIVALENTS) -> float:
    """Weighted oracle calls of a run-loop record (its calls/<kind> counters)."""
    unknown = sorted(set(weights) - set(ORACLE_KINDS))
    if unknown:
        raise ValueError(f"weights: unknown oracle kind '{unknown[0]}'; allowed: {', '.join(ORACLE_KINDS)}")
    return float(sum(w * float(record.get(f"calls/{k}", 0)) for k, w in weights.items()))


def history_frame(runs: Iterable[Mapping[str, Any]], weights: Mapping[str, float] = GRADIENT_EQUIVALENTS,
                  values: Sequence[str] = ("F", "grad_F_sq")) -> pd.DataFrame:
    """One row per record of every run, the input of `hitting_costs`.

    Each run maps algorithm, problem, instance, seed, status (finished, diverged or failed) and records
    (run-loop records). Columns: algorithm, problem, instance, seed, status, iteration, calls
    (gradient-equivalents), samples (samples/total), seconds (compute time), the `values`, and F_opt
    (F − F_gap: the exact optimum when the problem knows it, else NaN).
    """
    rows = []
    for run in runs:
        meta = {k: run[k] for k in ("algorithm", "problem", "instance", "seed", "status")}
        for r in run["records"]:
            row = {**meta, "iteration": int(r["iteration"]), "calls": gradient_equivalents(r, weights),
                   "samples": float(r.get("samples/total", math.nan)), "seconds": float(r.get("time", math.nan))}
            row.update({v: float(r.get(v, math.nan)) for v in values})
            gap = r.get("F_gap")
            row["F_opt"] = float(r["F"]) - float(gap) if gap is not None and "F" in r else math.nan
            rows.append(row)
    columns = ["algorithm", *UNIT, "status", "iteration", *COST_AXES, *values, "F_opt"]
    return pd.DataFrame(rows, columns=columns)


def _require(frame: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{what}: missing column '{missing[0]}'")


# ------------------------------------------------------------------ targets
def lower_bounds(histories: pd.DataFrame, value: str = "F", exact: str | float | None = "auto") -> pd.DataFrame:
    """Per function: start F(x0), lower bound F_L and whether F_L is exact.

    `exact`: a column of known optima (NaN where unknown), a number known for every function, None
    (nothing known), or "auto": `EXACT[value]` (the F_opt column for F, 0 for ‖∇F‖²). Start: the first
    record of each run (the same x0 for every run of a function; the largest is taken).
    Columns: problem, instance, start, lower, lower_exact, lower_source (what F_L is, in words).
    """
    _require(histories, [*FUNCTION, "algorithm", "status", "iteration", value], "histories")
    if isinstance(exact, str) and exact == "auto":
        exact = EXACT.get(value)
    h = histories.sort_values("iteration", kind="stable")
    firsts = h.groupby([*FUNCTION, "algorithm", *(["seed"] if "seed" in h else [])], sort=False)[value].first()
    out = firsts.groupby(level=list(range(len(FUNCTION)))).max().rename("start").to_frame()
    solved = h[h["status"].isin(SOLVING) & np.isfinite(h[value].astype(float))]
    out["found"] = solved.groupby(list(FUNCTION))[value].min()
    if isinstance(exact, str) and exact in h:
        out["known"] = h.groupby(list(FUNCTION))[exact].max()
    else:
        out["known"] = math.nan if exact is None or isinstance(exact, str) else float(exact)
    out["lower_exact"] = np.isfinite(out["known"].astype(float))
    # No finished run and no known optimum: F_L = F(x0), the test then only asks not to go up.
    out["lower"] = out["known"].where(out["lower_exact"], out["found"].fillna(out["start"]))
    out["lower_source"] = np.where(out["lower_exact"], "exact optimum", np.where(
        out["found"].notna(), "best value of any run on the instance", "F(x0): no run finished"))
    return out.reset_index()[[*FUNCTION, "start", "lower", "lower_exact", "lower_source"]]


def hitting_costs(histories: pd.DataFrame, taus: Sequence[float] = TAUS, value: str = "F",
                  exact: str | float | None = "auto", bounds: pd.DataFrame | None = None) -> pd.DataFrame:
    """Cost for each run to pass the convergence test at each τ (+inf: never); `exact` as in `lower_bounds`.

    `bounds`: F(x0) and F_L per function (`lower_bounds` of a wider set of runs); default: from `histories`.

    Every (unit, algorithm) pair present in the family appears; a pair without a run has status
    "missing". Columns: problem, instance, seed, algorithm, tau, status, reached, calls, samples, seconds,
    spent (the run's gradient-equivalents in all, NaN when missing), start, lower, lower_exact, lower_source,
    target (the value F_L + τ(F(x0) − F_L) to reach). A hit is the first record passing the test: with exact
    budgets (algorithms.run) never past the run's budget, so ranking, profiles, ERT and the ECDF share it.
    """
    _require(histories, [*UNIT, "algorithm", "status", "iteration", "calls", "seconds", value], "histories")
    if "samples" not in histories:  # histories without sample counters: that axis is unknown
        histories = histories.assign(samples=math.nan)
    bounds = lower_bounds(histories, value, exact) if bounds is None else bounds
    keys = [*UNIT, "algorithm"]
    h = histories.merge(bounds, on=list(FUNCTION)).sort_values([*keys, "iteration"], kind="stable")
    status = h.groupby(keys, sort=True)["status"].last()
    grid = _complete(status, histories)
    # Row i of `grid` is group i of `h` where the group exists (both sorted by keys).
    gid = h.groupby(keys, sort=True).ngroup().to_numpy()
    where = pd.MultiIndex.from_frame(grid[keys]).get_indexer(status.index)
    row_of = where[gid]
    cost = h[list(COST_AXES)].to_numpy(float)
    # F − F_L ≤ τ (F(x0) − F_L): the same test without the cancellation of F(x0) − F at small τ.
    excess = (h[value] - h["lower"]).to_numpy(float)
    scale = (h["start"] - h["lower"]).to_numpy(float)
    solving = h["status"].isin(SOLVING).to_numpy()
    frames = []
    for tau in taus:
        ok = np.flatnonzero(solving & (excess <= tau * scale))
        first = np.full(len(grid), len(h))
        np.minimum.at(first, row_of[ok], ok)  # the first passing record of each run (rows are in record order)
        reached = first < len(h)
        f = grid.copy()
        f["tau"] = float(tau)
        f["reached"] = reached
        values = np.full((len(grid), len(COST_AXES)), math.inf)
        values[reached] = cost[first[reached]]
        f[list(COST_AXES)] = values
        frames.append(f)
    out = pd.concat(frames, ignore_index=True).merge(bounds, on=list(FUNCTION))
    out["target"] = out["lower"] + out["tau"] * (out["start"] - out["lower"])
    spent = h.groupby(keys, sort=True)["calls"].last().rename("spent")  # a censored run is charged this
    out = out.join(spent, on=keys)
    return out[[*UNIT, "algorithm", "tau", "status", "reached", *COST_AXES, "spent", "start", "lower", "lower_exact",
                "lower_source", "target"]]


def _complete(status: pd.Series, histories: pd.DataFrame) -> pd.DataFrame:
    """Every unit × every algorithm, with the run's status or "missing"."""
    units = histories[list(UNIT)].drop_duplicates()
    names = pd.DataFrame({"algorithm": sorted(histories["algorithm"].unique())})
    grid = units.merge(names, how="cross").sort_values([*UNIT, "algorithm"], kind="stable")
    grid = grid.join(status, on=[*UNIT, "algorithm"])
    grid["status"] = grid["status"].fillna("missing")
    return grid.reset_index(drop=True)


# ------------------------------------------------------------------ profiles
def _check_cost(costs: pd.DataFrame, cost: str) -> None:
    if cost not in COST_AXES:
        raise ValueError(f"cost: must be one of {', '.join(COST_AXES)}, got {cost!r}")
    _require(costs, [*UNIT, "algorithm", "tau", cost], "costs")


def performance_ratios(costs: pd.DataFrame, cost: str = "calls") -> pd.DataFrame:
    """r = t / min over algorithms of t per (unit, τ): 1 for every tied best, +inf when unsolved.

    Columns: problem, instance, seed, tau, algorithm, ratio.
    """
    _check_cost(costs, cost)
    t = costs.pivot_table(index=[*UNIT, "tau"], columns="algorithm", values=cost, aggfunc="first")
    values = t.to_numpy(dtype=float)
    best = np.min(values, axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(values == best, 1.0, values / best)
    ratio[~np.isfinite(values)] = math.inf  # unsolved, even when no algorithm solved the unit
    out = pd.DataFrame(ratio, index=t.index, columns=t.columns).stack().rename("ratio").reset_index()
    return out[[*UNIT, "tau", "algorithm", "ratio"]]


def performance_profile(costs: pd.DataFrame, cost: str = "calls") -> pd.DataFrame:
    """ρ_s(α) at every breakpoint α (1 and each finite ratio): columns tau, algorithm, ratio, fraction."""
    ratios = performance_ratios(costs, cost)
    return _step_fractions(ratios, "ratio", first=1.0)


def data_profile(costs: pd.DataFrame, cost: str = "calls") -> pd.DataFrame:
    """d_s(κ) at every breakpoint κ (each finite solve cost): columns tau, algorithm, budget, fraction."""
    _check_cost(costs, cost)
    frame = costs[[*UNIT, "tau", "algorithm", cost]].rename(columns={cost: "budget"})
    return _step_fractions(frame, "budget", first=None)


def _step_fractions(frame: pd.DataFrame, x: str, first: float | None) -> pd.DataFrame:
    """Fraction of units with value ≤ each breakpoint, per τ and algorithm, on one grid per τ."""
    rows = []
    for tau, g in frame.groupby("tau", sort=True):
        finite = g.loc[np.isfinite(g[x].astype(float)), x].to_numpy(float)
        grid = np.unique(np.concatenate([finite, [first] if first is not None else []]))
        for name, a in g.groupby("algorithm", sort=True):
            v = np.sort(a[x].to_numpy(float))
            counts = np.searchsorted(v, grid, side="right")
            rows.append(pd.DataFrame({"tau": tau, "algorithm": name, x: grid, "fraction": counts / len(v)}))
    if not rows:
        return pd.DataFrame(columns=["tau", "algorithm", x, "fraction"])
    return pd.concat(rows, ignore_index=True)


# ------------------------------------------------------------------ plots
def lower_bound_note(costs: pd.DataFrame, value: str = "F") -> str:
    """What F_L is, for a caption: exact optima, best values found, or the relative ‖∇F‖² test."""
    if value == "grad_F_sq":
        return "target: ‖∇F(x)‖² ≤ τ ‖∇F(x0)‖² (relative reduction)"
    funcs = costs.drop_duplicates(list(FUNCTION))
    n, exact = len(funcs), int(funcs["lower_exact"].sum())
    test = "target: F(x0) − F(x) ≥ (1 − τ)(F(x0) − F_L); "
    if exact == n:
        return test + f"F_L = exact optimum on all {n} instances"
    if exact == 0:
        return test + f"F_L = best value found by any run on all {n} instances (no exact optimum known)"
    return test + f"F_L = exact optimum on {exact} of {n} instances, best value found by any run on the rest"


def _pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend, imported late (trials never plot)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_profile(profile: pd.DataFrame, caption: str, path: str | Path | None = None,
                 title: str = "", cost_label: str = "gradient-equivalents", budget: float | None = None,
                 ylabel: str = "fraction of units solved") -> Figure:
    """Step curves of a performance profile (column ratio) or data profile (column budget), one panel per τ.

    The panels share one x range: α from 1 to past the largest finite ratio of any panel; a data profile's
    axis from below the cheapest solve to `budget` (marked; default past the dearest solve). Line styles
    cycle with the colours so that tied curves stay visible; the caption goes under the panels. With a
    `path` the figure is written there and closed (it can still be inspected).
    """
    plt = _pyplot()
    x = "ratio" if "ratio" in profile.columns else "budget"
    taus = sorted(profile["tau"].unique(), reverse=True)
    n = max(len(taus), 1)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.6), squeeze=False, sharey=True, sharex=True)
    limits = _x_limits(profile[x].to_numpy(float), x, budget)
    for ax, tau in zip(axes[0], taus):
        _panel(ax, profile[profile["tau"] == tau], x, tau, cost_label, limits, budget)
    axes[0][0].set_ylabel(ylabel)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    fig.text(0.5, 0.0, caption, ha="center", va="top", fontsize=8)
    if path is not None:
        with safe_files.open_file(path, "wb") as fh:  # never through a link in a results directory
            fig.savefig(fh, format="png", dpi=120, bbox_inches="tight")
        plt.close(fig)
    return fig


_STYLES = ("-", "--", ":", "-.")


def _x_limits(grid: np.ndarray, x: str, budget: float | None) -> tuple[float, float]:
    """One x range for every panel: [1, 1.2 · largest ratio] or [cheapest solve / 1.5, budget · 1.05]."""
    positive = grid[np.isfinite(grid) & (grid > 0)]
    if x == "ratio":
        return 1.0, max(2.0, float(positive.max()) * 1.2 if positive.size else 2.0)
    right = budget * 1.05 if budget else (float(positive.max()) * 1.5 if positive.size else 2.0)
    left = float(positive.min()) / 1.5 if positive.size else right / 100
    return min(left, right / 10), right


def _panel(ax: Axes, panel: pd.DataFrame, x: str, tau: float, cost_label: str, limits: tuple[float, float],
           budget: float | None) -> None:
    """One τ: a step curve per algorithm across the shared x range."""
    from matplotlib import ticker

    left, right = limits
    colours = _pyplot().cm.tab10
    for i, (name, g) in enumerate(panel.groupby("algorithm", sort=True)):
        xs, ys = g[x].to_numpy(float), g["fraction"].to_numpy(float)
        if x == "budget" and xs[0] > left:  # data profile: nothing is solved without a budget
            xs, ys = np.insert(xs, 0, left), np.insert(ys, 0, 0.0)
        # 10 colours, then the next line style: unique up to 40 curves (cycling both together repeats at 20)
        ax.step(np.append(xs, right), np.append(ys, ys[-1]), where="post", label=name, color=colours(i % 10),
                linestyle=_STYLES[(i // 10) % len(_STYLES)])
    if x == "ratio":
        ax.set_xscale("log", base=2)
        ax.set_xlabel("performance ratio α (cost / best cost)")
    else:
        ax.set_xscale("log")
        ax.set_xlabel(f"budget ({cost_label})")
        if budget:
            ax.axvline(budget, color="0.3", linewidth=0.8, linestyle="--")
            ax.text(budget, 1.0, " budget", rotation=90, va="top", ha="right", fontsize=7, color="0.3")
    ax.set_xlim(left, right)
    if x == "budget" and right / left < 10 ** 1.5:  # inside ~one decade: label 1-2-5 ticks, not only decades
        ax.xaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"τ = {tau:g}")
    ax.grid(True, alpha=0.3)
