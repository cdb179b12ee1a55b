"""F2OBO paper §4.3 (F2OBO, AF2OBO against OAGD, SOBOW, OBBO): regret exponents in the horizon T.

§4.3 is an analytic example, not an experiment: it bounds AF2OBO's regret by O(√T) on the oscillating toy
and says the *guarantees* of static inner-iteration methods (OBBO, F2OBO) become linear there. A measured
regret can contradict an upper bound only by exceeding it, so AF2OBO's statement gets a verdict and the
static methods' linear bound is a `reference` row beside their measured exponents. AF2OBO's statement is
comparative ("while static methods suffer linear regret"), so the same sublinearity test runs on the static
methods: when they are as flat, the agreement is not discriminating. Exponents are fitted per seed, globally
and between the two largest T, and judged with their 95 % intervals. On the toy they are as flat: a static method
whose x reaches the boundary stops adding regret, and no setting of the toy makes a static method at the paper's
kind of inner loop (K ≥ 10 or 'auto') regret linearly (measured at μ_g = 1, 0.1, 0.03): the statement is left
not discriminating by the rule, and the `metric` row's deviation says why (`NOT_DISCRIMINATING`).

The paper runs no experiment and tunes nothing, and OBBO, OAGD, SOBOW have no public code: each rival's outer step γ
is tuned over this study's grid (`GAMMA_GRID`, sweep.claims.tuning) on its own objective, the cumulative regret at the
largest horizon; the comparison reads each rival at its pick, and a rival whose best γ is at the grid's edge (or that
ran at one γ) makes it `not measured (comparator <name>: not tuned …)`, whichever way it would have gone.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from sweep.report import analysis as an, figures
from sweep.claims.base import (Criterion, Measured, Setting, Verdict, chosen, claim, exponent, final, growth, num,
                               quoted, setting)
from sweep.claims.tuning import Grid, Tuned, tune
from sweep.results.runs import RunData, config_label, group, problem_label
from sweep.study.record import StudyRecord

SUBLINEAR = 1.0  # a regret exponent below this is sublinear
SQRT_OR_LINEAR = 0.75  # halfway between the paper's √T (0.5) and linear (1): a threshold linear regret never passes
LINEAR_REGRET = 0.9  # "becomes linear": exponent at least this
STATIC = ("f2obo", "obbo")  # static inner-iteration methods the paper names
RIVALS = ("f2obo", "obbo", "oagd", "sobow")  # every static inner-iteration method of the study
SUBLINEAR_C = Criterion(
    "af2obo_sublinear", "§4.3: 'with τ = 1/2, AF2OBO achieves a sublinear regret of O(√T)' on the oscillating example, "
    "while static inner-iteration methods 'suffer linear regret'", SQRT_OR_LINEAR, "max",
    looser="the paper's rate is exponent 0.5; up to 0.75, halfway to the linear regret it is contrasted with, counts "
           "(an exponent of 1 never passes)", comparative=True, depends=("problem and data", "constraints", "metric",
                                                                        "inner-loop policy", "step sizes"))
DRIFT_C = Criterion("af2obo_drift", "Theorem 4.2 (§4): regret O(√T + V_T), independent of H_2,T: at a fixed drift rate "
                    "V_T grows like T, so the bound grows at most linearly: the regret's exponent in T", 1.1, "max",
                    looser="1.1 rather than 1: a margin for a fit over the horizons",
                    depends=("problem and data", "metric", "inner-loop policy", "step sizes"))
INNER_C = Criterion("af2obo_inner", "§4.3: I_T = O(T^(1+2τ) + T^(2τ) H_2,T) = O(T²) at τ = 1/2", 2.1, "max",
                    looser="2.1 rather than 2: a 0.1 margin for the fit",
                    depends=("problem and data", "inner-loop policy", "step sizes"))
CRITERIA = (SUBLINEAR_C, DRIFT_C, INNER_C)
#: Why the comparative §4.3 statement cannot be told apart here (its verdict says so through the rule: the rivals
#: pass the same test). Measured: OBBO's regret at T = 100, 400, 1600 is 22.76 each at μ_g = 0.1 and 66.4, 208.9,
#: 208.9 at μ_g = 0.03 (K = 10, γ = 0.1), F2OBO's and AF2OBO's below 6; only K = 1 (f2obo_K1) grows.
NOT_DISCRIMINATING = ("Not discriminating here: §4.3's linear regret of static methods is their guarantee (a bound with "
                      "H_2,T = 4T − 4), not a behaviour the toy produces; a static method whose x reaches the boundary "
                      "x = ±1 (the minimisers of c e^(−x²)) stops adding regret, at this μ_g and at μ_g = 0.1 or 0.03 "
                      "alike, so the static methods pass AF2OBO's test too")
#: Each rival's outer step γ around its default 0.1, half a decade apart; a study runs γ ≠ 0.1 as '<name>_gamma<γ>'.
GAMMAS = (0.01, 0.03, 0.1, 0.3, 1.0)
GAMMA_SOURCE = ("this study's grid: §4.3 is an analytic example (no experiment, no tuning) and OBBO, OAGD, SOBOW have "
                "no public code; γ half a decade apart around the default 0.1, picked by the lowest median cumulative "
                "regret at the largest T")


def gamma_grid(name: str) -> Grid:
    """A rival's γ grid (labels: the default `name`, else `<name>_gamma<γ>`), tuned on its cumulative regret."""
    return Grid(name, "γ", {(name if g == 0.1 else f"{name}_gamma{g:g}"): g for g in GAMMAS}, GAMMA_SOURCE,
                "cumulative_regret", edge=True, accumulates=True)


def tuned_rivals(runs: list[RunData], problem: str = "oscillating_toy") -> dict[str, Tuned]:
    """Each rival of the study tuned over its γ grid on `problem`'s runs at the largest horizon."""
    mine = [r for r in runs if r.point["problem"] == problem]
    if not mine:
        return {}
    top = max(float(r.point["coords"]["axis"]) for r in mine)
    out = {}
    for name in RIVALS:
        grid = gamma_grid(name)
        by_label: dict[str, list[RunData]] = {}
        for r in mine:
            if r.point["algorithm"] == name and r.point["label"] in grid.values and float(r.point["coords"]["axis"]) == top:
                by_label.setdefault(r.point["label"], []).append(r)
        if by_label:
            out[name] = tune(grid, by_label, f"{problem}, T = {top:g}")
    return out
INNER_KEYS = ("diag/inner_iterations_total", "diag/z_iterations_total", "diag/y_iterations_total")


def online_setup(meta: StudyRecord) -> list[Setting]:
    """§4.3's analytic example next to the study."""
    names = sorted({p["problem"] for p in meta.points})
    osc = next((p["problem_params"] for p in meta.points if p["problem"] == "oscillating_toy"), None)
    horizons = ", ".join(f"{T:g}" for T in meta.axis["values"])
    af = next((p["algorithm_params"] for p in meta.points if p["algorithm"] == "af2obo"), {})
    problem = setting("problem and data", "§4.3: f_t = c e^(−y²), g_t = (μ_g/2)(y − (−1)^t x)², X = [−1, 1] (c, μ_g "
                                          "'set appropriately'); an analytic example, no experiment",
                      ", ".join(names) + (f"; oscillating_toy with c = {osc['c']:g}, μ_g = {osc['mu_g']:g}" if osc else ""),
                      None if osc else "no oscillating toy")
    if osc:  # the paper's c and μ_g are 'set appropriately': the values are this study's
        problem.chosen = f"c = {osc['c']:g}, μ_g = {osc['mu_g']:g} (§4.3: 'when constant c is set appropriately')"
    space = "within constraints X = {x | x ∈ [−1, 1]} and y ∈ R"
    return [
        problem,
        quoted(setting("dimensions", "§4.3", "x, y ∈ R (oscillating toy)"), space, "y ∈ R"),
        quoted(setting("constraints", "§4.3", "X = [−1, 1] (oscillating toy)"), space, "x ∈ [−1, 1]"),
        chosen("noise", "deterministic", note="§4.3: an analytic example"),
        setting("metric", "§4.3: upper bounds on the bilevel local regret Σ‖G_X(x_t, ∇F_t(x_t), γ)‖²",
                "the measured cumulative regret at each horizon, fitted as c·T^p",
                "measured regret against a bound: it can refute AF2OBO's bound only by exceeding it, and cannot "
                "show the static methods' bound is reached. " + NOT_DISCRIMINATING),
        chosen("what is timed", "nothing", note="§4.3: an analytic example, no experiment"),
        chosen("iteration counts", f"horizons T = {horizons}"),
        chosen("batch sizes", "exact gradients", note="§4.3: an analytic example"),
        chosen("inner-loop policy", "AF2OBO: tolerances δ_y = T^(−1/2), δ_z = T^(−(1+τ)/2) (defaults); F2OBO: K = 'auto' "
                                      "or 1; OBBO, OAGD, SOBOW: K = 10", "AF2OBO adaptive; static K for the others"),
        _tau_row(af),
        chosen("seeds", f"{len(meta.seeds)} seeds", note="deterministic example"),
    ]


def _tau_row(af: dict[str, Any]) -> Setting:
    """τ = 1/2 is the paper's (quoted); the other constants are the algorithms' defaults, this study's choice."""
    tau = af.get("tau", 0.5)
    row = quoted(setting("step sizes", "§4.3", f"τ = 1/2 ({tau:g}); the algorithms' defaults otherwise",
                         None if tau == 0.5 else "τ is not 1/2"),
                 "If we choose τ = 1/2, We can guarantee a sublinear regret of O(√T + V_T)", "τ = 1/2")
    row.chosen = None if row.deviation else ("the constants other than τ: the algorithms' defaults, each rival's γ tuned "
                                             "over " + ", ".join(map(num, GAMMAS)) + " (§4.3 gives none)")
    return row


@claim("f2obo_regret", kind="drift", title="F2OBO paper §4.3 (regret under oscillating inner solutions)",
       study="online_drift",
       setup=online_setup, criteria=CRITERIA,
       statement="with τ = 1/2 AF2OBO keeps a sublinear O(√T) regret when H_2,T = O(T) (the oscillating toy), "
                 "while static inner-iteration methods such as OBBO and F2OBO suffer linear regret.")
def f2obo_regret(meta: StudyRecord, runs: list[RunData], directory: Path) -> Measured:
    """Final cumulative local regret against the horizon T: fitted exponents and inner iteration counts."""
    horizon = lambda r: float(r.point["coords"]["axis"])  # noqa: E731
    Ts = sorted({horizon(r) for r in runs})
    tuned = tuned_rivals(runs)
    rows = []
    for (prob, lab), rs in group(runs, lambda r: (problem_label(r.point), config_label(r.point))).items():
        reg = [an.median([final(r, "cumulative_regret") for r in rs if horizon(r) == T]) for T in Ts]
        inner = [an.median([final(r, INNER_KEYS[0]) for r in rs if horizon(r) == T]) for T in Ts]
        seeds = sorted({r.seed for r in rs})
        per_seed = [[an.median([final(r, "cumulative_regret") for r in rs if horizon(r) == T and r.seed == s])
                     for T in Ts] for s in seeds]
        inner_seed = [[an.median([final(r, INNER_KEYS[0]) for r in rs if horizon(r) == T and r.seed == s])
                       for T in Ts] for s in seeds]
        row = {"problem": prob, "algorithm": lab, "name": rs[0].point["algorithm"], "regret_exponent": exponent(Ts, reg)}
        fit, top = growth(Ts, per_seed)
        row.update({"_drift": rs[0].point["problem_params"].get("drift"), "_fit": fit, "_top": top, "_inner": growth(Ts, inner_seed),
                    "regret_exponent_low": fit.low, "regret_exponent_high": fit.high, "regret_slope_top2": top.value})
        row.update({f"regret@T={T:g}": v for T, v in zip(Ts, reg)})
        row.update({"inner_per_step@Tmax": inner[-1] / Ts[-1] if Ts else math.nan,
                    "inner_total_exponent": exponent(Ts, inner),
                    "diverged": sum(r.status == "diverged" for r in rs)})
        rows.append(row)
    osc = [r for r in rows if r["problem"].startswith("oscillating_toy")]
    verdicts = []
    af = [r for r in osc if r["name"] == "af2obo"]
    if af:
        # The paper's methods at their tuned γ (a variant such as f2obo_K1 is not what the paper contrasts).
        picks = {name: t.label or name for name, t in tuned.items()}
        rivals = [r for r in osc if r["name"] in RIVALS and r["algorithm"] == picks.get(r["name"], r["name"])]
        verdicts.append(SUBLINEAR_C.verdict(
            "AF2OBO's regret on oscillating_toy (H_2,T = 4T − 4) is sublinear (fitted exponent and the slope between "
            "the two largest T)", [e for r in af for e in (r["_fit"], r["_top"])],
            ", ".join(f"{r['algorithm']} exponent {r['_fit'].text()}, top slope {r['_top'].text()}" for r in af)
            + "; rivals at γ " + ", ".join(f"{r['name']} {num(gamma_grid(r['name']).values.get(r['algorithm'], 0.1))}"
                                          for r in rivals),
            [e for r in rivals for e in (r["_fit"], r["_top"])] if rivals else None,
            broken={name: t.why for name, t in tuned.items() if t.why}))
    variants = {lab for name in RIVALS for lab in gamma_grid(name).values if lab != name}
    for r in (r for r in osc if r["name"] in STATIC and r["algorithm"] not in variants):
        e = r["regret_exponent"]
        shape = "linear" if e >= LINEAR_REGRET else ("sublinear" if e < SUBLINEAR else "super-linear")
        verdicts.append(Verdict(f"{r['algorithm']} (static inner iterations) on oscillating_toy: the paper's regret "
                                "bound for it is linear (a bound, not a prediction of the measured regret)",
                                "linear regret bound (exponent 1)",
                                f"measured exponent {num(e)} ({shape}); regrets "
                                + ", ".join(num(r[f'regret@T={T:g}']) for T in Ts), "reference"))
    drift = [r for r in rows if r["name"] == "af2obo" and not r["problem"].startswith("oscillating_toy")]
    if drift:
        verdicts.append(DRIFT_C.verdict("AF2OBO's regret grows no faster than its bound O(√T + V_T) (at most linearly "
                                        "in T at a fixed drift rate) on drifting_quadratic at every drift rate",
                                        [e for r in drift for e in (r["_fit"], r["_top"])],
                                        ", ".join(f"{r['problem']} {r['_fit'].text()} (top slope {r['_top'].text()})"
                                                  for r in drift)))
    if af:
        verdicts.append(INNER_C.verdict("AF2OBO's total inner iterations grow at most like T² (+ T H_2,T = O(T²) here)",
                                        [e for r in af for e in r["_inner"]],
                                        ", ".join(f"exponent {r['_inner'][0].text()} (top slope {r['_inner'][1].text()}), "
                                                  f"{num(r['inner_per_step@Tmax'])} per step at T = {Ts[-1]:g}" for r in af)))
    static_f2obo = [r for r in rows if r["name"] == "f2obo" and r["_drift"] == 0]
    for r in static_f2obo:
        verdicts.append(Verdict(f"{r['algorithm']} on a static problem ({r['problem']}): regret exponent (no paper "
                                "number; the paper's Theorem 3.4 bounds it when its conditions hold)",
                                "Theorem 3.4: a sublinear regret bound under its conditions on λ_1, α, β, γ and K",
                                f"exponent {r['_fit'].text()}, top slope {r['_top'].text()}", "reference"))
    for r in rows:
        for k in ("_drift", "_fit", "_top", "_inner"):
            r.pop(k)
    plots = [_regret_plot(rows, Ts, directory / "claim.png")] if rows else []
    setup = (f"one run per horizon T ∈ {{{', '.join(f'{T:g}' for T in Ts)}}} to its end; the final bilevel local regret "
             f"Σ_t ‖G_X(x_t, ∇F_t(x_t), γ)‖² (median over {len(meta.seeds)} seeds) is fitted as c·T^p. Sublinear: "
             f"p < {SUBLINEAR:g} (AF2OBO's verdict: p ≤ {SQRT_OR_LINEAR:g}, which linear regret never passes); linear: p ≥ {LINEAR_REGRET:g}. Default configurations; f2obo_K1 uses K = 1.")
    tables = {"measured": rows, "tuning": [row for t in tuned.values() for row in t.rows]}
    return Measured(setup, tables, verdicts, plots)


def _regret_plot(rows: list[dict[str, Any]], Ts: list[float], path: Path) -> Path:
    probs = list(dict.fromkeys(r["problem"] for r in rows))
    color = figures.colors(r["algorithm"] for r in rows)
    fig, axes = figures.panels(len(probs))
    for ax, prob in zip(axes, probs):
        mine = [r for r in rows if r["problem"] == prob]
        for r in mine:
            ax.plot(Ts, [r[f"regret@T={T:g}"] for T in Ts], "o-", color=color[r["algorithm"]],
                    label=f"{r['algorithm']} p={num(r['regret_exponent'])}")
        start = an.median([r[f"regret@T={Ts[0]:g}"] for r in mine])
        ax.plot(Ts, [start * T / Ts[0] for T in Ts], "k:", lw=0.8, label="∝ T")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(prob, fontsize=8)
        ax.set_xlabel("horizon T")
        ax.set_ylabel("final cumulative regret")
        figures.panel_legend(ax)
    return figures.save_figure(fig, path, dpi=80)
