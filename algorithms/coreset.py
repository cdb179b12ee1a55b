"""Coreset-selection baselines of TFBO Table 1 on the coreset_selection problem (problems.coreset).

- bcsr: BCSR (Hao, Ji & Liu, NeurIPS 2023) as its authors' code runs it: `inner_steps` gradient steps of the
  proxy model θ with the constant rate η_θ, then v = Σ_{q=0}^{Q} (I − η_θ ∇²yy g)^q ∇y f (Q = `neumann_terms`;
  like that code, without the factor η_θ of the Neumann series of [∇²yy g]⁻¹, which the outer rate absorbs)
  and λ ← Proj_Δ(λ − η_λ (∇x f − ∇²xy g v)) on each task's simplex. The code leaves the regularizer out of the
  λ-gradient (it enters only the loss value); this takes the formulation's gradient, ∇x f included.
- uniform: K samples of each task's pool drawn uniformly without replacement, each weighted 1/K.
- kmeans_features: per task, k-means with K clusters on the pool's features (bias excluded); the coreset is
  the sample nearest each centre (Nguyen et al. 2018 as Table 1 names it), each weighted 1/K.
- greedy_coreset: Borsos, Mutný & Krause (2020)'s greedy forward selection on the same bilevel problem: each
  step adds to every task's coreset S the sample i ∉ S whose weight most decreases the outer data loss,
  argmin_i −[∇²xy g v]_i with v = [∇²yy g]⁻¹ ∇y f at θ*(λ_S), λ_S uniform on S (θ* by Newton on the oracles'
  dense Hessian). After K steps the coresets are complete; weights stay uniform (the paper re-fits them).

The selection rules choose once, on their first step (later steps keep the choice), and do not train θ: the
continual metrics (A_T, FGT_T) depend on the coreset alone.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from algorithms.base import Algorithm, AlgorithmConfig, StochasticConfig, register
from problems.base import Array
from problems.validation import param


@dataclasses.dataclass(frozen=True)
class BCSRConfig(StochasticConfig):
    """BCSR's constants (its code's defaults: lr_proxy_model = lr_weight = 5, inner_iter = 1, 3 Neumann terms)."""

    lr_inner: float = param(5.0, "positive", "η_θ: constant step of the proxy model and of the Neumann series")
    lr_outer: float = param(5.0, "positive", "η_λ: constant step of the sample weights")
    inner_steps: int = param(1, "positive_int", "proxy-model steps per outer iteration")
    neumann_terms: int = param(3, "nonnegative_int", "Q: terms of the Neumann series after the first")


@register
class BCSR(Algorithm):
    """BCSR (coreset problems): proxy-model steps, a truncated Neumann hypergradient, projected weight steps."""

    name = "bcsr"
    Config = BCSRConfig
    step_sizes = ("lr_inner", "lr_outer")
    stochastic = True
    loops = "double"
    coreset = True
    paper = "Hao, Ji & Liu (NeurIPS 2023), Alg. 1 and its code; TFBO Table 1"

    def step(self) -> None:
        c, p = self.config, self.problem
        batches = self.batches(c.inner_steps + 1)
        for batch in batches[:-1]:
            self.y = self.y - c.lr_inner * p.grad_y_g(self.x, self.y, batch)
        batch = batches[-1]
        grad_x_f, grad_y_f = p.grad_f(self.x, self.y, batch)
        term, v = grad_y_f, grad_y_f.copy()
        for _ in range(c.neumann_terms):
            term = term - c.lr_inner * p.hvp_yy_g(self.x, self.y, term, batch)
            v += term
        hypergrad = grad_x_f - p.cross_xy_g(self.x, self.y, v, batch)
        self.x = p.project_x(self.x - c.lr_outer * hypergrad)


class SelectionRule(Algorithm):
    """A one-shot selection: the first step puts weight 1/K on K chosen samples of every task."""

    coreset = True

    def choose(self, block: slice, k: int) -> Array:
        """Pool positions (0..n_t − 1) of task block `block`'s K chosen samples."""
        raise NotImplementedError

    def step(self) -> None:
        if self.iteration > 0:
            return
        k, x = self.problem.coreset_size, np.zeros_like(self.x)
        for block in self.problem.blocks:
            x[block.start + self.choose(block, k)] = 1.0 / k
        self.x = x


@register
class Uniform(SelectionRule):
    """Uniform sampling (coreset problems): K samples of each task drawn uniformly without replacement."""

    name = "uniform"
    Config = AlgorithmConfig
    paper = "TFBO Table 1 (Uniform Sampling)"

    def choose(self, block: slice, k: int) -> Array:
        return self.rng.choice(block.stop - block.start, size=k, replace=False)


@register
class KMeansFeatures(SelectionRule):
    """k-means features (coreset problems): the sample nearest each of K k-means centres of a task's features."""

    name = "kmeans_features"
    Config = AlgorithmConfig
    paper = "TFBO Table 1 (k-means features, Nguyen et al. 2018)"

    def choose(self, block: slice, k: int) -> Array:
        from sklearn.cluster import KMeans  # scikit-learn loads only where a selection needs it

        X = self.problem.D[block][:, :-1]  # the bias column is the same for every sample
        km = KMeans(n_clusters=k, n_init=10, random_state=int(self.rng.integers(2**31 - 1))).fit(X)
        return nearest_distinct(X, km.cluster_centers_)


@dataclasses.dataclass(frozen=True)
class GreedyConfig(AlgorithmConfig):
    """Newton steps of the inner solve per selection (from θ = 0: a strongly convex logistic fit)."""

    newton_steps: int = param(12, "positive_int", "Newton steps solving the proxy model at each selection")


@register
class GreedyCoreset(Algorithm):
    """Greedy Coreset (coreset problems): per task and step, the sample whose weight most lowers the outer loss."""

    name = "greedy_coreset"
    Config = GreedyConfig
    coreset = True
    loops = "double"
    paper = "Borsos, Mutný & Krause (NeurIPS 2020); TFBO Table 1 (Greedy Coreset)"

    def __init__(self, problem, config: GreedyConfig, rng: np.random.Generator) -> None:
        super().__init__(problem, config, rng)
        self.x = np.zeros_like(self.x)  # nothing selected yet

    def _inner(self, x: Array) -> Array:
        y = np.zeros_like(self.y)
        for _ in range(self.config.newton_steps):
            y = y - np.linalg.solve(self.problem.hessian_yy_g(x, y), self.problem.grad_y_g(x, y))
        return y

    def step(self) -> None:
        p, k = self.problem, self.problem.coreset_size
        if np.count_nonzero(self.x[p.blocks[0]]) >= k:
            return
        self.y = self._inner(self.x)
        v = np.linalg.solve(p.hessian_yy_g(self.x, self.y), p.grad_y_f(self.x, self.y))
        gain = -p.cross_xy_g(self.x, self.y, v)  # the data part of ∂F/∂λ (∇x f is the regularizer alone)
        x = self.x.copy()
        for block in p.blocks:
            weights, g = x[block], gain[block].copy()
            g[weights > 0] = np.inf
            weights[np.argmin(g)] = 1.0
            x[block] = (weights > 0) / np.count_nonzero(weights)
        self.x = x


def nearest_distinct(X: Array, centres: Array) -> Array:
    """For each centre in turn, the nearest sample not already taken (so K centres give K samples)."""
    dist = ((X[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
    taken: list[int] = []
    for j in range(len(centres)):
        order = np.argsort(dist[:, j], kind="stable")
        taken.append(int(next(i for i in order if i not in taken)))
    return np.array(taken)
