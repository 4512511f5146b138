"""The service's Prometheus metrics, kept in memory and written in the text exposition format.

Counters restart at zero with the process, as Prometheus expects; the queue gauges are
read from the store at scrape time, so they survive restarts.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable

# Seconds; probes range from milliseconds (a log scan) to minutes (a replayed step).
DURATION_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0)

Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Labels, extra: Iterable[tuple[str, str]] = ()) -> str:
    pairs = list(labels) + list(extra)
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs) + "}"


class _Histogram:
    def __init__(self) -> None:
        self.buckets = [0] * len(DURATION_BUCKETS)
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.count += 1
        self.sum += value
        for i, bound in enumerate(DURATION_BUCKETS):
            if value <= bound:
                self.buckets[i] += 1


class ServiceMetrics:
    """Counters and histograms by name and labels; thread-safe."""

    HELP = {
        "triage_requests_total": ("counter", "Triage requests by source and what became of them."),
        "triage_http_rejected_total": ("counter", "Requests refused before any work, by reason."),
        "triage_triages_total": ("counter", "Finished triages by verdict."),
        "triage_partial_total": ("counter", "Triages that ran out of their time budget."),
        "triage_abandoned_total": ("counter", "Triages whose probe outran the budget and the grace period."),
        "triage_posts_total": ("counter", "Slack posts by kind and outcome."),
        "triage_probe_duration_seconds": ("histogram", "Probe run time by probe."),
        "triage_duration_seconds": ("histogram", "Whole-triage run time."),
    }

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[Labels, float]] = defaultdict(dict)
        self._histograms: dict[str, dict[Labels, _Histogram]] = defaultdict(dict)

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            series = self._counters[name]
            series[key] = series.get(key, 0.0) + amount

    def observe(self, name: str, value: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            series = self._histograms[name]
            if key not in series:
                series[key] = _Histogram()
            series[key].observe(value)

    def value(self, name: str, **labels: str) -> float:
        key = tuple(sorted(labels.items()))
        with self._lock:
            return self._counters.get(name, {}).get(key, 0.0)

    def render(self, gauges: dict[str, tuple[str, float]]) -> str:
        """The exposition text; `gauges` maps name -> (help, value) for values read at scrape time."""
        out: list[str] = []
        with self._lock:
            for name in sorted(set(self._counters) | set(self.HELP)):
                kind, help_text = self.HELP.get(name, ("counter", name))
                if kind != "counter":
                    continue
                out += [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
                for labels, value in sorted(self._counters.get(name, {}).items()):
                    out.append(f"{name}{_labels(labels)} {value:g}")
            for name in sorted(set(self._histograms) | {n for n, (k, _) in self.HELP.items() if k == "histogram"}):
                help_text = self.HELP.get(name, ("histogram", name))[1]
                out += [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
                for labels, h in sorted(self._histograms.get(name, {}).items()):
                    for bound, n in zip(DURATION_BUCKETS, h.buckets):
                        out.append(f"{name}_bucket{_labels(labels, [('le', f'{bound:g}')])} {n}")
                    out.append(f"{name}_bucket{_labels(labels, [('le', '+Inf')])} {h.count}")
                    out.append(f"{name}_sum{_labels(labels)} {h.sum:.6f}")
                    out.append(f"{name}_count{_labels(labels)} {h.count}")
        for name, (help_text, value) in sorted(gauges.items()):
            out += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name} {value:g}"]
        return "\n".join(out) + "\n"


def labelled_gauges(name: str, help_text: str, series: Iterable[tuple[dict[str, str], float]]) -> str:
    """One gauge family with labels, in the exposition format (values read from a store at scrape time)."""
    out = [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
    for labels, value in series:
        out.append(f"{name}{_labels(tuple(sorted(labels.items())))} {value:g}")
    return "\n".join(out) + "\n"
