"""F2CSA paper §6: Fig. 2 (cost against d: crossover, speed-up, growth) and Fig. 1 (convergence at d = 50).

The paper's setting (§6.1): the quadratic bilevel problem (8)–(9) with the box y ∈ [−1, 1]^d, Gaussian
noise N(0, 0.01²) on the quadratic terms, F2CSA (η = 1e-5) against SSIGD (β = 1e-4, diminishing) and
DS-BLO (adaptive), "the same lower-level solver" for all. Fig. 2 reports seconds (d = 4000: F2CSA 7.7 s,
DS-BLO 22.6 s, SSIGD 22.0 s; crossover near d = 1000); the run length behind those seconds is not
stated, so both readings are measured: seconds per iteration, and seconds (and oracle calls) until
‖∇F‖² falls to TARGET_FRACTION of its start. F2CSA's inner loops have Remark 4.1's length
⌈c κ_g ln(1/δ)⌉ (`remark41_length`); their accuracy is measured at report time (`oracle_accuracy`); both
and the setup table live in sweep.claims.f2csa_setup. Fig. 1's runs all converged in the paper, so a budget
that ends one of the paper's configurations at d = 50 before ‖∇F‖² reaches TARGET_FRACTION of its start is an
iteration-counts deviation (`fig1_budget`), named beside the Fig. 1 verdict whichever way it goes — except F2CSA at
the paper's η = 1e-5, whose x orbits the minimiser whatever the budget (the step size, not the budget); Fig. 1 lives in
sweep.claims.f2csa_fig1 and is judged per problem (the `fig1` scale runs the text's box and the file name's 10 linear
rows). Remark 4.1's constant c is open: each F2CSA entry is paired with the baselines of its own c (labels
'<method>_c<c>', the `inner_c` scale) and the crossover is reported for each c (`crossover_by_c`).

Re-examined: F2CSA's Fig. 1 stall at the paper's η = 1e-5 is the step size — Alg. 2's Δ_{t+1} = clip_D(Δ_t − η g_t)
integrates the gradient without damping, so x orbits the minimiser (noise-free runs do the same; η = 1e-3 at the
same α converges): tests/sweep/claims/test_f2csa.py holds the numbers.
"""
from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sweep.report import analysis as an, figures
from sweep.claims.base import (Criterion, Estimate, Measured, Verdict, claim, clock, estimate, exponent, growth, initial,
                               local_slope, num, ratio_bootstrap)
from sweep.claims.f2csa_crossover import (CROSS_NAME, bounds_text, crossover, crossover_by_c,  # noqa: F401
                                          seeded_crossover, sensitivity_rows)
from sweep.claims.f2csa_fig1 import FIG1_C, fig1_budget, judge_fig1
from sweep.claims.f2csa_setup import (ACCURACY_CALLS, FIG1_D, PAPER_D, PAPER_LABELS, REMARK41_C, TARGET_FRACTION,
                                      f2csa_setup, oracle_accuracy)
from sweep.results.runs import RunData, config_label, group, problem_label
from sweep.study.record import StudyRecord

F2CSA_PAPER = {"f2csa": 7.7, "dsblo": 22.6, "ssigd": 22.0}  # seconds at d = 4000 (Fig. 2)
F2CSA_BASELINES = ("ssigd", "dsblo")
LINEAR = (0.7, 1.3)  # a "near-linear" fitted exponent; above the upper end is "super-linear"
CROSSOVER_NEAR = (500.0, 2000.0)  # "near d = 1000"
SPEEDUP = 2.0  # "about 3× faster" counts from 2×
TARGET_SCALE = "target"  # the study's scale that times the target with an iteration budget

C_SUFFIX = re.compile(r"_c(\d+(?:\.\d+)?)$")  # an entry run at another inner-loop constant c: 'f2csa_c0.5'
TIMING = ("problem and data", "dimensions", "constraints", "noise", "what is timed", "inner-loop policy")

CROSS_C = Criterion(CROSS_NAME, "§6.4: 'a crossover point around d = 1000: for d < 1000, Hessian-based methods "
                    "(DSBLO and SSIGD) are faster, while for d > 1000, F2CSA becomes increasingly advantageous'",
                    CROSSOVER_NEAR[0], "range", CROSSOVER_NEAR[1], looser="'around 1000' read as within a factor 2",
                    depends=TIMING)
SPEEDUP_C = Criterion("f2csa_speedup", "§6.4: 'At d = 4000, F2CSA requires 7.7 seconds compared to 22.6 seconds for DSBLO "
                      "and 22.0 seconds for SSIGD, representing approximately 3× speedup'", SPEEDUP, "min",
                      looser=f"the paper's ratios are {F2CSA_PAPER['ssigd'] / F2CSA_PAPER['f2csa']:.1f}× and "
                             f"{F2CSA_PAPER['dsblo'] / F2CSA_PAPER['f2csa']:.1f}×; {SPEEDUP:g}× counts", depends=TIMING)
LINEAR_C = Criterion("f2csa_linear", "§6.4: 'F2CSA maintains near-linear growth, while Hessian-based methods exhibit "
                     "super-linear growth': F2CSA's exponent, fitted and between the two largest d", LINEAR[0], "range",
                     LINEAR[1], looser="'near-linear' read as an exponent in [0.7, 1.3]", depends=TIMING, comparative=True)
SUPER_GAP = LINEAR[1] - 1.0  # "super-linear" against F2CSA's "near-linear": an exponent above F2CSA's by this much
SUPER_C = Criterion("f2csa_superlinear", "§6.4: 'F2CSA maintains near-linear growth, while Hessian-based methods exhibit "
                    "super-linear growth': each Hessian-based method's exponent minus F2CSA's, per seed, fitted and "
                    "between the two largest d", SUPER_GAP, "min", depends=TIMING,
                    looser=f"the paper gives no exponents; ahead of F2CSA's by {SUPER_GAP:g} (the margin 'near-linear' "
                           "allows above 1) counts, so growth as fast as F2CSA's never passes")
CRITERIA = (CROSS_C, SPEEDUP_C, LINEAR_C, SUPER_C, FIG1_C)


# ---------------------------------------------------------------- per-run quantities
def seconds_per_iteration(r: RunData) -> float:
    """Compute seconds per outer iteration of a finished run (NaN otherwise), after its first iteration when it
    was recorded: the first step also warms up (F2CSA's 20 power iterations, DS-BLO's two gradients)."""
    f, key = r.final or {}, clock(r)
    it = f.get("iteration") or 0
    if r.status != "finished" or not it:
        return math.nan
    first = next((rec for rec in r.records if rec.get("iteration") == 1 and key in rec), None)
    if first is not None and it > 1:
        return (float(f[key]) - float(first[key])) / (it - 1)
    return float(f[key]) / it


def time_to_fraction(r: RunData, metric: str, fraction: float, x: str = "time") -> float:
    """`x` at the first record whose metric is at most `fraction` × its initial value (NaN if never)."""
    start = initial(r, metric)
    if not math.isfinite(start) or r.status == "failed":
        return math.nan
    return an.first_reach(r.records, metric, fraction * start, x)


def to_target(rs: Sequence[RunData], x: str) -> tuple[float, bool]:
    """(median `x` to the target, True) when every run reached it; else (median `x` at the runs' ends, False),
    a lower bound: the runs stopped at their budget first."""
    key = (lambda r: clock(r)) if x == "time" else (lambda r: x)  # noqa: E731
    reached = [time_to_fraction(r, "grad_F_sq", TARGET_FRACTION, key(r)) for r in rs]
    if reached and all(math.isfinite(v) for v in reached):
        return an.median(reached), True
    return an.median([float((r.final or {}).get(key(r), math.nan)) for r in rs]), False


def power_law_at(ds: Sequence[float], ts: Sequence[float], d: float) -> float:
    """The fitted power law t = c d^p evaluated at d."""
    p, c, _ = an.fit_loglog(ds, ts)
    return float(math.exp(c) * d ** p) if math.isfinite(p) else math.nan


# ---------------------------------------------------------------- the claim
@claim("f2csa_fig2", kind="dimension_scaling", title="F2CSA paper §6, Fig. 2 (cost vs d) and Fig. 1 (d = 50)",
       setup=f2csa_setup, criteria=CRITERIA, timed=True, study="f2csa_scaling",
       statement="crossover near d = 1000 (Hessian-based methods faster below); at d = 4000 F2CSA 7.7 s vs "
                 "DS-BLO 22.6 s and SSIGD 22.0 s (≈3× speed-up); F2CSA grows near-linearly, the Hessian-based "
                 "methods super-linearly; at d = 50 all three converge to similar final loss values (Fig. 1).")
def f2csa_fig2(meta: StudyRecord, runs: list[RunData], directory: Path) -> Measured:
    """Seconds per iteration and to a target vs d, exponents, crossover, speed-ups; Fig. 1; oracle accuracy."""
    dim = lambda r: float(r.point["coords"]["axis"])  # noqa: E731
    variants = group(runs, lambda r: problem_label(r.point))  # one, or Fig. 1's two readings (box, 10 linear rows)
    scaling = next((rs for name, rs in variants.items() if "linear" not in name), runs)
    labels = group(scaling, lambda r: config_label(r.point))
    ds_all = sorted({dim(r) for r in scaling})
    ds = [d for d in ds_all if d >= PAPER_D[0]] or ds_all  # Fig. 2's range
    algo = {lab: rs[0].point["algorithm"] for lab, rs in labels.items()}
    at = {lab: {d: [r for r in rs if dim(r) == d] for d in ds_all} for lab, rs in labels.items()}
    per_it = {lab: [an.median([seconds_per_iteration(r) for r in at[lab][d]]) for d in ds] for lab in labels}
    target = {lab: {x: [to_target(at[lab][d], x) for d in ds] for x in ("time", "calls/total", "iteration")}
              for lab in labels}
    seeds = sorted({r.seed for r in runs})
    per_seed = {lab: [[an.median([seconds_per_iteration(r) for r in at[lab][d] if r.seed == k]) for d in ds]
                      for k in seeds] for lab in labels}
    rows = _scaling_rows(ds, per_it, target)
    pairs = _paper_labels(algo)
    crossings = {(s, b): seeded_crossover(ds, per_seed[s], per_seed[b]) for s, bases in pairs.items() for b in bases}
    verdicts = _scaling_verdicts(ds, algo, per_seed, crossings)
    c_of = {s: inner_c(s) or (f"{REMARK41_C:g}" if inner_c(s) == "" else "?") for s in pairs}
    by_c = crossover_by_c({p["label"]: p["algorithm_params"] for p in meta.points}, pairs, c_of,
                          {k: e for k, (e, _) in crossings.items()}, verdicts)
    seeded = {lab: [to_target([r for r in at[lab][ds[-1]] if r.seed == k], "time") for k in seeds] for lab in labels}
    verdicts += _target_verdicts(ds, algo, per_it, target, seeded)
    named = len(variants) > 1
    fig1 = [judge_fig1(group(rs, lambda r: config_label(r.point)), dim, name if named else "") for name, rs in variants.items()]
    verdicts += [f["verdict"] for f in fig1]
    fig1_rows = [row for f in fig1 for row in f["rows"]]
    budget_row = fig1_budget(meta, fig1_rows)
    acc = [oracle_accuracy(meta, int(d)) for d in _accuracy_dims(ds_all)]
    plots = [_plot(ds, per_it, target, group(runs, lambda r: config_label(r.point)), dim, directory / "claim.png")] if ds else []
    budget = meta.points[0]["budget"]
    notes = (f"medians over {len(meta.seeds)} seeds. Seconds per iteration over Fig. 2's d ≥ {PAPER_D[0]}; "
             f"to target: compute seconds (CPU seconds of the stepping thread where recorded), oracle calls (every kind) and iterations until ‖∇F‖² ≤ {TARGET_FRACTION:g} × its "
             f"start, read at the evaluation points; '>' marks a lower bound: a run stopped at its budget {budget} first. "
             f"F2CSA's x moves at most D = clip per step, so its iterations to the target follow D, which the paper "
             f"does not give. Seconds per iteration leave out the first step (a warm-up). Near-linear: a fitted exponent in [{LINEAR[0]}, {LINEAR[1]}]; 'near d = 1000': a "
             f"crossover in [{CROSSOVER_NEAR[0]:g}, {CROSSOVER_NEAR[1]:g}]; '≈3×': at least {SPEEDUP:g}×. Oracle accuracy: "
             f"{ACCURACY_CALLS} warm-started calls at one random x (first two dropped), computed at report time.")
    if len(by_c) > 1:
        notes += " Crossover against the inner-loop constant c (each c's F2CSA against the baselines of the same c): " + \
            "; ".join(f"c = {r['c']}: d ≈ " + ", ".join(v for k, v in r.items() if k.startswith("bounds_vs_"))
                      + f" → {r['verdict']}" for r in by_c) + "."
    inner = next(s for s in f2csa_setup(meta) if s.field == "inner-loop policy")
    inner.study += "; measured error at that length: " + "; ".join(
        f"d = {a['d']:g}: " + ", ".join(f"{lab} bias {100 * a[f'{lab}_bias']:.1f}% (rms {100 * a[f'{lab}_rms']:.1f}%)"
                                         for lab in PAPER_LABELS if f"{lab}_bias" in a) for a in acc)
    tables = {"measured": rows, f"fig1_d{FIG1_D}": fig1_rows, "oracle_accuracy": acc}
    if len(by_c) > 1:
        tables["crossover_by_c"] = by_c
    tables["sensitivity"] = sensitivity_rows(by_c)
    return Measured(notes, tables, verdicts, plots, [inner, *budget_row])


def _accuracy_dims(ds: Sequence[float]) -> list[float]:
    """The smallest Fig. 2 dimension and the one nearest 500 (cheap enough to measure at report time)."""
    fig2 = [d for d in ds if d >= PAPER_D[0]] or list(ds)
    return sorted({fig2[0], min(fig2, key=lambda d: abs(math.log(d / 500.0)))})


def _scaling_rows(ds: list[float], per_it: dict[str, list[float]],
                  target: dict[str, dict[str, list[tuple[float, bool]]]]) -> list[dict[str, Any]]:
    rows = []
    for lab, ts in per_it.items():
        top = [(d, t) for d, t in zip(ds, ts) if math.isfinite(t)][-2:]
        row = {"algorithm": lab, "quantity": "seconds_per_iteration", "exponent": exponent(ds, ts),
               "exponent_top2": exponent(*zip(*top)) if len(top) == 2 else math.nan}
        row.update({f"d={d:g}": t for d, t in zip(ds, ts)})
        rows.append(row)
    for x, name in (("time", "seconds"), ("calls/total", "oracle_calls"), ("iteration", "iterations")):
        for lab in per_it:
            vals = target[lab][x]
            reached = [v for v, ok in vals if ok]
            row = {"algorithm": lab, "quantity": f"{name}_to_grad_F_sq<={TARGET_FRACTION:g}x_start",
                   "exponent": exponent(ds, [v if ok else math.nan for v, ok in vals]) if len(reached) >= 2 else math.nan,
                   "exponent_top2": math.nan}
            row.update({f"d={d:g}": (v if ok else f">{num(v)}") for d, (v, ok) in zip(ds, vals)})
            rows.append(row)
    return rows


def inner_c(label: str) -> str | None:
    """The inner-loop constant an entry's label names ('f2csa_c0.5' → '0.5'); '' for the paper's labels (c = 1);
    None for any other entry (e.g. ssigd_fast)."""
    m = C_SUFFIX.search(label)
    return m.group(1) if m else ("" if label in PAPER_LABELS else None)


def _paper_labels(algo: dict[str, str]) -> dict[str, list[str]]:
    """Each F2CSA entry with its baselines: those of the same inner-loop constant (label suffix '_c<c>'; the paper's
    labels for c = 1), else the baselines with the paper's settings (label = algorithm name), else every baseline."""
    out = {}
    for s in (lab for lab, a in algo.items() if a == "f2csa"):
        c = inner_c(s)
        same_c = [lab for lab, a in algo.items() if a in F2CSA_BASELINES and c is not None and inner_c(lab) == c
                  and lab.startswith(a)]
        out[s] = (same_c or [lab for lab, a in algo.items() if a in F2CSA_BASELINES and lab == a]
                  or [lab for lab, a in algo.items() if a in F2CSA_BASELINES])
    return out


def _all_bases(pairs: dict[str, list[str]]) -> list[str]:
    return list(dict.fromkeys(b for bs in pairs.values() for b in bs))


def _scaling_verdicts(ds: list[float], algo: dict[str, str], per_seed: dict[str, list[list[float]]],
                      crossings: dict[tuple[str, str], tuple[Estimate, str]]) -> list[Verdict]:
    """Crossover (its interval a bootstrap over seeds), speed-up and growth per F2CSA entry; the Hessian methods'
    growth against F2CSA's."""
    pairs = _paper_labels(algo)
    grow = {lab: growth(ds, per_seed[lab]) for lab in [*pairs, *_all_bases(pairs)]}
    shown = lambda labs: ", ".join(f"{lab} {grow[lab][0].text()} ({grow[lab][1].text()})" for lab in labs)  # noqa: E731
    out = []
    for s, bases in pairs.items():
        cross = {b: crossings[(s, b)] for b in bases}
        out.append(CROSS_C.verdict(f"{s}: per iteration, a crossover with the Hessian-based methods near d = 1000",
                                   [c for c, _ in cross.values()],
                                   "; ".join(f"vs {b}: d ≈ {bounds_text(c)} ({how})" for b, (c, how) in cross.items())
                                   + " (95% bootstrap interval over seeds)"))
        out.append(_speedup_verdict(s, bases, ds, {b: per_seed[b] for b in bases}, per_seed[s], "per iteration"))
        # The paper fits its whole axis; the slope between the two largest d shows the growth where a fixed per-step
        # overhead no longer flattens it. Both must be near-linear; the same test on the baselines discriminates.
        out.append(LINEAR_C.verdict(f"{s}: near-linear growth of the cost per iteration in d",
                                    list(grow[s]), "exponents fitted over all d (between the two largest d): "
                                    + shown([s, *bases]), [e for b in bases for e in grow[b]] or None))
    gaps = [e for s, bases in pairs.items() for b in bases for e in _exponent_gaps(ds, per_seed[b], per_seed[s])]
    if gaps:  # the growth of each Hessian method against F2CSA's, seed by seed: a test F2CSA's own growth fails
        out.append(SUPER_C.verdict("the Hessian-based methods' cost per iteration grows super-linearly in d, ahead of "
                                   "F2CSA's", gaps, "exponent gaps (baseline − F2CSA) fitted over all d, between the two "
                                   "largest d: " + ", ".join(f"{b} − {s} {g[0].text()}, {g[1].text()}"
                                                             for s, bases in pairs.items() for b in bases
                                                             for g in [_exponent_gaps(ds, per_seed[b], per_seed[s])])
                                   + "; exponents (top2): " + shown(_all_bases(pairs) + list(pairs))))
    return out


def _exponent_gaps(ds: list[float], base: list[list[float]], mine: list[list[float]]) -> tuple[Estimate, Estimate]:
    """Per seed (paired by position): the baseline's exponent minus F2CSA's, fitted and between the two largest d."""
    fit = [exponent(ds, b) - exponent(ds, m) for b, m in zip(base, mine)]
    top = [local_slope(ds, b) - local_slope(ds, m) for b, m in zip(base, mine)]
    return estimate(fit), estimate(top)


def _speedup_verdict(s: str, bases: list[str], ds: list[float], base_seed: dict[str, list[list[float]]],
                     mine: list[list[float]], how: str) -> Verdict:
    """Per seed: each baseline's seconds per iteration at the largest d over F2CSA's (seeds paired by position)."""
    dmax = ds[-1]
    at_max = {b: estimate([v[-1] / m[-1] for v, m in zip(seeds, mine)]) for b, seeds in base_seed.items()}
    measured = f"{how}, at d = {dmax:g}: " + ", ".join(f"{b}/{s} = {v.text()}" for b, v in at_max.items())
    statement = f"{s}: about 3× faster than SSIGD and DS-BLO at d = 4000 {how} (at least {SPEEDUP:g}× counts)"
    if dmax < PAPER_D[1]:  # the smaller d is a setup fact (the dimensions row), named beside the verdict
        med = lambda rows: [float(np.median([r[k] for r in rows])) for k in range(len(ds))]  # noqa: E731
        at4000 = {b: power_law_at(ds, med(v), PAPER_D[1]) / power_law_at(ds, med(mine), PAPER_D[1])
                  for b, v in base_seed.items()}
        measured += (f"; power laws extrapolated to d = {PAPER_D[1]} (not a measurement): "
                     + ", ".join(f"{b}/{s} = {num(v)}" for b, v in at4000.items()))
    return SPEEDUP_C.verdict(statement, list(at_max.values()), measured)


def _projected_seconds(ds: list[float], per_it: list[float], iters: list[tuple[float, bool]]) -> float:
    """Iterations to the target (fitted over the d where every seed reached it) × seconds per iteration, at d = 4000."""
    reached = [(d, v) for d, (v, ok) in zip(ds, iters) if ok]
    if len(reached) < 2:
        return math.nan
    return power_law_at(*zip(*reached), PAPER_D[1]) * power_law_at(ds, per_it, PAPER_D[1])


def _target_verdicts(ds: list[float], algo: dict[str, str], per_it: dict[str, list[float]],
                     target: dict[str, dict[str, list[tuple[float, bool]]]],
                     seeded: dict[str, list[tuple[float, bool]]]) -> list[Verdict]:
    """Fig. 2 read as total seconds to a target accuracy at the largest d: each baseline's seconds over F2CSA's per
    seed (paired by position), censored runs as one-sided bounds; their geometric mean with its 95 % bootstrap
    interval over the seeds (`ratio_bootstrap`), judged by SPEEDUP_C like every other verdict."""
    out = []
    for s, bases in _paper_labels(algo).items():
        t_s, ok_s = target[s]["time"][-1]
        parts, ratios = [], []
        for b in bases:
            t_b, ok_b = target[b]["time"][-1]
            ratio = ratio_bootstrap([(tb, okb, ts, oks) for (tb, okb), (ts, oks) in zip(seeded[b], seeded[s])])
            ratios.append(ratio)
            shown = lambda lab, t, ok: f"{lab} {num(t)} s" if ok else f"{lab} not within its budget (> {num(t)} s)"  # noqa: E731
            parts.append(f"{b}/{s} = {ratio.text() if ratio.low == ratio.high else _bounds(ratio)} "
                         f"({shown(b, t_b, ok_b)}; {shown(s, t_s, ok_s)})")
        projected = {lab: _projected_seconds(ds, per_it[lab], target[lab]["iteration"]) for lab in [s, *bases]}
        if all(math.isnan(r.value) for r in ratios):
            if all(math.isfinite(v) for v in projected.values()):
                parts.append(f"projected at d = {PAPER_D[1]} from the power laws of iterations to the target and "
                             "seconds per iteration (an extrapolation, not a measurement): "
                             + ", ".join(f"{lab} {num(v)} s" for lab, v in projected.items()))
            parts += [_largest_both(ds, s, b, target) for b in bases]
            parts.append(f"`--scale {TARGET_SCALE}` measures it: an iteration budget at d = 1000 and 2000")
        parts += [f"{b} not run" for b in F2CSA_BASELINES if b not in algo.values()]
        crit = dataclasses.replace(SPEEDUP_C, depends=(*TIMING, "step sizes", "dimensions"))
        out.append(crit.verdict(f"{s}: reaches ‖∇F‖² ≤ {TARGET_FRACTION:g} × start at least {SPEEDUP:g}× sooner than "
                                f"SSIGD and DS-BLO at the largest d (Fig. 2 read as total seconds to a target)", ratios,
                                f"at d = {ds[-1]:g}: " + "; ".join(p for p in parts if p)))
    return out


def _bounds(e: Estimate) -> str:
    """A censored ratio as printed: '≤ x', '≥ x' or an interval."""
    if e.low <= 0 and math.isfinite(e.high):
        return f"≤ {num(e.high)}"
    if math.isinf(e.high) and e.low > 0:
        return f"≥ {num(e.low)}"
    return e.text()  # the geometric mean [its bootstrap interval]


def _largest_both(ds: list[float], s: str, b: str, target: dict[str, dict[str, list[tuple[float, bool]]]]) -> str:
    """Seconds and iterations to the target at the largest d where both methods reached it ('' if none)."""
    both = [k for k in range(len(ds)) if target[s]["time"][k][1] and target[b]["time"][k][1]]
    if not both:
        return ""
    k = both[-1]
    return (f"at d = {ds[k]:g}, the largest d where {s} and {b} both reached it: {s} {num(target[s]['time'][k][0])} s "
            f"({num(target[s]['iteration'][k][0])} iterations), {b} {num(target[b]['time'][k][0])} s "
            f"({num(target[b]['iteration'][k][0])} iterations)")


def _plot(ds: list[float], per_it: dict[str, list[float]], target: dict[str, dict[str, list[tuple[float, bool]]]],
          labels: dict[str, list[RunData]], dim: Callable[[RunData], float], path: Path) -> Path:
    plt = figures.pyplot()
    color = figures.colors(per_it)
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(16, 4.4))
    for lab, ts in per_it.items():
        a1.plot(ds, ts, "o", color=color[lab], label=f"{lab}: p = {num(exponent(ds, ts))}")
        p, c, _ = an.fit_loglog(ds, ts)
        if math.isfinite(p):
            a1.plot(ds, [math.exp(c) * d ** p for d in ds], "-", color=color[lab])
        vals = target[lab]["time"]
        a2.plot([d for d, (_, ok) in zip(ds, vals) if ok], [v for v, ok in vals if ok], "o-", color=color[lab], label=lab)
        a2.plot([d for d, (_, ok) in zip(ds, vals) if not ok], [v for v, ok in vals if not ok], "^", color=color[lab],
                mfc="none")
    for ax, title, ylabel in ((a1, "Fig. 2: cost per iteration", "compute seconds per iteration"),
                              (a2, f"seconds to ‖∇F‖² ≤ {TARGET_FRACTION:g}× start (open ▲: not reached, > value)",
                               "compute seconds")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("d")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
        figures.panel_legend(ax)
    for lab, rs in labels.items():
        for k, r in enumerate(r for r in rs if dim(r) == FIG1_D):
            pts = [(rec["iteration"], rec["F"]) for rec in r.records if "F" in rec and rec["iteration"] > 0]
            if pts:
                lin = r.point["problem_params"].get("constraints") == "linear"
                a3.plot(*zip(*pts), "--" if lin else "-", color=color.get(lab, "k"),
                        label=(lab + (" (10 linear rows)" if lin else "")) if k == 0 or lin else None)
    if not a3.lines:  # a scale without Fig. 1's d (e.g. --scale target): say so rather than draw empty axes
        a3.text(0.5, 0.5, f"no runs at d = {FIG1_D} at this scale", ha="center", va="center", transform=a3.transAxes)
    a3.set_xscale("log")
    a3.set_xlabel("iteration")
    a3.set_ylabel("F(x)")
    a3.set_title(f"Fig. 1: convergence at d = {FIG1_D}", fontsize=9)
    figures.panel_legend(a3)
    return figures.save_figure(fig, path, dpi=80)
