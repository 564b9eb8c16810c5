"""Aggregation with the paper's denominators, intervals fit for the quantity and the n, and paired tests
(pure: no I/O).

* Every instance of the run counts: a missing record, a missing outcome or an operationally invalid
  run is 0 (unresolved / Q=0) and is also counted separately (`n_missing`, `n_invalid`).
* A resolved rate is the mean over Repair runs of the all-instance rate, i.e. the mean over instances of
  each instance's mean over runs.
* 95% intervals of a rate: exact Clopper-Pearson for one run (k of n instances); with several runs, the Wilson
  score interval of the mean with n = instances (conservative: an instance's mean over runs varies no more than
  one Bernoulli outcome); undefined (NaN) over zero instances. Every row names its `ci_method`.
* A training curve's per-step mean reward (`curve_points`): Hoeffding's interval within the reward's range,
  valid and never zero-width at the 4-12 rollouts a CPU step has.
* Every Δ is paired on the same instances, with an exact two-sided p-value - exact McNemar for one binary run,
  otherwise the exact sign-flip permutation distribution of the per-instance differences (which reduces to
  McNemar for 0/1 data). Its interval: Newcombe's paired score interval (method 10) for one binary run; a
  cluster bootstrap (percentile, an instance's runs resampled together, fixed seed) from
  `MIN_BOOTSTRAP_N` instances up; below that, undefined: a bootstrap over 2 instances says nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from execcritic.results.schemas import (
    CURVE_SUMMARY_COLUMNS,
    DELTA_COLUMNS,
    SUMMARY_COLUMNS,
    ArtifactSchema,
    Metric,
    order_key,
)

N_BOOT = 2000
SEED = 0
LEVEL = 0.95
DECIMALS = 4          # summary values are stored rounded; the schema check compares at this precision
MIN_BOOTSTRAP_N = 20  # fewer instances: a percentile bootstrap of a mean difference is not an interval
CI_METHODS = {
    "clopper_pearson": "exact binomial (Clopper-Pearson), k of n instances",
    "wilson_instances": "Wilson score interval of the mean over runs, n = instances (conservative)",
    "newcombe_paired": "Newcombe's score interval for a paired difference of proportions (method 10)",
    "bootstrap_percentile": "cluster bootstrap over instances, percentile (runs resampled together)",
    "hoeffding": "Hoeffding's inequality for a mean of values within the reward's range (valid at every n)",
    "undefined": "no interval: zero instances, or too few for the bootstrap",
}


def _z(level: float) -> float:
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k), X ~ Binomial(n, p), summed in log space (stable for n in the thousands)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    lp, lq = math.log(p), math.log1p(-p)
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq
            for i in range(k + 1)]
    top = max(logs)
    return min(1.0, math.exp(top) * sum(math.exp(x - top) for x in logs))


def _solve(f, target: float) -> float:
    """p in [0, 1] with f(p) = target for a monotone f (bisection to 1e-12)."""
    lo, hi = 0.0, 1.0
    rising = f(1.0) > f(0.0)
    for _ in range(60):
        mid = (lo + hi) / 2
        if (f(mid) < target) == rising:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def clopper_pearson(k: int, n: int, *, level: float = LEVEL) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a binomial proportion k/n; NaN when n = 0."""
    if n == 0:
        return (math.nan, math.nan)
    a = (1.0 - level) / 2.0
    lo = 0.0 if k == 0 else _solve(lambda p: 1.0 - _binom_cdf(k - 1, n, p), a)   # P(X >= k | lo) = a
    hi = 1.0 if k == n else _solve(lambda p: _binom_cdf(k, n, p), a)             # P(X <= k | hi) = a
    return (lo, hi)


def wilson(p: float, n: int, *, level: float = LEVEL) -> tuple[float, float]:
    """The Wilson score interval of a proportion p over n; NaN when n = 0."""
    if n == 0:
        return (math.nan, math.nan)
    z = _z(level)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def newcombe_paired(both: int, only_a: int, only_b: int, neither: int, *, level: float = LEVEL
                    ) -> tuple[float, float]:
    """Newcombe's (1998, method 10) score interval for p_a - p_b from paired binary outcomes."""
    n = both + only_a + only_b + neither
    if n == 0:
        return (math.nan, math.nan)
    pa, pb = (both + only_a) / n, (both + only_b) / n
    la, ua = wilson(pa, n, level=level)
    lb, ub = wilson(pb, n, level=level)
    denom = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    phi = (both * neither - only_a * only_b) / math.sqrt(denom) if denom else 0.0
    d = pa - pb
    low = math.sqrt(max(0.0, (pa - la) ** 2 - 2 * phi * (pa - la) * (ub - pb) + (ub - pb) ** 2))
    high = math.sqrt(max(0.0, (ua - pa) ** 2 - 2 * phi * (ua - pa) * (pb - lb) + (pb - lb) ** 2))
    return (max(-1.0, d - low), min(1.0, d + high))


def rate_interval(m: np.ndarray, *, level: float = LEVEL) -> tuple[float, float, str]:
    """The interval of a rate from its (instances x runs) 0/1 outcomes, and the method used."""
    m = np.asarray(m, dtype=float)
    n = m.shape[0]
    if n == 0:
        return (math.nan, math.nan, "undefined")
    if m.ndim == 1 or m.shape[1] == 1:
        lo, hi = clopper_pearson(int(round(m.sum())), n, level=level)
        return (lo, hi, "clopper_pearson")
    lo, hi = wilson(float(_per_instance(m).mean()), n, level=level)
    return (lo, hi, "wilson_instances")


# ---- array level -------------------------------------------------------------------------------------

def _per_instance(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return x.mean(axis=1) if x.ndim == 2 else x


def bootstrap_mean_ci(x: np.ndarray, *, n_boot: int = N_BOOT, seed: int = SEED,
                      level: float = LEVEL) -> tuple[float, float]:
    """Percentile CI of the mean of `x` (n instances, or n x runs: rows resampled as clusters)."""
    v = _per_instance(x)
    n = v.shape[0]
    if n == 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    means = v[idx].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return (float(lo), float(hi))


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value from the discordant counts b (a=1,b=0) and c (a=0,b=1):
    min(1, 2 * P(X <= min(b, c))), X ~ Binomial(b + c, 1/2)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2 ** n)


def sign_flip_pvalue(d: Sequence[float], *, scale: int | None = None, n_perm: int = 20000,
                     seed: int = SEED) -> tuple[float, str]:
    """Two-sided p-value of the mean of paired differences `d` under random sign flips.

    When every |d| is a multiple of 1/scale (outcomes averaged over `scale` runs), the permutation
    distribution is computed exactly by convolution; otherwise by `n_perm` seeded random flips."""
    d = np.asarray(d, dtype=float)
    d = d[d != 0]
    if d.size == 0:
        return 1.0, "sign_flip_exact"
    obs = abs(d.sum())
    if scale:
        k = np.rint(np.abs(d) * scale)
        if np.allclose(k / scale, np.abs(d), atol=1e-9):
            k = k.astype(int)
            total = int(k.sum())
            dist = np.zeros(2 * total + 1)
            dist[total] = 1.0
            for ki in k:
                dist = 0.5 * (np.roll(dist, ki) + np.roll(dist, -ki))
            s = np.arange(-total, total + 1)
            obs_k = abs(int(np.rint(obs * scale)))
            return float(min(1.0, dist[np.abs(s) >= obs_k].sum())), "sign_flip_exact"
    rng = np.random.default_rng(seed)
    signs = rng.choice([-1.0, 1.0], size=(n_perm, d.size))
    stats = np.abs(signs @ d)
    return float((1 + np.sum(stats >= obs - 1e-12)) / (n_perm + 1)), "sign_flip_mc"


@dataclass(frozen=True)
class PairedDelta:
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    test: str
    n_instances: int
    n_better: int
    n_worse: int
    ci_method: str = "bootstrap_percentile"


def paired_delta(a: np.ndarray, b: np.ndarray, *, n_boot: int = N_BOOT, seed: int = SEED,
                 level: float = LEVEL) -> PairedDelta:
    """Δ = mean(a) - mean(b) over the same instances (rows; columns = runs, averaged per instance)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"paired outcomes need the same instances: {a.shape[0]} vs {b.shape[0]}")
    d = _per_instance(a) - _per_instance(b)
    better, worse = int((d > 0).sum()), int((d < 0).sum())
    runs = {x.shape[1] if x.ndim == 2 else 1 for x in (a, b)}
    binary = all(np.isin(x, (0.0, 1.0)).all() for x in (a, b))
    if runs == {1} and binary:
        p, test = mcnemar_exact(better, worse), "mcnemar_exact"
        va, vb = _per_instance(a).astype(bool), _per_instance(b).astype(bool)
        lo, hi = newcombe_paired(int((va & vb).sum()), better, worse, int((~va & ~vb).sum()), level=level)
        method = "newcombe_paired" if d.size else "undefined"
    else:
        scale = math.lcm(*runs) if binary else None
        p, test = sign_flip_pvalue(d, scale=scale, seed=seed)
        if d.size >= MIN_BOOTSTRAP_N:
            (lo, hi), method = bootstrap_mean_ci(d, n_boot=n_boot, seed=seed, level=level), "bootstrap_percentile"
        else:
            lo, hi, method = math.nan, math.nan, "undefined"
    return PairedDelta(float(d.mean()) if d.size else math.nan, lo, hi, p, test, int(d.size), better, worse,
                       method)


# ---- records level -----------------------------------------------------------------------------------

def is_null(v: Any) -> bool:
    """None, NaN or pandas' NA (nullable columns come back as any of them)."""
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def condition_values(schema: ArtifactSchema, records: pd.DataFrame) -> list[dict[str, Any]]:
    """The run's conditions, in the paper's order (values the paper does not have come after, sorted)."""
    if records.empty:
        return []
    combos = records[list(schema.condition)].drop_duplicates().to_dict("records")

    def key(row: dict[str, Any]) -> tuple:
        return tuple(order_key(tuple(schema.order.get(c, ())), row[c]) for c in schema.condition)

    return sorted(combos, key=key)


Denominators = Mapping[str, Sequence[str]]


def denominator(schema: ArtifactSchema, cond: dict[str, Any], instances: Sequence[str],
                denominators: Denominators | None) -> Sequence[str]:
    """The instances a condition is a rate over: its own list when the run declares one (conditions on
    different task sets, e.g. Table 5's languages), else every instance of the run."""
    if denominators:
        own = denominators.get(schema.condition_label(cond))
        if own is not None:
            return own
    return instances


def _select(records: pd.DataFrame, cond: dict[str, Any]) -> pd.DataFrame:
    mask = np.ones(len(records), dtype=bool)
    for c, v in cond.items():
        mask &= (records[c] == v).to_numpy()
    return records[mask]


def outcome_matrix(records: pd.DataFrame, cond: dict[str, Any], metric: Metric, instances: Sequence[str],
                   runs: int) -> tuple[np.ndarray, int, int]:
    """(instances x runs) 0/1 outcomes of one condition, with counts of invalid and missing entries.
    Missing records and null outcomes are 0 and counted as missing; invalid runs are 0 (as recorded)."""
    sub = _select(records, cond)
    pos = {iid: i for i, iid in enumerate(instances)}
    m = np.zeros((len(instances), runs))
    seen = np.zeros((len(instances), runs), dtype=bool)
    invalid = 0
    for rec in sub.to_dict("records"):
        i, r = pos.get(rec["instance_id"]), int(rec["run"])
        if i is None or not 0 <= r < runs:
            raise ValueError(f"record {rec['instance_id']} run {r} is outside the run's instances x runs")
        v = rec[metric.outcome]
        if is_null(v):
            continue
        m[i, r] = float(bool(v))
        seen[i, r] = True
        invalid += any(not is_null(rec.get(c)) and not bool(rec.get(c)) for c in metric.valid)
    return m, invalid, int((~seen).sum())


def summarize(schema: ArtifactSchema, records: pd.DataFrame, instances: Sequence[str], runs: int, *,
              n_boot: int = N_BOOT, seed: int = SEED, level: float = LEVEL,
              denominators: Denominators | None = None) -> pd.DataFrame:
    """summary.csv of a run: one row per condition x metric, values in percent with their bootstrap CI."""
    if schema.kind == "curve":
        return summarize_curve(records)
    rows = []
    for cond in condition_values(schema, records):
        ids = denominator(schema, cond, instances, denominators)
        for metric in schema.metrics:
            m, invalid, missing = outcome_matrix(records, cond, metric, ids, runs)
            lo, hi, method = rate_interval(m, level=level)
            value = float(_per_instance(m).mean()) if len(ids) else math.nan
            rows.append({**cond, "metric": metric.name, "value": _pct(value), "ci_low": _pct(lo),
                         "ci_high": _pct(hi), "ci_method": method, "n_instances": len(ids), "n_runs": runs,
                         "n_invalid": invalid, "n_missing": missing, "n_boot": n_boot, "seed": seed})
    return pd.DataFrame(rows, columns=[*schema.condition, *SUMMARY_COLUMNS])


def hoeffding_mean_ci(mean: float, n: int, bounds: tuple[float, float], *,
                      level: float = LEVEL) -> tuple[float, float]:
    """Hoeffding's interval of a mean of `n` independent values in `bounds`, clipped to `bounds`: valid at every n
    and never zero-width (n rollouts that all scored the same still leave the mean uncertain), unlike a percentile
    bootstrap or mean +/- sd at n = 2-5. Wide at small n, as it should be."""
    lo, hi = bounds
    if n <= 0 or is_null(mean):
        return (math.nan, math.nan)
    half = (hi - lo) * math.sqrt(math.log(2.0 / (1.0 - level)) / (2.0 * n))
    return (max(lo, mean - half), min(hi, mean + half))


CURVE_COLUMNS = ("step", "reward", "n", "ci_low", "ci_high", "ci_method", "reward_kept", "trained")


def curve_points(records: pd.DataFrame, bounds: tuple[float, float] | None = None) -> pd.DataFrame:
    """The one per-step series of a GRPO run (Figure 6b/6c, the learning-curve study, summary.csv all read it).

    `reward`: the mean over every offered rollout that has a reward (kept or dropped by DAPO; masked ones have
    none), NaN when none has (a gap); `n` those rollouts; `ci_low`/`ci_high`: its 95% Hoeffding interval within
    the reward's `bounds` (`hoeffding_mean_ci`; undefined without bounds); `reward_kept`: the mean over the kept
    groups' rollouts - what trained - NaN when no group was kept; `trained`: an optimizer update moved the
    policy at that step (a kept group, and the step not skipped). The kept mean alone would overstate a run:
    DAPO keeps the groups whose rewards differ, so it is not the policy's reward."""
    rows = []
    for r in records.sort_values("step").to_dict("records") if not records.empty else []:
        offered = r.get("reward_mean_offered")
        undefined = r.get("reward_mean_undefined")
        no_kept = r.get("reward_over") in ("offered", "none") or (not is_null(undefined) and bool(undefined))
        kept = math.nan if no_kept else r.get("reward_mean")
        mean = math.nan if is_null(offered) else float(offered)
        n = r.get("reward_n_offered")
        if is_null(n):        # runs written before the count: masked_share is masked / episodes, so this is exact
            n = 0 if is_null(r.get("episodes")) else round(r["episodes"] * (1.0 - (r.get("masked_share") or 0.0)))
        n = 0 if math.isnan(mean) else int(n)
        mean = math.nan if n == 0 else mean      # no rollout with a reward (verl writes 0.0 with n = 0)
        lo, hi = hoeffding_mean_ci(mean, n, bounds) if bounds and n else (math.nan, math.nan)
        trained = int(r.get("kept_groups") or 0) > 0 and not int(r.get("optimizer_steps_skipped") or 0)
        rows.append({"step": int(r["step"]), "reward": mean, "n": n, "ci_low": lo, "ci_high": hi,
                     "ci_method": "hoeffding" if not math.isnan(lo) else "undefined",
                     "reward_kept": math.nan if is_null(kept) else float(kept), "trained": bool(trained)})
    return pd.DataFrame(rows, columns=list(CURVE_COLUMNS))


def summarize_curve(records: pd.DataFrame) -> pd.DataFrame:
    """A training run's summary: steps; GRPO: first/last/max mean reward, mean masked share and group counts;
    SFT: first/last/min loss and first/last token accuracy.

    GRPO rewards are the curve's points (`curve_points`: the mean over every offered rollout with a reward), so
    summary.csv says what Figure 6 draws; a step without any reward is left out (all NaN: the value is NaN).
    `steps_trained`: steps with an optimizer update."""
    rows: list[tuple[str, float]] = []
    if not records.empty:
        r = records.sort_values("step")
        rows = [("n_steps", len(r)), ("first_step", r["step"].iloc[0]), ("last_step", r["step"].iloc[-1])]
        if "reward_mean" in r:     # a GRPO run
            points = curve_points(r)
            reward = points["reward"].dropna()
            first, last, top = (reward.iloc[0], reward.iloc[-1], reward.max()) if len(reward) else (math.nan,) * 3
            rows += [("steps_trained", points["trained"].sum()),
                     ("reward_mean_first", first), ("reward_mean_last", last), ("reward_mean_max", top),
                     ("masked_share_mean", r["masked_share"].mean()), ("kept_groups_mean", r["kept_groups"].mean()),
                     ("dropped_groups_mean", r["dropped_groups"].mean())]
        else:                      # an SFT run
            acc = r["mean_token_accuracy"].dropna()
            rows += [("loss_first", r["loss"].iloc[0]), ("loss_last", r["loss"].iloc[-1]), ("loss_min", r["loss"].min())]
            rows += [("token_accuracy_first", acc.iloc[0]), ("token_accuracy_last", acc.iloc[-1])] if len(acc) else []
    return pd.DataFrame([{"metric": k, "value": round(float(v), DECIMALS)} for k, v in rows],
                        columns=list(CURVE_SUMMARY_COLUMNS))


def _pct(x: float) -> float:
    return round(100.0 * x, DECIMALS) if not math.isnan(x) else math.nan


def within_label(cond: dict[str, Any]) -> str:
    """How deltas.csv names the fixed condition columns of a contrast ('all' when none)."""
    return ", ".join(f"{k}={v}" for k, v in cond.items()) or "all"


@dataclass(frozen=True)
class ContrastPair:
    """One Δ to compute: treatment (metric, condition) minus baseline (metric, condition)."""

    metric: str
    vary: str
    baseline: str
    treatment: str
    within: str
    baseline_metric: str
    baseline_cond: dict[str, Any]
    treatment_metric: str
    treatment_cond: dict[str, Any]

    def ids(self) -> dict[str, str]:
        return {"metric": self.metric, "vary": self.vary, "baseline": self.baseline, "treatment": self.treatment,
                "within": self.within}


def contrast_pairs(schema: ArtifactSchema, conds: Sequence[dict[str, Any]],
                   extra: Iterable[Any] = ()) -> list[ContrastPair]:
    """The schema's contrasts (plus `extra`) that a set of conditions allows, in a fixed order.
    Used for measured deltas and, on the paper's own conditions, for the reported differences."""
    out: list[ContrastPair] = []
    for ct in (*schema.contrasts, *extra):
        if ct.vary == "metric":
            for cond in conds:
                for tname in ct.treatments:
                    out.append(ContrastPair(tname, "metric", ct.baseline, tname, within_label(cond),
                                            ct.baseline, dict(cond), tname, dict(cond)))
            continue
        others = [c for c in schema.condition if c != ct.vary]
        groups: list[dict[str, Any]] = []
        for cond in conds:
            g = {c: cond[c] for c in others}
            if g not in groups:
                groups.append(g)
        metrics = list(ct.metrics) or [m.name for m in schema.metrics]
        for g in groups:
            present = [c[ct.vary] for c in conds if {k: c[k] for k in others} == g]
            if ct.baseline not in present:
                continue
            for t in [t for t in (ct.treatments or present) if t in present and t != ct.baseline]:
                for m in metrics:
                    out.append(ContrastPair(m, ct.vary, str(ct.baseline), str(t), within_label(g),
                                            m, {**g, ct.vary: ct.baseline}, m, {**g, ct.vary: t}))
    return out


def contrasts(schema: ArtifactSchema, records: pd.DataFrame, instances: Sequence[str], runs: int, *,
              extra: Iterable[Any] = (), n_boot: int = N_BOOT, seed: int = SEED,
              level: float = LEVEL, denominators: Denominators | None = None) -> pd.DataFrame:
    """deltas.csv of a run: the schema's paired contrasts (plus `extra`) that the run's conditions allow.
    A pair is compared on the same instances only: conditions with different denominators are not paired."""
    if schema.kind != "instance":
        return pd.DataFrame(columns=list(DELTA_COLUMNS))
    rows = []
    for pair in contrast_pairs(schema, condition_values(schema, records), extra):
        ids = denominator(schema, pair.baseline_cond, instances, denominators)
        if list(denominator(schema, pair.treatment_cond, instances, denominators)) != list(ids):
            continue
        base = outcome_matrix(records, pair.baseline_cond, schema.metric(pair.baseline_metric), ids, runs)[0]
        treat = outcome_matrix(records, pair.treatment_cond, schema.metric(pair.treatment_metric), ids, runs)[0]
        pdl = paired_delta(treat, base, n_boot=n_boot, seed=seed, level=level)
        rows.append({**pair.ids(), "delta": _pct(pdl.delta), "ci_low": _pct(pdl.ci_low),
                     "ci_high": _pct(pdl.ci_high), "ci_method": pdl.ci_method, "p_value": round(pdl.p_value, 6),
                     "test": pdl.test,
                     "n_instances": pdl.n_instances, "n_better": pdl.n_better, "n_worse": pdl.n_worse,
                     "n_boot": n_boot, "seed": seed})
    return pd.DataFrame(rows, columns=list(DELTA_COLUMNS))


__all__ = [
    "CI_METHODS",
    "CURVE_COLUMNS",
    "DECIMALS",
    "LEVEL",
    "MIN_BOOTSTRAP_N",
    "N_BOOT",
    "SEED",
    "ContrastPair",
    "PairedDelta",
    "bootstrap_mean_ci",
    "clopper_pearson",
    "condition_values",
    "contrast_pairs",
    "contrasts",
    "curve_points",
    "denominator",
    "hoeffding_mean_ci",
    "is_null",
    "mcnemar_exact",
    "newcombe_paired",
    "outcome_matrix",
    "paired_delta",
    "rate_interval",
    "sign_flip_pvalue",
    "summarize",
    "summarize_curve",
    "wilson",
    "within_label",
]
