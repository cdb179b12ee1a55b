"""Noise and minibatch size: no paper claim, the final error set against the σ²/b of a minibatch average."""
from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sweep.report import analysis as an, figures
from sweep.claims.base import (NO_PAPER, Criterion, Estimate, Measured, Setting, claim, exponent, final, initial, num,
                               setting)
from sweep.results.runs import RunData, config_label, group, problem_label
from sweep.study.record import StudyRecord

NOISE_SLOPE = (-1.5, -0.5)  # consistent with an error floor ∝ 1/b
SIGMA_SLOPE = (1.5, 2.5)  # consistent with an error floor ∝ σ²
BATCH_C = Criterion("noise_batch", "no paper claim: a noise floor ∝ σ²/b has exponent −1 in the batch size b",
                    NOISE_SLOPE[0], "range", NOISE_SLOPE[1])
SIGMA_C = Criterion("noise_sigma", "no paper claim: a noise floor ∝ σ²/b has exponent +2 in the noise σ",
                    SIGMA_SLOPE[0], "range", SIGMA_SLOPE[1])
UNSTABLE = 100.0  # a final value above this × the start value is a blow-up, left out of the exponent fit


def stable_exponent(xs: Sequence[float], ys: Sequence[float], start: float) -> tuple[float, list[float]]:
    """The log–log exponent over the points that did not blow up, and the x values that did."""
    bad = [x for x, y in zip(xs, ys) if not (y <= UNSTABLE * start)]
    keep = [(x, y) for x, y in zip(xs, ys) if y <= UNSTABLE * start]
    return (exponent(*zip(*keep)) if len(keep) >= 2 else math.nan), bad


def noise_setup(meta: StudyRecord) -> list[Setting]:
    """No paper: the study's own setting, for the record."""
    pts = meta.points
    probs = {}
    for p in pts:
        probs.setdefault(p["problem"], p["problem_params"])
    return [
        setting("problem and data", NO_PAPER, "; ".join(f"{n} {v}" for n, v in probs.items())),
        setting("noise", NO_PAPER, f"minibatch sizes {', '.join(str(v) for v in meta.axis['values'])}"),
        setting("metric", NO_PAPER, f"final {meta.report.metric}"),
        setting("iteration counts", NO_PAPER, f"budget {pts[0]['budget']}"),
        setting("step sizes", NO_PAPER, "defaults; F2CSA η = 0.01, D = 0.05, δ_G = 0.5 and SSIGD β = 0.1 (the d = 50 "
                                        "settings of the test suite)"),
        setting("seeds", NO_PAPER, f"{len(meta.seeds)} seeds"),
    ]


@claim("noise_scaling", kind="noise", title="noise and minibatch size (no paper claim; σ²/b reference)",
       study="noise_robustness",
       setup=noise_setup, criteria=(BATCH_C, SIGMA_C),
       statement="no paper claim. Reference: the variance of a b-sample minibatch of noise σ is σ²/b, so a method "
                 "limited by its noise floor ends with an error ∝ σ²/b (exponent −1 in b, +2 in σ).")
def noise_scaling(meta: StudyRecord, runs: list[RunData], directory: Path) -> Measured:
    """Final metric against batch size (and against σ where the problem has a noise grid), with fitted exponents."""
    metric, goal = meta.report.metric, meta.report.goal
    bsize = lambda r: r.point["coords"].get("axis")  # noqa: E731
    bs = sorted({bsize(r) for r in runs if isinstance(bsize(r), (int, float))})
    rows, verdicts = [], []
    for (prob, lab), rs in group(runs, lambda r: (problem_label(r.point), config_label(r.point))).items():
        vals = [an.median([final(r, metric, goal) for r in rs if bsize(r) == b]) for b in bs]
        start = an.median([initial(r, metric) for r in rs])
        e, bad = stable_exponent(bs, vals, start)
        row = {"problem": prob, "algorithm": lab, "axis": "batch_size", "exponent": e, "start": start}
        row.update({f"b={b:g}": v for b, v in zip(bs, vals)})
        row["blew_up_at"] = ", ".join(f"b={b:g}" for b in bad)
        rows.append(row)
    for (name, lab), rs in group(runs, lambda r: (r.point["problem"], config_label(r.point))).items():
        if "problem.noise" not in rs[0].point["coords"]["grid"]:
            continue
        sig = sorted({float(r.point["problem_params"]["noise"]) for r in rs})
        for b in bs:
            vals = [an.median([final(r, metric, goal) for r in rs if bsize(r) == b and r.point["problem_params"]["noise"] == s])
                    for s in sig]
            start = an.median([initial(r, metric) for r in rs])
            e, bad = stable_exponent(sig, vals, start)
            row = {"problem": name, "algorithm": lab, "axis": f"noise (b={b:g})", "exponent": e, "start": start}
            row.update({f"sigma={s:g}": v for s, v in zip(sig, vals)})
            row["blew_up_at"] = ", ".join(f"σ={s:g}" for s in bad)
            rows.append(row)
    for (prob, batch_axis), rs in group(rows, lambda r: (r["problem"], r["axis"] == "batch_size")).items():
        crit = BATCH_C if batch_axis else SIGMA_C
        fits = [(r, crit.passes(Estimate.point(r["exponent"]))) for r in rs]
        blown = [f"{r['algorithm']} at {r['blew_up_at']}" for r in rs if r["blew_up_at"]]
        verdicts.append(crit.verdict(
            f"{prob}: final {metric} against {'batch size b' if batch_axis else 'noise σ'} follows the σ²/b floor",
            [Estimate.point(r["exponent"]) for r in rs],
            ", ".join(f"{r['algorithm']}{'' if batch_axis else ' ' + r['axis'].split(' ', 1)[1]} "
                      f"{num(r['exponent'])}{' (consistent)' if ok else ''}" for r, ok in fits)
            + (f"; blew up (final > {UNSTABLE:g} × start, left out of the fit): {'; '.join(blown)}" if blown else "")))
    plots = [_noise_plot(rows, bs, metric, directory / "claim.png")] if rows else []
    setup = (f"median over {len(meta.seeds)} seeds of the final {metric} after {meta.points[0]['budget']}, at "
             f"batch sizes {', '.join(f'{b:g}' for b in bs)}; exponents are least-squares log–log slopes over the "
             f"points whose final value stayed below {UNSTABLE:g} × the start value (the others blew up). A method "
             f"still far from its noise floor (e.g. decaying steps, or too few iterations) shows a slope near 0.")
    return Measured(setup, {"measured": rows}, verdicts, plots)


def _noise_plot(rows: list[dict[str, Any]], bs: list[float], metric: str, path: Path) -> Path:
    probs = list(dict.fromkeys(r["problem"] for r in rows if r["axis"] == "batch_size"))
    color = figures.colors(r["algorithm"] for r in rows)
    fig, axes = figures.panels(len(probs))
    for ax, prob in zip(axes, probs):
        for r in (r for r in rows if r["problem"] == prob and r["axis"] == "batch_size"):
            ax.plot(bs, [r[f"b={b:g}"] for b in bs], "o-", color=color[r["algorithm"]],
                    label=f"{r['algorithm']} p={num(r['exponent'])}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(prob, fontsize=8)
        ax.set_xlabel("batch size b")
        ax.set_ylabel(f"final {metric}")
        figures.panel_legend(ax)
    return figures.save_figure(fig, path, dpi=80)
