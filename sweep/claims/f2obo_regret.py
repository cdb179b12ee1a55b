"""F2OBO paper Theorem 3.4: local regret against the path variation V_T, H_2,T (and AF2OBO's Theorem 4.2 beside it).

A `drift` study sets V_T and H_2,T (eq. 5) through the drift; both are computed exactly from each instance's
sequence at report time (`variation` of the problem). The theorem is an upper bound, so a measurement can
contradict it only where the regret outgrows the bound's terms:
- static (drift 0): the regret must not grow with T faster than the bound's Σ t^(−τ) term (O(1) at τ > 1,
  O(√T) at τ = 1/2), read between the two horizons per instance;
- drift: where the drift moves the regret at all, the regret must grow at most linearly in 1 + V_T + H_2,T,
  read as the log–log slope between the two largest drifts and over all drifts, per instance;
- beside the verdicts, the fitted relation regret = a + b V_T with the slope's 95 % interval over instances.
AF2OBO's adaptivity (Theorem 4.2: O(√T + V_T), free of H_2,T) is set against the static methods on the problem
whose stationary point moves inside X (moving_quadratic): regret ratio at the largest drift and horizon, with the
same test run on every static method (a comparison every method passes supports nothing).
"""
from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import numpy as np

import problems
from algorithms.base import make_config
from algorithms.online import theorem_conditions
from sweep.report import analysis as an, figures
from sweep.claims.base import (Criterion, Estimate, Measured, Setting, Verdict, chosen, claim, estimate, final, num,
                               setting)
from sweep.claims.verdicts import not_moved
from sweep.results.runs import RunData, config_label
from sweep.study.record import StudyRecord

PATH_SLOPE = 1.1  # O(V_T + H_2,T): at most linear in the path term, with a margin for a slope read off two points
STATIC_MARGIN = 0.1  # a margin on the T exponent of a static regret for the fit over two horizons
MOVED = 0.1  # the drift moved the regret when some method's regret at the largest drift differs by 10 % from drift 0
STATIC = ("f2obo", "obbo", "oagd", "sobow")  # static inner-iteration methods
MOVING = "moving_quadratic"
PATH_C = Criterion("f2obo_path", "Theorem 3.4 (§3.2): Reg_F(T) ≤ O(Σ_t t^(−τ) + V_T + H_2,T); 'if we set τ > 1, we "
                   "achieve a regret of O(1 + V_T + H_2,T)': the log–log slope of the regret in 1 + V_T + H_2,T, "
                   "between the two largest drifts and over all drifts", PATH_SLOPE, "max",
                   looser="1.1 rather than 1: an affine a + b·S has a slope just below 1 at large S, and a slope between two "
                          "drifts spreads over instances",
                   depends=("problem and data", "metric", "inner-loop policy", "step sizes"))
STATIC_HALF_C = Criterion("f2obo_static_half", "Theorem B.3 (App. B): Reg_F(T) ≤ O(T^(1−τ) + V_T + H_2,T) for τ ∈ (0, 1): "
                          "O(√T) at τ = 1/2 on a static problem: the exponent of the static regret in T",
                          0.5 + STATIC_MARGIN, "max", looser=f"0.5 + {STATIC_MARGIN:g}: a margin for a fit over two horizons",
                          depends=("problem and data", "metric", "inner-loop policy", "step sizes"))
STATIC_ONE_C = Criterion("f2obo_static_one", "§3.2 after Theorem 3.4: 'in a static environment with V_T = H_2,T = 0, we "
                         "obtain Reg_F(T) = O(1)' (τ > 1): the exponent of the static regret in T", STATIC_MARGIN, "max",
                         looser=f"{STATIC_MARGIN:g} rather than 0: a margin for a fit over two horizons",
                         depends=("problem and data", "metric", "inner-loop policy", "step sizes"))
#: §4.3 and §1 set AF2OBO's Theorem 4.2 bound against the static methods' bounds; measured regrets are shown beside.
ADAPT_QUOTE = ("§4.3: 'The upper bound in Theorem 4.2 have the advantage when the drift of y*_t(x) is more severe' — a "
               "comparison of bounds, not of measured regrets")
AF2_BOUND_C = Criterion("af2obo_bound", "Theorem 4.2 (§4): AF2OBO's Reg_F(T) ≤ O(√T + V_T), without H_2,T — the bound "
                        "§4.3 sets against the static methods': the log–log slope of AF2OBO's regret in √T + V_T over "
                        "the drifts, over all drifts and between the two largest", PATH_SLOPE, "max",
                        looser="1.1 rather than 1, as for Theorem 3.4's path term",
                        depends=("problem and data", "metric", "inner-loop policy", "step sizes"))
CRITERIA = (PATH_C, STATIC_HALF_C, STATIC_ONE_C, AF2_BOUND_C)


# ---------------------------------------------------------------- the path quantities of a run's sequence
@functools.lru_cache(maxsize=512)
def _variation(name: str, seed: int, params: tuple[tuple[str, Any], ...]) -> tuple[float, float]:
    v = problems.make(name, seed=seed, **dict(params)).variation()
    return float(v.get("V_T", math.nan)), float(v.get("H_2T", math.nan))


def variation(r: RunData) -> tuple[float, float]:
    """(V_T, H_2,T) of the run's problem instance, exactly (eq. 5)."""
    pt = r.point
    seed = pt.get("instance_seed")
    params = tuple(sorted((k, v) for k, v in pt["problem_params"].items() if not isinstance(v, (list, dict))))
    return _variation(pt["problem"], r.seed if seed is None else int(seed), params)


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(a, b) of the least-squares line y = a + b x (NaN with fewer than two distinct finite x)."""
    pts = [(x, y) for x, y in zip(xs, ys) if math.isfinite(x) and math.isfinite(y)]
    if len({x for x, _ in pts}) < 2:
        return math.nan, math.nan
    b, a = np.polyfit(*zip(*pts), 1)
    return float(a), float(b)


def slopes(path: list[float], regret: list[float]) -> tuple[float, float]:
    """(log–log slope of the regret in 1 + path over all drifts, the same between the two largest drifts)."""
    x = [1.0 + p for p in path]
    glob = an.fit_loglog(x, regret)[0]
    top = [(a, b) for a, b in zip(x, regret) if math.isfinite(b) and b > 0][-2:]
    return glob, (an.fit_loglog(*zip(*top))[0] if len(top) == 2 else math.nan)


# ---------------------------------------------------------------- the claim
def _cells(runs: list[RunData]) -> dict[tuple[str, str, int], dict[int, dict[float, tuple[float, float, float]]]]:
    """(problem, label, T) -> instance -> drift -> (regret, V_T, H_2,T)."""
    out: dict[tuple[str, str, int], dict[int, dict[float, tuple[float, float, float]]]] = {}
    for r in runs:
        pp = r.point["problem_params"]
        key = (r.point["problem"], config_label(r.point), int(pp["T"]))
        inst = r.point.get("instance_seed")
        V, H = variation(r)
        out.setdefault(key, {}).setdefault(r.seed if inst is None else int(inst), {})[float(pp["drift"])] = \
            (final(r, "cumulative_regret"), V, H)
    return out


def _row(key: tuple[str, str, int], cell: dict[int, dict[float, tuple[float, float, float]]],
         tau: float) -> dict[str, Any]:
    prob, lab, T = key
    drifts = sorted({d for per in cell.values() for d in per})
    med = lambda k, d: an.median([per[d][k] for per in cell.values() if d in per])  # noqa: E731
    fits = [linear_fit([per[d][1] for d in drifts if d in per], [per[d][0] for d in drifts if d in per])
            for per in cell.values()]
    sl = [slopes([per[d][1] + per[d][2] for d in drifts if d in per], [per[d][0] for d in drifts if d in per])
          for per in cell.values()]
    # Theorem 4.2's bound term √T + V_T (as 1 + path for `slopes`): AF2OBO's regret against its own bound
    af = [slopes([math.sqrt(T) - 1 + per[d][1] for d in drifts if d in per], [per[d][0] for d in drifts if d in per])
          for per in cell.values()]
    b = estimate([f[1] for f in fits])
    row = {"problem": prob, "algorithm": lab, "T": T, "tau": tau,
           **{f"regret@drift={d:g}": med(0, d) for d in drifts},
           **{f"V_T@drift={d:g}": med(1, d) for d in drifts}, **{f"H_2T@drift={d:g}": med(2, d) for d in drifts},
           "fit_a": an.median([f[0] for f in fits]), "fit_b": b.value, "fit_b_low": b.low, "fit_b_high": b.high,
           "path_slope": an.median([s[0] for s in sl]), "path_slope_top2": an.median([s[1] for s in sl])}
    row.update({"_slopes": sl, "_b": b, "_af_slopes": af})
    return row


def _tau(runs: list[RunData]) -> dict[str, float]:
    """Each F2OBO / AF2OBO configuration's τ (its own or the default); NaN for the other methods."""
    return {config_label(r.point): (float(make_config(r.point["algorithm"], r.point.get("algorithm_params") or {}).tau)
                                    if r.point["algorithm"] in ("f2obo", "af2obo") else math.nan) for r in runs}


@claim("f2obo_regret_bound", kind="drift", title="F2OBO paper Theorem 3.4 (regret against V_T and H_2,T)",
       study="f2obo_regret_bound",
       setup=lambda meta: regret_setup(meta), criteria=CRITERIA,
       statement="F2OBO's bilevel local regret is O(Σ_t t^(−τ) + V_T + H_2,T) under the theorem's conditions: O(1 + V_T "
                 "+ H_2,T) for τ > 1, O(√T + V_T + H_2,T) at τ = 1/2, bounded on a static problem for τ > 1; AF2OBO's "
                 "O(√T + V_T) (Theorem 4.2) has 'the advantage when the drift of y*_t(x) is more severe'.")
def f2obo_regret_bound(meta: StudyRecord, runs: list[RunData], directory: Path) -> Measured:
    """Regret against V_T + H_2,T per (problem, configuration, T); the static exponent in T; AF2OBO against the rest."""
    taus = _tau(runs)
    cells = _cells(runs)
    rows = [_row(k, c, taus.get(k[1], math.nan)) for k, c in cells.items()]
    names = {config_label(r.point): r.point["algorithm"] for r in runs}
    verdicts = _path_verdicts(rows, names) + _static_verdicts(cells, names, taus) + _adapt_verdicts(cells, names)
    for r in rows:
        r.pop("_slopes"), r.pop("_b"), r.pop("_af_slopes")
    plots = [_plot(rows, directory / "claim.png")] if rows else []
    Ts = sorted({r["T"] for r in rows})
    notes = (f"one run per (problem, drift, T ∈ {{{', '.join(map(str, Ts))}}}, instance); regret = the final bilevel local "
             f"regret Σ_t ‖G_X(x_t, ∇F_t(x_t), γ)‖² (eq. 3, exact ∇F_t); V_T, H_2,T from eq. 5, exact, per instance. "
             f"Fit per instance: regret = a + b·V_T over the drifts (b with its 95 % interval over {len(meta.seeds)} "
             f"instances); path slope: log–log slope of the regret in 1 + V_T + H_2,T (over all drifts; top2: between "
             f"the two largest). The drift moved the regret when some method's regret at the largest drift differs from "
             f"drift 0 by ≥ {MOVED:.0%}. Tables: medians over instances.")
    return Measured(notes, {"measured": rows}, verdicts, plots)


def _path_verdicts(rows: list[dict[str, Any]], names: dict[str, str]) -> list[Verdict]:
    out = []
    for prob in dict.fromkeys(r["problem"] for r in rows):
        mine = [r for r in rows if r["problem"] == prob and names[r["algorithm"]] == "f2obo"]
        mine = [r for r in mine if math.isfinite(r["tau"])]
        allp = [r for r in rows if r["problem"] == prob]
        drifts = sorted(float(k.split("=")[1]) for k in allp[0] if k.startswith("regret@drift="))
        if len(drifts) < 2:
            continue
        lo, hi = f"regret@drift={drifts[0]:g}", f"regret@drift={drifts[-1]:g}"
        out += _af2obo_bound(prob, [r for r in allp if names[r["algorithm"]] == "af2obo"], allp, lo, hi)
        if not mine:
            continue
        statement = f"{prob}: F2OBO's regret grows at most linearly in 1 + V_T + H_2,T (Theorem 3.4)"
        shown = "; ".join(f"{r['algorithm']} T = {r['T']}: slope {num(r['path_slope'])} (top2 {num(r['path_slope_top2'])}), "
                          f"regret {num(r[lo])} → {num(r[hi])}" for r in mine)
        if not drift_moved(allp, lo, hi):
            out.append(not_moved(statement, PATH_C.quote, shown + f"; no method's regret moved by {MOVED:.0%} between "
                                 f"drift {drifts[0]:g} and {drifts[-1]:g}", PATH_C.depends))
            continue
        ests = [estimate([s[k] for s in r["_slopes"]]) for r in mine for k in (0, 1)]
        out.append(PATH_C.verdict(statement, ests, shown))
        for r in mine:
            out.append(Verdict(f"{prob}, {r['algorithm']}, T = {r['T']}: fitted relation regret = a + b·V_T",
                               "Theorem 3.4: the V_T term's constant 12/(γ C_2) (App. B) — no number",
                               f"a = {num(r['fit_a'])}, b = {r['_b'].text()} per unit of V_T (V_T up to "
                               f"{num(r[f'V_T@drift={drifts[-1]:g}'])}, H_2,T up to {num(r[f'H_2T@drift={drifts[-1]:g}'])})",
                               "reference", estimate=r["_b"]))
    return out


def _af2obo_bound(prob: str, af: list[dict[str, Any]], allp: list[dict[str, Any]], lo: str, hi: str) -> list[Verdict]:
    """AF2OBO's regret against its own bound O(√T + V_T) (Theorem 4.2), not against another method's measured
    regret: at most linear in √T + V_T over the drifts, per instance, where the drift moved the regret."""
    if not af:
        return []
    statement = f"{prob}: AF2OBO's regret grows at most linearly in √T + V_T (Theorem 4.2's bound, free of H_2,T)"
    shown = "; ".join(f"{r['algorithm']} T = {r['T']}: slopes in √T + V_T "
                      + ", ".join(estimate([s[k] for s in r["_af_slopes"]]).text() for k in (0, 1))
                      + f", regret {num(r[lo])} → {num(r[hi])}" for r in af)
    if not drift_moved(allp, lo, hi):
        return [not_moved(statement, AF2_BOUND_C.quote, shown + f"; no method's regret moved by {MOVED:.0%}",
                          AF2_BOUND_C.depends)]
    return [AF2_BOUND_C.verdict(statement, [estimate([s[k] for s in r["_af_slopes"]]) for r in af for k in (0, 1)],
                                shown)]


def drift_moved(rows: list[dict[str, Any]], lo: str, hi: str) -> bool:
    """Some configuration's median regret at the largest drift differs from drift 0 by at least MOVED."""
    return any(math.isfinite(r[lo]) and math.isfinite(r[hi]) and abs(r[hi] - r[lo]) >= MOVED * abs(r[lo]) for r in rows)


def _static_exponents(cells: dict, key: tuple[str, str]) -> list[float]:
    """Per instance: the log–log exponent of the drift-0 regret between the two horizons."""
    prob, lab = key
    Ts = sorted(T for (p, lb, T) in cells if p == prob and lb == lab)
    if len(Ts) < 2:
        return []
    a, b = cells[(prob, lab, Ts[0])], cells[(prob, lab, Ts[-1])]
    out = []
    for inst in a:
        if inst in b and 0.0 in a[inst] and 0.0 in b[inst]:
            r0, r1 = a[inst][0.0][0], b[inst][0.0][0]
            out.append(math.log(r1 / r0) / math.log(Ts[-1] / Ts[0]) if r0 > 0 and r1 > 0 else math.nan)
    return out


def _static_verdicts(cells: dict, names: dict[str, str], taus: dict[str, float]) -> list[Verdict]:
    out = []
    pairs = list(dict.fromkeys((p, lab) for (p, lab, _) in cells))
    Ts = sorted({T for (_, _, T) in cells})
    for prob, lab in pairs:
        exps = _static_exponents(cells, (prob, lab))
        if not exps:
            continue
        e = estimate(exps)
        tau = taus.get(lab, math.nan)
        crit = STATIC_ONE_C if tau > 1 else (STATIC_HALF_C if tau == 0.5 else None)
        text = f"exponent of the drift-0 regret in T between T = {Ts[0]} and {Ts[-1]}: {e.text()} (per instance: " \
               + ", ".join(num(x) for x in exps) + ")"
        if names[lab] == "f2obo" and crit is not None:
            bound = "bounded (O(1))" if tau > 1 else "O(√T)"
            out.append(crit.verdict(f"{prob}, {lab} (τ = {tau:g}): static regret {bound} in T", [e], text))
        else:
            out.append(Verdict(f"{prob}, {lab}: static regret against T (no verdict: "
                               + ("Theorem 4.2's bound O(√T)" if names[lab] == "af2obo" else "Table 1: O(1 + V_T + H_2,T)")
                               + ")", "a bound, not a prediction", text, "reference", estimate=e))
    return out


def _adapt_verdicts(cells: dict, names: dict[str, str]) -> list[Verdict]:
    """AF2OBO against the static methods on moving_quadratic, at the largest drift and horizon."""
    keys = [k for k in cells if k[0] == MOVING]
    if not keys:
        return []
    T = max(k[2] for k in keys)
    labs = [k[1] for k in keys if k[2] == T]
    af = [lab for lab in labs if names[lab] == "af2obo"]
    static = [lab for lab in labs if names[lab] in STATIC]
    if not af or not static:
        return []
    drift = max(d for k in keys for per in cells[k].values() for d in per)
    reg = {lab: {i: per[drift][0] for i, per in cells[(MOVING, lab, T)].items() if drift in per} for lab in labs}

    def ratio(subject: str, rivals: list[str]) -> Estimate:
        """Per instance: the rivals' smallest regret over the subject's."""
        return estimate([min(reg[o][i] for o in rivals) / reg[subject][i] for i in reg[subject]
                         if all(i in reg[o] for o in rivals) and reg[subject][i] > 0])

    out = []
    for a in af:
        mine = ratio(a, static)
        base = [ratio(s, [o for o in [*static, a] if o != s]) for s in static]
        measured = (f"drift {drift:g}, T = {T}: regret " + ", ".join(f"{lab} {num(an.median(list(reg[lab].values())))}"
                                                                   for lab in [a, *static])
                    + f"; min static / {a} = {mine.text()}")
        measured += "; the same ratio for each static method against the rest: " + ", ".join(
            f"{s} {e.text()}" for s, e in zip(static, base))
        out.append(Verdict(f"{MOVING}: {a}'s measured regret against the static methods' at the largest drift "
                           f"({drift:g}) and horizon (no verdict: the paper compares bounds, and a measured regret "
                           "below a bound says nothing of the bound)", ADAPT_QUOTE, measured, "reference",
                           estimate=mine, criterion="af2obo_adapts"))
    return out


# ---------------------------------------------------------------- setup table and figure
def regret_setup(meta: StudyRecord) -> list[Setting]:
    """Theorem 3.4's setting (assumptions and conditions, no experiment) next to the study."""
    pts = meta.points
    probs = sorted({p["problem"] for p in pts})
    Ts = sorted({int(p["problem_params"]["T"]) for p in pts})
    dims = sorted({(p["problem_params"].get("dim_x"), p["problem_params"].get("dim_y")) for p in pts})
    broken = _broken_conditions(pts)
    taus = sorted({float((p["algorithm_params"] or {}).get("tau", 0.5)) for p in pts if p["algorithm"] == "f2obo"})
    step = setting("step sizes", "Theorem 3.4 (§3.2): λ_1 > 2 L_f,1/μ_g, α ≤ 1/L_g,1, β ≤ 1/(2 λ_T L_g,1), γ below constants "
                                 "not stated; any τ > 0 (τ > 1 for O(1 + V_T + H_2,T))",
                   f"measured on each problem ('auto'); τ = {', '.join(f'{t:g}' for t in taus)}; γ = 0.1"
                   + (f"; broken: {'; '.join(broken)}" if broken else "; every stated condition holds (checked)"),
                   "; ".join(broken) if broken else None)
    step.chosen = None if broken else f"γ = 0.1 (its bound's constants are not stated), τ = {', '.join(f'{t:g}' for t in taus)}"
    return [
        setting("problem and data", "Theorem 3.4 (§3.2) under Assumptions 2.1–2.3 (§2.1): g_t μ_g-strongly convex in y; "
                                    "f_t L_f,0-Lipschitz with L_f,1-Lipschitz gradient; ∇g_t, ∇²g_t Lipschitz; no experiment",
                ", ".join(probs) + ": quadratic f_t, g_t (strongly convex, smooth)",
                "f_t is quadratic in y: Lipschitz (Assumption 2.2(i)) only on bounded sets, not on all of R^d"),
        chosen("dimensions", "dim_x, dim_y = " + ", ".join(f"{a}, {b}" for a, b in dims)),
        chosen("constraints", "X = a ball (radius 10); the stationary point of moving_quadratic stays inside it",
               note="§2.2: X a closed convex set"),
        chosen("noise", "exact gradients", note="Theorem 3.4: a theorem, no experiment"),
        chosen("metric", "the final cumulative regret (3) with exact ∇F_t and γ = 0.1 (the algorithms' γ); V_T, H_2,T by "
                         "(5), exact per instance", note="(3), (5): Reg_F(T) = Σ_t ‖G_X(x_t, ∇F_t(x_t), γ)‖², γ not given"),
        chosen("what is timed", "nothing", note="Theorem 3.4: a theorem"),
        chosen("iteration counts", f"horizons T = {', '.join(map(str, Ts))}, one run per T"),
        chosen("batch sizes", "exact gradients", note="Theorem 3.4: a theorem, no experiment"),
        chosen("inner-loop policy", "F2OBO: K = ⌈(1+2τ) ln T/(−ln ρ)⌉, ρ = 1 − μ_g/(4 L_g,1) ('auto'); AF2OBO: δ_y = T^(−1/2), "
               "δ_z = T^(−(1+τ)/2) (Theorem 4.2); OBBO, OAGD, SOBOW: 10 steps",
               note="Theorem 3.4: K ≥ ⌈(1+2τ)/(−ln ρ) ln T + (ln c − ln λ_1)/ln ρ⌉, c not stated: its second term is dropped"),
        step,
        chosen("seeds", f"{len(meta.seeds)} instances per problem (the seed draws the instance and its path)"),
    ]


def _broken_conditions(pts: list[dict[str, Any]]) -> list[str]:
    """Theorem 3.4's conditions broken by the F2OBO / AF2OBO entries on the study's problems (largest T, drift 0)."""
    out, seen = [], set()
    for p in pts:
        if p["algorithm"] not in ("f2obo", "af2obo"):
            continue
        params = {k: v for k, v in p["problem_params"].items() if not isinstance(v, (list, dict))}
        key = (p["label"], p["problem"], tuple(sorted(params.items())))
        if key in seen or params.get("drift", 0) != 0:
            continue
        seen.add(key)
        prob = problems.make(p["problem"], seed=0, **params)
        cfg = make_config(p["algorithm"], p["algorithm_params"] or {})
        out += [f"{p['label']} on {p['problem']} (T = {params['T']}): {c}" for c in theorem_conditions(cfg, prob)]
    return out


def _plot(rows: list[dict[str, Any]], path: Path) -> Path:
    probs = list(dict.fromkeys(r["problem"] for r in rows))
    color = figures.colors(r["algorithm"] for r in rows)
    Ts = sorted({r["T"] for r in rows})
    marks = dict(zip(Ts, ("o-", "s--", "^:", "d-.")))
    fig, axes = figures.panels(len(probs))
    for ax, prob in zip(axes, probs):
        for r in (r for r in rows if r["problem"] == prob):
            ds = sorted(float(k.split("=")[1]) for k in r if k.startswith("regret@drift="))
            x = [1 + r[f"V_T@drift={d:g}"] + r[f"H_2T@drift={d:g}"] for d in ds]
            ax.plot(x, [r[f"regret@drift={d:g}"] for d in ds], marks.get(r["T"], "o-"), color=color[r["algorithm"]],
                    label=f"{r['algorithm']} T={r['T']}: slope {num(r['path_slope_top2'])}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{prob} (drift {', '.join(f'{d:g}' for d in ds)})", fontsize=8)
        ax.set_xlabel("1 + V_T + H_2,T (exact, eq. 5)")
        ax.set_ylabel("final local regret (eq. 3)")
        figures.panel_legend(ax)
    return figures.save_figure(fig, path, dpi=80)
