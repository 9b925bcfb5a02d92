"""The fixed-rate scheduler and its timing statistics.

Absolute deadlines on a monotonic clock: the k-th cycle is due at t0 + k·T. The loop sleeps
to just before the deadline and spins the rest (sleep alone overshoots by ~0.1 ms here), runs
the cycle, and if a cycle ends past the next deadline it *skips* the missed deadlines and
counts them — it never catches up in bursts. In lockstep simulation it runs the same code
without waiting (the simulated bus keeps time); a cycle whose compute time exceeds the period
still counts as an overrun.

Optional real-time set-up (SCHED_FIFO, CPU affinity, mlockall, gc frozen and disabled, every
CPU kept awake) — each reported as in effect or unavailable, never a crash.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import math
import os
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from exo_rt.jit import njit


class Histogram:
    """Counts of non-negative values (µs) in log-linear buckets: a fixed size whatever the
    number of values, so the percentiles of an 8-hour run cost the memory a 10-second run's do.

    Each octave [2^(e-1), 2^e) µs from 2^``LOW_EXP`` to 2^``HIGH_EXP`` µs is cut in ``SUB``
    equal buckets, so a bucket is at most 1/``SUB`` (0.012 %) of its values wide: 0.0078 µs
    around 60 µs, 0.12 µs around 1 ms. A value below 2^``LOW_EXP`` µs (0.0625 µs) counts in a
    bucket of its own, one at or above 2^``HIGH_EXP`` µs (1.05 s) in another. The exact minimum
    and maximum are kept beside the counts (786 KB a histogram; a count holds 49 days at 1 kHz).

    :meth:`percentile` interpolates between order statistics as ``numpy.percentile`` does,
    each order statistic taken as its bucket's middle clamped to [min, max] (the smallest and
    largest exactly): within half a bucket's width of the exact figure — 0.004 µs at 60 µs,
    0.06 µs at 1 ms, within the 0.1 µs the summary is read to (below 0.0625 µs: within
    0.0625 µs; above 1.05 s: the maximum) — and exact where every value is the same (a
    lockstep run's zero wake latency). ``max`` is exact.
    """

    SUB = 8192
    LOW_EXP = -4
    HIGH_EXP = 20

    def __init__(self) -> None:
        self.counts = np.zeros((self.HIGH_EXP - self.LOW_EXP) * self.SUB + 2, np.uint32)
        self._low = 2.0 ** self.LOW_EXP
        self.n = 0
        self.min = math.inf
        self.max = -math.inf

    def add(self, v: float) -> None:
        """Count one value (µs): a few float operations (~0.4 µs), no array allocated."""
        if not v >= self._low:  # (NaN too)
            i = 0
        else:
            m, e = math.frexp(v)  # v = m·2^e, 0.5 ≤ m < 1
            if e > self.HIGH_EXP:
                i = len(self.counts) - 1
            else:
                i = (e - self.LOW_EXP - 1) * self.SUB + int((m - 0.5) * (2 * self.SUB)) + 1
        self.counts[i] += 1
        self.n += 1
        if v < self.min:
            self.min = v
        if v > self.max:
            self.max = v

    def add_many(self, v: np.ndarray) -> None:
        """Count the values ``v`` (µs) as :meth:`add` does, in one compiled call
        (:func:`count_block`): nothing allocated."""
        if len(v):
            lo, hi = count_block(self.counts, v, self._low, self.SUB, self.LOW_EXP,
                                 self.HIGH_EXP)
            self.n += len(v)
            self.min = min(self.min, lo)
            self.max = max(self.max, hi)

    def _middle(self, i: int) -> float:
        """The middle of bucket ``i`` (µs), clamped to the values seen."""
        if i == 0:
            mid = 0.5 * self._low
        elif i == len(self.counts) - 1:
            mid = self.max
        else:
            e, j = divmod(i - 1, self.SUB)
            lo = 2.0 ** (e + self.LOW_EXP)  # the octave's lower end
            mid = lo + (j + 0.5) * lo / self.SUB
        return min(max(mid, self.min), self.max)

    def percentile(self, p: float) -> float:
        """The ``p``-th percentile (µs) of the values counted; 0.0 when none were."""
        if self.n == 0:
            return 0.0
        rank = p / 100.0 * (self.n - 1)  # numpy.percentile's linear method
        lo = int(math.floor(rank))
        hi = min(lo + 1, self.n - 1)
        cum = np.cumsum(self.counts, dtype=np.int64)

        def order(r: int) -> float:  # the r-th smallest value (0-based)
            if r == 0:
                return float(self.min)
            if r == self.n - 1:
                return float(self.max)
            return self._middle(int(np.searchsorted(cum, r, side="right")))

        a, b = order(lo), order(hi)
        return a + (b - a) * (rank - lo)

    def summary(self) -> dict:
        """p50, p99, p999 and max (µs); zeros when nothing was counted."""
        if self.n == 0:
            return {"p50": 0.0, "p99": 0.0, "p999": 0.0, "max": 0.0}
        return {"p50": self.percentile(50), "p99": self.percentile(99),
                "p999": self.percentile(99.9), "max": float(self.max)}


@njit(cache=True)
def count_block(counts, v, low, sub, low_exp, high_exp):
    """The values ``v`` (µs) into a :class:`Histogram`'s ``counts`` (its buckets, as
    :meth:`Histogram.add`); returns their (min, max), NaN ignored (inf, −inf when all are)."""
    top = counts.shape[0] - 1
    lo, hi = math.inf, -math.inf
    for x in v:
        if not x >= low:  # (NaN too)
            i = 0
        else:
            m, e = math.frexp(x)  # x = m·2^e, 0.5 ≤ m < 1
            if e > high_exp:
                i = top
            else:
                i = (e - low_exp - 1) * sub + int((m - 0.5) * (2 * sub)) + 1
        counts[i] += 1
        if x < lo:
            lo = x
        if x > hi:
            hi = x
    return lo, hi


class TimingStats:
    """Per-cycle wake latency, compute time and period (µs) as fixed-size histograms
    (:class:`Histogram`): memory does not grow with the run.

    A cycle only stores its three figures in a preallocated block (three float stores); every
    ``BLOCK`` cycles the block is counted into the histograms in three compiled calls
    (:func:`count_block`) — counting each value in Python as it came cost 1.4 µs of the
    loop's time a cycle (``python tools/bench_timing_stats.py``)."""

    BLOCK = 128

    def __init__(self) -> None:
        self.wake = Histogram()
        self.compute = Histogram()
        self.period = Histogram()  # from the second cycle: the first has no period before it
        self.n = 0
        self.overruns = 0
        self.last_compute_us = 0.0  # the latest cycle's compute time (the next cycle records it)
        self._block = np.zeros((3, self.BLOCK))  # wake, compute, period of uncounted cycles
        self._k = 0  # cycles in the block

    def add(self, wake: float, compute: float, period: float) -> None:
        b, k = self._block, self._k
        b[0, k] = wake
        b[1, k] = compute
        b[2, k] = period
        self._k = k + 1
        self.n += 1
        self.last_compute_us = compute
        if self._k == self.BLOCK:
            self.count()

    def count(self) -> None:
        """The block's cycles into the histograms (the run's first cycle has no period)."""
        k = self._k
        if not k:
            return
        self.wake.add_many(self._block[0, :k])
        self.compute.add_many(self._block[1, :k])
        first = 1 if self.period.n == 0 and self.n == k else 0
        self.period.add_many(self._block[2, first:k])
        self._k = 0

    def warm_up(self) -> None:
        """Compile :func:`count_block` (before READY: never inside the loop)."""
        count_block(np.zeros(4, np.uint32), np.ones(1), 0.5, 1, 0, 2)

    def summary(self) -> dict:
        """The ``timing`` block of summary.json."""
        self.count()
        return {"wake_latency_us": self.wake.summary(),
                "compute_us": self.compute.summary(),
                "period_us": self.period.summary(),
                "overruns": int(self.overruns)}


class Scheduler:
    """Run ``cycle(k)`` every ``period`` s on absolute deadlines (or back to back in lockstep).

    ``clock``, ``sleep`` and ``spin_s`` are injectable so the deadline logic is testable with a
    fake clock. ``cycle`` returns False to stop. Nothing it keeps grows with the run: timing as
    histograms (:class:`TimingStats`), and the cycle indices after which deadlines were
    skipped (``deadlines_missed``) for the first ``capacity`` overruns only — every one is
    counted in ``stats.overruns``.
    """

    def __init__(self, period: float, *, lockstep: bool = False, clock=time.monotonic,
                 sleep=time.sleep, spin_s: float = 2e-4, capacity: int = 1024) -> None:
        self.period = period
        self.lockstep = lockstep
        self.clock = clock
        self.sleep = sleep
        self.spin_s = spin_s
        self.stats = TimingStats()
        self.capacity = capacity
        self.deadlines_missed: list[int] = []  # cycle indices after which deadlines were skipped
        self.wake_us = 0.0  # this cycle's wake latency, readable by the cycle
        self.late = False  # the previous cycle ended past the next deadline (an overrun)
        # lockstep paced to the wall clock (a live view): each cycle waits for its instant,
        # k periods after the start, the simulation still stepped by the cycles alone
        self.paced = False

    def instant(self, k: int) -> float:
        """Now, on the bus's clock, for cycle ``k`` (e.g. when its SYNC went out): the
        monotonic clock in real time; k·T in lockstep, where the simulated bus keeps time."""
        return k * self.period if self.lockstep else self.clock()

    def run(self, cycle: Callable[[int], bool], max_cycles: int | None = None) -> int:
        """Run until ``cycle`` returns False or ``max_cycles``; returns the cycles run."""
        clock, period = self.clock, self.period
        start = clock()
        deadline = start
        last_wake = start
        k = 0
        while max_cycles is None or k < max_cycles:
            if self.paced:
                remaining = deadline - clock()
                if remaining > 0:
                    self.sleep(remaining)
            if not self.lockstep:
                remaining = deadline - clock()
                if remaining > self.spin_s:
                    self.sleep(remaining - self.spin_s)
                while clock() < deadline:
                    pass
            wake = clock()
            latency = (wake - deadline) * 1e6 if not self.lockstep else 0.0
            self.wake_us = latency
            go = cycle(k)
            done = clock()
            self.stats.add(latency, (done - wake) * 1e6, (wake - last_wake) * 1e6)
            last_wake = wake
            k += 1
            if not go:
                break
            deadline += period
            self.late = False
            if self.lockstep:
                if done - wake > period:  # the cycle alone took longer than a period
                    self.stats.overruns += 1
                    if len(self.deadlines_missed) < self.capacity:
                        self.deadlines_missed.append(k)
                    self.late = True
            elif done > deadline:
                missed = int((done - deadline) // period) + 1  # skip, never burst to catch up
                self.stats.overruns += missed
                if len(self.deadlines_missed) < self.capacity:
                    self.deadlines_missed.append(k)
                deadline += missed * period
                self.late = True
        return k


@dataclass
class RealtimeSetup:
    """What the real-time set-up achieved: each item 'in effect' or why not."""

    items: dict[str, str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        return [f"{k}: {v}" for k, v in self.items.items()]


def lock_all_memory(future_on_fault: bool = False) -> str:
    """mlockall(MCL_CURRENT | MCL_FUTURE): no page of this process is reclaimed (code pages
    of the interpreter and its libraries included — a reclaimed page is a disk read, ms, on
    the next touch). "in effect", or why not.

    ``future_on_fault``: then mlockall(MCL_FUTURE | MCL_ONFAULT) (Linux ≥ 4.4): what is mapped
    from now on is locked page by page as it is first touched, not faulted in whole at the
    mapping — for a loop that maps a block while it serves (the simulation attaching the
    recording's 3.4 MB truth ring: 2.0–2.7 ms in one turn of its loop, faulted in at once)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        mcl_current, mcl_future, mcl_onfault = 1, 2, 4
        if libc.mlockall(mcl_current | mcl_future) != 0:
            return (f"not available (errno {ctypes.get_errno()}: raise LimitMEMLOCK; see "
                    "docs/deploy.md)")
        if future_on_fault and libc.mlockall(mcl_future | mcl_onfault) != 0:
            return f"in effect (later mappings faulted in whole: errno {ctypes.get_errno()})"
        return "in effect"
    except OSError as exc:
        return f"not available ({exc})"


CPU_LATENCY_DEVICE = "/dev/cpu_dma_latency"


def hold_cpu_latency(us: int) -> str:
    """Ask the kernel's power management (PM QoS) that no CPU take longer than ``us`` µs to
    wake from idle, for as long as this process holds the request (released by
    :func:`realtime_teardown` or at exit). 0 keeps every CPU out of its sleep states: a
    deadline's timer, or a frame for the drives' process, then finds its CPU awake. An idle
    x86 CPU otherwise takes up to ~100 µs to leave a deep C-state, and an idle virtual CPU is
    handed back to its host, which may take far longer to resume it (docs/performance.md,
    "Keeping the CPUs awake"). Costs power while the loop runs. "in effect", or why not."""
    try:
        fd = os.open(CPU_LATENCY_DEVICE, os.O_WRONLY)
    except OSError as exc:
        return (f"not available ({exc.strerror}: {CPU_LATENCY_DEVICE} is root's; see "
                "docs/deploy.md)")
    try:
        os.write(fd, struct.pack("i", int(us)))
    except OSError as exc:
        os.close(fd)
        return f"not available ({exc.strerror})"
    _SAVED["latency_fd"] = fd
    return f"in effect (every CPU wakes within {int(us)} µs while running)"


def last_cpu() -> int | None:
    """The highest-numbered CPU this process may run on (the control thread's default)."""
    try:
        return max(os.sched_getaffinity(0))
    except (AttributeError, OSError, ValueError):
        return None


def take_fifo(priority: int) -> str:
    """Make the calling thread SCHED_FIFO at ``priority`` (with SCHED_RESET_ON_FORK: nothing
    it starts inherits the policy). "in effect (…)", or why not: the thread then keeps its
    policy (SCHED_OTHER as started)."""
    try:
        policy = os.SCHED_FIFO | getattr(os, "SCHED_RESET_ON_FORK", 0)
        os.sched_setscheduler(0, policy, os.sched_param(priority))
        return f"in effect (priority {priority}, reset on fork)"
    except (PermissionError, OSError, AttributeError) as exc:
        return (f"not available ({exc.__class__.__name__}: raise LimitRTPRIO or run with "
                "CAP_SYS_NICE; see docs/deploy.md)")


def realtime_setup(priority: int = 80, cpu: int | None = None, lock_memory: bool = True,
                   freeze_gc: bool = True, cpu_latency_us: int | None = None) -> RealtimeSetup:
    """Make the CALLING thread the control thread: SCHED_FIFO (with SCHED_RESET_ON_FORK, so a
    thread or process started from it later runs SCHED_OTHER, never inheriting the real-time
    policy), pinned to ``cpu``; mlockall; a frozen, disabled gc; with ``cpu_latency_us``, every
    CPU's wake-up from idle bounded (:func:`hold_cpu_latency`). Each reported as in effect or
    why not. :func:`realtime_teardown` restores what it found.
    """
    out = RealtimeSetup()
    try:
        _SAVED["policy"] = (os.sched_getscheduler(0), os.sched_getparam(0))
        _SAVED["affinity"] = os.sched_getaffinity(0)
    except (OSError, AttributeError):
        pass
    out.items["SCHED_FIFO"] = take_fifo(priority)
    if cpu is not None:
        try:
            os.sched_setaffinity(0, {cpu})
            out.items["CPU affinity"] = f"in effect (CPU {cpu})"
        except (OSError, AttributeError) as exc:
            out.items["CPU affinity"] = f"not available ({exc})"
    if lock_memory:
        out.items["mlockall"] = lock_all_memory()
    if cpu_latency_us is not None:
        out.items["CPU wake-up latency"] = hold_cpu_latency(cpu_latency_us)
    if freeze_gc:
        gc.collect()
        gc.freeze()
        gc.disable()
        out.items["gc"] = "frozen and disabled while running"
    # helper threads (log writers) hand the GIL back after 100 µs, not Python's 5 ms
    _SAVED["switch"] = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    out.items["GIL switch interval"] = "in effect (100 µs while running)"
    out.items["machine"] = machine_kind()
    return out


def machine_kind(cpuinfo: str = "/proc/cpuinfo",
                 hypervisor: str = "/sys/hypervisor/type") -> str:
    """Whether this is a virtual machine, for the set-up report: a VM's host can hold a virtual
    CPU for milliseconds, which no set-up inside it prevents (docs/performance.md measures
    such holds with ``tools/bench_machine.py``). Seen from the x86 CPU flag ``hypervisor`` or
    the kernel's ``/sys/hypervisor/type`` (Xen, and others on other architectures)."""
    seen = ""
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags") and " hypervisor" in line:
                    seen = "the CPU's hypervisor flag"
                    break
    except OSError:
        pass
    if not seen:
        try:
            with open(hypervisor, encoding="ascii", errors="replace") as f:
                kind = f.read().strip()
            if kind:
                seen = f"/sys/hypervisor/type: {kind}"
        except OSError:
            pass
    if seen:
        return (f"a virtual machine ({seen}): its host can hold a CPU for ms, which no set-up "
                "here prevents; measure it with tools/bench_machine.py (docs/performance.md)")
    return "no hypervisor seen"


_SAVED: dict = {}


def realtime_teardown() -> None:
    """Re-enable the garbage collector; restore the scheduling policy and CPU affinity; let
    the CPUs sleep again."""
    if "latency_fd" in _SAVED:
        os.close(_SAVED.pop("latency_fd"))  # closing withdraws the PM QoS request
    gc.enable()
    gc.unfreeze()
    if "switch" in _SAVED:
        sys.setswitchinterval(_SAVED.pop("switch"))
    try:
        if "policy" in _SAVED:
            policy, param = _SAVED.pop("policy")
            os.sched_setscheduler(0, policy, param)
        if "affinity" in _SAVED:
            os.sched_setaffinity(0, _SAVED.pop("affinity"))
    except (OSError, AttributeError):
        pass
