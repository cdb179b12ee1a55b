"""Figures that do not mislead: medians over every seed (ended runs held at their final value), captions,
labels on every panel, legends outside the axes, distinct styles past 10 series, and hundreds of
configurations drawn fast with only the best labelled."""
import math
import time

import numpy as np
import pytest

from sweep.report import analysis as an, curves, figures
from sweep.results.runs import RunData


def test_held_band_counts_every_seed_at_every_x():
    grid = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    short = ([0.0, 1.0, 2.0], [9.0, 5.0, 3.0], 3.0)  # ended at x = 2 with final value 3
    long = ([0.0, 1.0, 4.0, 16.0], [9.0, 6.0, 2.0, 1.0], 1.0)
    blown = ([0.0, 1.0], [9.0, 7.0], math.inf)  # diverged after x = 1
    q = an.held_band([short, long, blown], grid, log_y=False)
    # Independent: each run's value at each x by hand (linear in log x between records, held after its end).
    long_at_2 = 6.0 + (2.0 - 6.0) * math.log(2.0) / math.log(4.0)
    long_at_8 = 2.0 + (1.0 - 2.0) * math.log(2.0) / math.log(4.0)
    table = np.array([[5.0, 3.0, 3.0, 3.0, 3.0], [6.0, long_at_2, 2.0, long_at_8, 1.0], [7.0] + [math.inf] * 4])
    np.testing.assert_allclose(q[1], np.median(table, axis=0), rtol=1e-12)
    assert q[2, -1] == math.inf and q[0, -1] == pytest.approx(2.0)  # 25%: between 1 and 3; 75%: touches +inf
    # Before a run's first positive x it has its start value (x = 0); in log y it interpolates log-linearly.
    late = ([0.0, 4.0, 8.0], [10.0, 1.0, 0.1], 0.1)
    q = an.held_band([late], np.array([1.0, 2.0, 4.0 * math.sqrt(2.0), 32.0]), log_y=True)
    np.testing.assert_allclose(q[1], [10.0, 10.0, math.sqrt(0.1), 0.1], rtol=1e-12)


def test_column_quantiles_match_numpy_and_the_inf_rule():
    rng = np.random.default_rng(3)
    d = rng.standard_normal((9, 40))
    d[rng.uniform(size=d.shape) < 0.3] = np.nan
    d[:, 0] = np.nan
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        want = np.nanquantile(d, an.QUANTILES, axis=0)
    got = an.column_quantiles(d)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-15)
    inf = an.column_quantiles(np.array([[1.0], [math.inf], [math.inf]]))
    assert inf[:, 0].tolist() == [math.inf] * 3
    for col in ([1.0, 2.0, math.inf, math.inf], [3.0, math.nan, 1.0]):
        assert an.column_quantiles(np.array(col)[:, None], (0.25, 0.75))[:, 0].tolist() == an.quantiles(col)


def _run(label, seed, key, records, status="finished", axis=None, grid=None):
    point = {"label": label, "algorithm": label, "problem": "quadratic", "key": key, "algorithm_params": {},
             "problem_params": {}, "coords": {"grid": grid or {}, **({"axis": axis} if axis is not None else {})}}
    return RunData(f"{key}.s{seed}", point, seed, status, records[-1], records, {}, None)


def _records(times, values):
    return [{"iteration": i, "calls/total": 3 * i, "time": t, "grad_F_sq": v, "status": "running"}
            for i, (t, v) in enumerate(zip(times, values))]


@pytest.fixture()
def captured(monkeypatch):
    """The figures the plot functions would write (kept open for inspection)."""
    figs = []
    monkeypatch.setattr(curves, "save_figure", lambda fig, path, dpi=90: figs.append(fig) or path)
    yield figs
    for fig in figs:
        figures.pyplot().close(fig)


def _median_line(ax, color):
    return next(line for line in ax.get_lines() if line.get_color() == color and len(line.get_xdata()) > 2)


def test_the_seconds_panel_ends_at_the_table_median(tmp_path, captured):
    # Three seeds of one configuration whose compute times differ: the slowest ends at 4 s with the largest
    # value. A median over the seeds still running would end at 1000; held at their final values it ends
    # at the median of the finals, the number best.csv reports.
    finals = [1.0, 2.0, 1000.0]
    runs = [_run("soba", s, "soba.q.1", _records([0.0, 0.5 * (s + 1), (s + 1) * 1.3], [50.0, 20.0, f]))
            for s, f in enumerate(finals)]
    curves.plot_convergence(runs, "grad_F_sq", "min", "study: quadratic", tmp_path / "c.png", None)
    fig = captured[0]
    style = figures.algorithm_styles([("soba", "soba")])["soba"]
    seconds = fig.axes[2]
    line = _median_line(seconds, style["color"])
    assert line.get_ydata()[-1] == pytest.approx(an.median(finals), rel=1e-12) == 2.0
    assert np.all(np.diff(line.get_xdata()) > 0) and line.get_xdata()[-1] == pytest.approx(3.9)
    text = fig._suptitle.get_text()
    assert "median and 25–75% band over 3 seeds" in text and "held at its final value" in text
    for ax in fig.axes[:3]:
        assert ax.get_ylabel() == "grad_F_sq" and ax.get_xlabel()


def test_labels_legends_and_styles_of_a_crowded_figure(tmp_path, captured):
    labels = [f"alg{i}" for i in range(12)]
    runs = [_run(lab, s, f"{lab}.q.1", _records([0.0, 0.1, 0.2], [10.0, 10.0 / (i + 2), 1.0 / (i + 2)]), axis=ax_v)
            for i, lab in enumerate(labels) for s in (0, 1) for ax_v in (1, 2)]
    curves.plot_convergence(runs, "grad_F_sq", "min", "study: quadratic", tmp_path / "c.png", "step_size_factor")
    fig = captured[0]
    axes = [a for a in fig.axes if a.get_visible()]
    assert len(axes) == 6  # two axis values (rows) x three x-axes
    assert {a.get_title() for a in axes} == {"step ×1", "step ×2"}
    assert all(a.get_ylabel() == "grad_F_sq" and a.get_xlabel() for a in axes)
    (leg,) = fig.legends
    assert [t.get_text() for t in leg.get_texts()] == labels
    fig.canvas.draw()
    right = max(a.get_window_extent().x1 for a in axes)
    assert leg.get_window_extent().x0 >= right  # outside the axes, right of the panels
    pairs = {(tuple(h.get_color()), str(h.get_linestyle())) for h in leg.legend_handles}
    assert len(pairs) == 12  # past 10 series: colour and line style together tell them apart
    assert "band over 2 seeds" in fig._suptitle.get_text()


def test_hundreds_of_configurations_stay_readable_and_fast(tmp_path, captured):
    rng = np.random.default_rng(0)
    runs = []
    for label in ("soba", "amigo"):
        for k in range(150):
            rate = rng.uniform(0.2, 2.0)
            for s in range(3):
                its = np.array([0, 1, 2, 4, 8, 16, 32, 64, 128])
                recs = _records(its * 1e-3, 10.0 * (1.0 + its) ** -rate * (1 + 0.1 * s))
                runs.append(_run(label, s, f"{label}{k}", recs, grid={"lr": k}))
    start = time.perf_counter()
    curves.plot_convergence(runs, "grad_F_sq", "min", "many: quadratic", tmp_path / "m.png", None)
    elapsed = time.perf_counter() - start
    fig = captured[0]
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len(texts) == 2 * curves.BEST + 1 and texts[-1].startswith("294 other configurations")
    # The labelled ones are the best three of each algorithm by median final value, computed here directly.
    for label in ("soba", "amigo"):
        finals = {}
        for r in runs:
            if r.point["label"] == label:
                finals.setdefault(r.point["coords"]["grid"]["lr"], []).append(r.final["grad_F_sq"])
        best = sorted(finals, key=lambda k: np.median(finals[k]))[:curves.BEST]
        assert {t for t in texts if t.startswith(label)} == {f"{label}(lr={k})" for k in best}
    faint = [c for a in fig.axes for c in a.collections if type(c).__name__ == "LineCollection"]
    assert len(faint) == 3 and all(len(c.get_segments()) == 294 for c in faint)  # one artist per panel
    assert elapsed < 30.0, elapsed  # measured 3-6 s on the shared 2-core machine


def test_axis_plot_has_a_panel_per_problem_labels_ticks_and_caption(tmp_path, monkeypatch):
    figs = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, path, dpi=90: figs.append(fig) or path)
    rows = [{"problem": prob, "algorithm": alg, "batch_size": b, "median_grad_F_sq": v, "q25": v / 2, "q75": v * 2,
             "seeds": 3} for prob, scale in (("quadratic", 1.0), ("constrained_quadratic", 1e-3))
            for alg, v0 in (("soba", 10.0), ("f2sa", 100.0)) for b, v in ((1, v0 * scale), (16, v0 * scale / 16))]
    figures.plot_axis(rows, "batch_size", "grad_F_sq", "noise: final grad_F_sq", tmp_path / "n.png")
    fig = figs[0]
    axes = [a for a in fig.axes if a.get_visible()]
    assert [a.get_title() for a in axes] == ["quadratic", "constrained_quadratic"]  # scales apart: not one panel
    assert all(a.get_xlabel() == "batch_size" and a.get_ylabel() == "final grad_F_sq" for a in axes)
    assert [t.get_text() for t in axes[0].get_xticklabels()] == ["1", "16"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["soba", "f2sa"]
    assert "median and 25–75% over 3 seeds" in fig._suptitle.get_text()
    assert all(len(a.collections) == 2 for a in axes)  # a band per line: three seeds each
    figures.pyplot().close(fig)


def test_an_algorithm_keeps_its_colour_in_every_figure_of_every_study(tmp_path, captured):
    """Colours follow the algorithm, not a study's order: soba is drawn alike in a study that lists it first and
    in one that lists it last, and two configurations of one algorithm differ by line style."""
    recs = _records([0.0, 0.1, 0.2], [10.0, 5.0, 1.0])
    first = [_run(label, 0, label, recs) for label in ("soba", "amigo", "stocbio")]
    last = [_run(label, 0, label, recs) for label in ("stocbio", "dtfbo", "soba")]
    for i, runs in enumerate((first, last)):
        curves.plot_convergence(runs, "grad_F_sq", "min", f"study {i}", tmp_path / f"{i}.png", None,
                                order=curves.palette(runs))
    legend_colours = [dict(zip([t.get_text() for t in fig.legends[0].get_texts()],
                               [h.get_color() for h in fig.legends[0].legend_handles])) for fig in captured]
    assert legend_colours[0]["soba"] == legend_colours[1]["soba"] == figures.algorithm_colour("soba") == "#1f77b4"
    assert legend_colours[0]["stocbio"] == legend_colours[1]["stocbio"] == figures.algorithm_colour("stocbio")
    assert len({*legend_colours[0].values()}) == 3 and len({*legend_colours[1].values()}) == 3
    for fig, legend in zip(captured, legend_colours):  # the lines are drawn in the legend's colours
        assert {line.get_color() for line in fig.axes[0].get_lines()} >= set(legend.values())
    grid = [_run("soba", 0, f"soba{k}", recs, grid={"lr": k}) for k in (1, 2)]
    styles = figures.algorithm_styles((lab, "soba") for lab in curves.palette(grid))
    assert [s["color"] for s in styles.values()] == ["#1f77b4", "#1f77b4"]
    assert [s["linestyle"] for s in styles.values()] == ["-", "--"]


def test_every_built_in_study_of_at_most_20_algorithms_has_one_colour_per_algorithm():
    import yaml

    from sweep.study.sources import builtin_studies

    for name, path in builtin_studies().items():
        algs = {e if isinstance(e, str) else e["name"] for e in (yaml.safe_load(path.read_text()).get("algorithms") or [])}
        if len(algs) <= len(figures.PALETTE):
            assert len({figures.algorithm_colour(a) for a in algs}) == len(algs), name


def test_more_other_configurations_than_faint_lines_are_drawn_as_their_spread_over_a_ranked_sample(
        tmp_path, captured, monkeypatch):
    monkeypatch.setattr(curves, "FAINT", 7)
    its = np.array([0, 1, 2])
    rates = [0.1 + k / 40 for k in range(40)]
    order = np.random.default_rng(1).permutation(40)  # the study's order is not the order of their final values
    runs = [_run("soba", 0, f"soba{k}", _records(its * 1e-3, 10.0 * (1.0 + its) ** -rates[k]), grid={"lr": k})
            for k in order]
    curves.plot_convergence(runs, "grad_F_sq", "min", "sampled: quadratic", tmp_path / "s.png", None)
    fig = captured[0]
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts[-1] == "soba: 37 other configurations, 10%–90% over them (median dotted)"
    assert "from 7 of them evenly spaced in rank of final value" in fig._suptitle.get_text()
    assert not [c for a in fig.axes for c in a.collections if type(c).__name__ == "LineCollection"]  # no faint lines
    # The 37 others (the best 3 by final value, lr = 37..39, in colour) ranked best to worst are lr = 36 .. 0; the
    # sample is every 6th of them: lr = 36, 30, ..., 0. Its 10/50/90% at the last x, computed here directly:
    sample = [10.0 * 3.0 ** -rates[k] for k in range(36, -1, -6)]
    want = np.quantile(sample, curves.SPREAD)
    band = fig.axes[0].collections[-1].get_paths()[0].vertices  # the spread: the first coloured band is drawn later
    median = [ln for ln in fig.axes[0].get_lines() if ln.get_linestyle() == ":"][-1]
    assert median.get_ydata()[-1] == pytest.approx(want[1], rel=1e-9)
    end = band[np.isclose(band[:, 0], median.get_xdata()[-1]), 1]  # the band's lower and upper edge at the last x
    assert end.min() == pytest.approx(want[0], rel=1e-9) and end.max() == pytest.approx(want[2], rel=1e-9)


@pytest.mark.parametrize("label, plain", [
    ("$\\mathdefault{10^{-3}}$", "10\u207b\u00b3"), ("$\\mathdefault{10^{12}}$", "10\u00b9\u00b2"),
    ("$\\mathdefault{2\\times10^{-1}}$", "2\u00d710\u207b\u00b9"), ("$\\mathdefault{0.01}$", "0.01"),
    ("$\\mathdefault{-10^{2}}$", "\u221210\u00b2"), ("$\\mathdefault{\\alpha}$", "$\\mathdefault{\\alpha}$"),
    ("iterations", "iterations")])
def test_a_log_axis_label_in_plain_characters_says_the_same(label, plain):
    assert figures.plain_label(label) == plain


def test_a_saved_figure_labels_its_log_axes_without_mathtext_and_keeps_formatters_set_on_purpose(tmp_path):
    from matplotlib import ticker

    fig, (ax, bx) = figures.pyplot().subplots(1, 2)
    ax.loglog([1e-6, 1e2], [1e-3, 1e3])
    bx.semilogy([1, 2], [0.2, 0.4])
    bx.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))  # chosen by a figure: kept
    shown = {}
    real = fig.savefig

    def keep_labels(*args, **kwargs):
        real(*args, **kwargs)
        shown.update(x=[t.get_text() for t in ax.get_xticklabels() if t.get_text()],
                     y=[t.get_text() for t in ax.get_yticklabels() if t.get_text()],
                     by=[t.get_text() for t in bx.get_yticklabels() if t.get_text()])

    fig.savefig = keep_labels
    figures.save_figure(fig, tmp_path / "f.png")
    assert "10\u207b\u2076" in shown["x"] and "10\u00b2" in shown["x"] and "10\u00b3" in shown["y"]
    assert not any("$" in t for t in shown["x"] + shown["y"]) and all("$" not in t for t in shown["by"])
    assert isinstance(bx.yaxis.get_major_formatter(), ticker.FuncFormatter)
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"
