"""When to stop measuring a kernel's candidates: the stop rule of top_k="auto".

The candidates are measured in the model's order. Their scores are standardised over
the model's whole order (mean 0, standard deviation 1: tgraph.triton does it), and after
each measurement calibrated to what was measured: log runtime = a + b x score + noise, a
Bayesian linear fit over the measured candidates (b starts from `slope`, the log runtime
one unit of score is worth where the model was checked, and follows the measurements as
they come; the noise starts from `noise` and widens when the measurements scatter more
around the fit). Every candidate not measured yet then has a predictive distribution of
its log runtime; the rule sums, over them, the probability that it would beat the
fastest measured by more than `tolerance`. Measuring stops when that expected count of
better candidates falls below `epsilon`, or after `max_k`.

So a model whose order the measurements confirm (each one slower, as the scores said)
stops after a few, and one they contradict (a later candidate faster, or all alike) keeps
going: a flat or inverted fit leaves every remaining candidate a real chance.

Pure arithmetic on floats; no Triton, no server.
"""
import math
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class StopRule:
    """epsilon: the expected number of unmeasured candidates better than the fastest
    measured (by more than tolerance) at which measuring stops. tolerance: the relative
    gain not worth a measurement (the timing's own noise, 1%). slope: the prior log runtime
    per unit of score; slope_sd its uncertainty. noise: the prior standard deviation of a
    candidate's log runtime around the fit, noise_weight how many measurements' worth it
    counts. min_k: measured before the rule is asked at all."""
    epsilon: float = 0.3
    tolerance: float = 0.01
    slope: float = 0.5
    slope_sd: float = 0.2
    noise: float = 0.1
    noise_weight: float = 4.0
    min_k: int = 2

    def __post_init__(self):
        for name in ("tolerance", "slope_sd", "noise", "noise_weight"):
            if not getattr(self, name) > 0:
                raise ValueError(f"StopRule.{name}: a number > 0, got {getattr(self, name)!r}")
        if not isinstance(self.min_k, int) or self.min_k < 1:
            raise ValueError(f"StopRule.min_k: a count >= 1, got {self.min_k!r}")

    def expected_better(self, measured_scores: Sequence[float], measured_ms: Sequence[float],
                        other_scores: Sequence[float]) -> float:
        """The expected number of `other_scores`' candidates faster than the fastest of
        measured_ms by more than tolerance (scores: lower is faster)."""
        if not measured_ms or not other_scores:
            return 0.0 if measured_ms else float(len(other_scores))
        ys = [math.log(t) for t in measured_ms]
        zs = list(measured_scores)
        n = len(ys)
        # Centred on the measured scores' mean; with the slope's prior as one more
        # observation, b = (Szy + slope/v) / (Szz + 1/v), v = slope_sd^2 / sigma^2.
        zbar, ybar = sum(zs) / n, sum(ys) / n
        szz = sum((z - zbar) ** 2 for z in zs)
        szy = sum((z - zbar) * (y - ybar) for z, y in zip(zs, ys))
        sigma2 = self.noise ** 2
        for _ in range(2):  # the noise and the slope, each given the other
            prec_b = szz / sigma2 + 1.0 / self.slope_sd ** 2
            b = (szy / sigma2 + self.slope / self.slope_sd ** 2) / prec_b
            rss = sum((y - ybar - b * (z - zbar)) ** 2 for z, y in zip(zs, ys))
            sigma2 = (self.noise_weight * self.noise ** 2 + rss) / (self.noise_weight + n)
        var_b = sigma2 / (szz + sigma2 / self.slope_sd ** 2)  # the slope's posterior variance, final noise
        best = min(ys) - math.log1p(self.tolerance)
        total = 0.0
        for z in other_scores:
            mean = ybar + b * (z - zbar)
            sd = math.sqrt(sigma2 * (1 + 1.0 / n) + var_b * (z - zbar) ** 2)
            total += 0.5 * math.erfc((mean - best) / (sd * math.sqrt(2)))
        return total

    def stop(self, measured_scores: Sequence[float], measured_ms: Sequence[float],
             other_scores: Sequence[float]) -> bool:
        """Whether to stop measuring: min_k measured and the expected count below epsilon."""
        if len(measured_ms) < self.min_k:
            return not other_scores
        return self.expected_better(measured_scores, measured_ms, other_scores) < self.epsilon
