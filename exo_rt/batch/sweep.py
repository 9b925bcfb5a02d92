"""Gain sweeps in model-in-the-loop simulation (``exo-rt sweep``, docs/scale.md).

The grid is the product of every ``--grid`` key's values; each grid point runs against every
controller-model error (the controller's rigid model with its masses and inertias × e) and
every wearer (the plant's wearer segments of that body mass), one task each
(:func:`sweep_task`, :func:`exo_rt.sim.mil.run_mil` inside njit) on the local or Ray engine.

Grid keys (``--grid KEY=VALUES,KEY=VALUES…``):

- ``GAIN`` (a controller-file gain: ``kp``, ``kd``, ``ki``, …): a *factor* on that gain of every
  joint, 1 being the controller file's value — ``kp=0.5:2:5`` tries 0.5×, 0.875×, … 2× the
  file's kp on the hip and on the knee;
- ``JOINT.GAIN`` (``hip.kp``): that joint's gain itself, in the file's units (computed torque:
  kp in 1/s², kd in 1/s; PID: N·m/rad, N·m·s/rad).

VALUES is ``LO:HI:N`` (N values evenly from LO to HI, both included) or ``V1/V2/…``.

Per grid point: the worst (over model errors and wearers) and the mean of the tracking RMS
error (deg, over both time and joints), the peak commanded current (A) and the saturation (the
fraction of control cycles with a joint's command at its current limit). The best point has
the lowest worst-case RMS among those that saturate at most ``max_saturation`` of the time.
The controller file's own gains are always run too (as the grid point at factor 1, or as an
extra point), so the best point is compared with the shipped one.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import json
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from exo_rt.errors import ConfigError, ExoError, Where

SHIPPED = "shipped"


@dataclass(frozen=True)
class GridKey:
    """One grid axis: the gain (a controller-file key), the joint (None: a factor on every
    joint's gain) and its values."""

    text: str
    gain: str
    joint: str | None
    values: tuple[float, ...]


def axis_label(key: GridKey) -> str:
    """A plot's label for a grid axis, with its unit: a factor on every joint's gain (``kp``:
    × the file's value), or one joint's gain in the controller file's own unit."""
    if key.joint is None:
        return f"{key.text} (× the controller file's)"
    return f"{key.text} (the controller file's unit)"


def _values(text: str, key: str) -> tuple[float, ...]:
    try:
        if ":" in text:
            lo, hi, n = text.split(":")
            count = int(n)
            if count < 1:
                raise ValueError
            return tuple(float(v) for v in np.linspace(float(lo), float(hi), count))
        return tuple(float(v) for v in text.split("/"))
    except ValueError:
        raise ConfigError(f"grid key '{key}': cannot read the values '{text}'",
                          Where("--grid", 0, key),
                          "give LO:HI:N (e.g. 0.5:2:5) or V1/V2/… (e.g. 800/1600/3200)") from None


def parse_grid(text: str, joint_names, gain_keys) -> list[GridKey]:
    """``kp=0.5:2:5,hip.kd=40/80`` → grid keys, checked against the robot's joints and the
    controller file's gain names."""
    from exo_rt.yamlio import did_you_mean

    keys = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, sep, vals = item.partition("=")
        if not sep or not vals:
            raise ConfigError(f"grid item '{item}' has no values", Where("--grid"),
                              "write KEY=LO:HI:N or KEY=V1/V2/…, e.g. kp=0.5:2:5")
        joint, _, gain = name.rpartition(".")
        if gain not in gain_keys:
            raise ConfigError(f"unknown gain '{gain}' in the grid", Where("--grid", 0, name),
                              did_you_mean(gain, list(gain_keys))
                              or f"use one of {', '.join(gain_keys)}")
        if joint and joint not in joint_names:
            raise ConfigError(f"unknown joint '{joint}' in the grid", Where("--grid", 0, name),
                              did_you_mean(joint, list(joint_names))
                              or f"the robot's joints are {', '.join(joint_names)}")
        values = _values(vals, name)
        if any(v < 0 or not np.isfinite(v) for v in values):
            raise ConfigError(f"grid key '{name}': gains and factors are ≥ 0",
                              Where("--grid", 0, name), "give non-negative values")
        keys.append(GridKey(name, gain, joint or None, values))
    if not keys:
        raise ConfigError("the grid is empty", Where("--grid"), "give e.g. kp=0.5:2:5,kd=0.5:2:5")
    if len({k.text for k in keys}) < len(keys):
        raise ConfigError("a grid key is given twice", Where("--grid"), "give each key once")
    return keys


def parse_list(text: str, what: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ConfigError(f"cannot read {what} '{text}'", None,
                          "give comma-separated numbers, e.g. 0.8,1.0,1.2") from None
    if not values or any(v <= 0 for v in values):
        raise ConfigError(f"{what} must be positive numbers", None, "e.g. 0.8,1.0,1.2")
    return values


def load_wearers(path: str | Path | None) -> list[dict]:
    """Wearers from a YAML file ``wearers: [{name, mass (kg), stiffness (N·m/rad), damping
    (N·m·s/rad)}, …]``; no file: the robot file's own wearer, passive."""
    if path is None:
        return [{"name": "robot file's", "mass": None, "stiffness": 0.0, "damping": 0.0}]
    import yaml

    where = Where(str(path))
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read the wearers file ({exc.strerror})", where,
                          "give a YAML file with wearers: [{name, mass}, …]") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"the wearers file is not YAML ({exc})", where,
                          "fix its syntax") from None
    items = doc.get("wearers") if isinstance(doc, dict) else None
    if not isinstance(items, list) or not items:
        raise ConfigError("no 'wearers' list", Where(str(path), 1, "wearers"),
                          "write wearers: [{name: light, mass: 55}, {name: heavy, mass: 95}]")
    out = []
    for i, w in enumerate(items):
        key = f"wearers[{i}]"
        if not isinstance(w, dict) or "mass" not in w:
            raise ConfigError("a wearer needs its mass (kg)", Where(str(path), 0, key),
                              "write {name: NAME, mass: KG}")
        unknown = set(w) - {"name", "mass", "stiffness", "damping"}
        if unknown:
            raise ConfigError(f"unknown key(s) {', '.join(sorted(unknown))}",
                              Where(str(path), 0, key), "use name, mass, stiffness, damping")
        try:
            mass = float(w["mass"])
            stiff, damp = float(w.get("stiffness", 0.0)), float(w.get("damping", 0.0))
        except (TypeError, ValueError):
            raise ConfigError("mass, stiffness and damping are numbers",
                              Where(str(path), 0, key), "e.g. {mass: 75, stiffness: 20}") from None
        if not 30.0 <= mass <= 200.0 or stiff < 0 or damp < 0:
            raise ConfigError(f"wearer mass {mass} kg outside 30–200 kg, or a negative gain",
                              Where(str(path), 0, key), "give an adult's mass, gains ≥ 0")
        out.append({"name": str(w.get("name", f"wearer{i}")), "mass": mass,
                    "stiffness": stiff, "damping": damp})
    return out


def resolve_config(config: str | Path, robot: str | Path | None) -> tuple[Path, Path]:
    """(controller file, robot file) of CONFIG: a controller file (the robot: ``robot`` or the
    shipped leg), a controller name in the shipped configs, or a top config naming both."""
    import yaml

    from exo_rt.resources import default_config

    path = Path(config)
    if not path.suffix:
        path = default_config().parent / "controllers" / f"{config}.yaml"
    if not path.exists():
        raise ConfigError(f"no such controller or top config '{config}'", None,
                          "give a controller file, a name in configs/controllers/ or a top "
                          "config (configs/exo_leg.yaml)")
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        doc = None  # the loader says what is wrong
    if isinstance(doc, dict) and "controller" in doc and "robot" in doc:
        return path.parent / doc["controller"], Path(robot) if robot else path.parent / doc[
            "robot"]
    return path, Path(robot) if robot else default_config().parent / "robots" / "exo_leg.yaml"


def default_out(config: str | Path) -> Path:
    """Where a sweep's table and heat maps go without ``--out``: beside the runs, as
    ``exo-rt run`` puts them — ``<runs>/sweep-<controller>-<date-time>/``, with <runs> the top
    config's ``logging.runs`` (for a controller file or name: the shipped default config's),
    relative to the folder above the config's (:func:`exo_rt.resources.runs_root`)."""
    import datetime

    import yaml

    from exo_rt.resources import default_config, runs_root

    controller, _ = resolve_config(config, None)
    top = Path(config)
    doc = None
    for candidate in (top, default_config()):
        try:
            doc = yaml.safe_load(candidate.read_text()) if candidate.suffix else None
        except (OSError, yaml.YAMLError):
            doc = None
        if isinstance(doc, dict) and "controller" in doc and "robot" in doc:
            top = candidate
            break
    logging = doc.get("logging") if isinstance(doc, dict) else None
    runs = logging.get("runs", "runs") if isinstance(logging, dict) else "runs"
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return runs_root(top) / str(runs) / f"sweep-{controller.stem}-{stamp}"


# ----------------------------------------------------------------------------- the task
def saturation_fraction(result, current_limit: np.ndarray) -> float:
    """Fraction of the control cycles in which any joint's commanded current is at its limit
    (within 0.1 %): how often the law asks for more than the drives give. (Kept out of
    exo_rt/sim/mil.py, a kernel module whose edits start a fresh numba cache.)"""
    cur = np.abs(result.column(2))
    lim = np.asarray(current_limit, float)
    at = (cur >= 0.999 * lim) & (lim > 0.0)
    return float(np.mean(np.any(at, axis=1))) if len(cur) else 0.0


def _plant_robot(robot: str, wearer: dict):
    from exo_rt.model import load_mechanism

    if wearer.get("mass") is None:
        return load_mechanism(robot)
    if Path(robot).suffix not in (".yaml", ".yml"):
        raise ConfigError("wearers need a robot YAML file (its wearer block)", Where(robot),
                          "give --robot a robot .yaml with a wearer, or leave --wearers out")
    from exo_rt.model.anthropometry import DE_LEVA
    from exo_rt.model.robot_yaml import load_robot_yaml

    segments = {s: {"mass": frac[0] * wearer["mass"]} for s, frac in DE_LEVA["male"].items()}
    return load_robot_yaml(robot, segments=segments)


def sweep_task(task: dict) -> dict:
    """One grid point × model error × wearer in model-in-the-loop (the task function of both
    engines). Returns its figures, or ``status: failed`` with the cause."""
    from exo_rt.control.config import load_controller
    from exo_rt.model import load_mechanism
    from exo_rt.sim.mil import run_mil

    t0 = time.perf_counter()
    out = {"point": task["point"], "model_error": task["model_error"],
           "wearer": task["wearer"]["name"], "status": "ok", "error": None}
    try:
        nominal = load_mechanism(task["robot"])
        plant = _plant_robot(task["robot"], task["wearer"])
        cfg = load_controller(task["controller"], nominal)
        gains = cfg.gains.copy()
        for name, values in task["gains"].items():  # {field: one value per joint}
            gains[name] = values
        cfg = dataclasses.replace(cfg, gains=gains)
        e = task["model_error"]
        model = dataclasses.replace(nominal, mass=nominal.mass * e, inertia=nominal.inertia * e)
        exo = None
        if Path(task["robot"]).suffix in (".yaml", ".yml"):
            alone = load_mechanism(task["robot"], wearer=False)
            exo = dataclasses.replace(alone, mass=alone.mass * e, inertia=alone.inertia * e)
        w = task["wearer"]
        r = run_mil(plant, cfg, cycles=task["cycles"], model=model, exo_model=exo,
                    wearer_gains=(w["stiffness"], w["damping"]))
        rms = float(np.sqrt(np.mean(r.rms_error_deg ** 2)))
        out.update(rms_deg=rms if np.isfinite(rms) else float("inf"),
                   joint_rms_deg=[float(x) for x in r.rms_error_deg],
                   max_error_deg=float(np.max(r.max_error_deg)),
                   peak_current_A=float(np.max(r.max_abs_current_A)),
                   saturation=saturation_fraction(r, cfg.current_limit))
    except ExoError as err:
        out.update(status="failed", error=str(err))
    except Exception as exc:
        out.update(status="failed", error=f"{type(exc).__name__}: {exc}",
                   traceback=traceback.format_exc())
    out["wall_s"] = time.perf_counter() - t0
    return out


def _crash(task: dict, cause: str) -> dict:
    return {"point": task["point"], "model_error": task["model_error"],
            "wearer": task["wearer"]["name"], "status": "failed", "error": cause, "wall_s": 0.0}


# ----------------------------------------------------------------------------- the sweep
@dataclass
class Sweep:
    """A finished sweep: grid keys, the points (label → gains and figures), the best point,
    the shipped point's label, the tasks' rows and the wall time (s)."""

    keys: list[GridKey]
    points: list[dict]
    tasks: list[dict]
    best: dict | None
    shipped: dict
    controller: Path
    joint_names: tuple[str, ...]
    wall_s: float
    files: list[Path] = dataclasses.field(default_factory=list)


def _point_gains(base: np.ndarray, keys: list[GridKey], combo, joint_names, fields):
    """The gains records ``base`` with the grid point ``combo`` applied (``fields``: gain key →
    its field of a record)."""
    g = base.copy()
    for k, v in zip(keys, combo, strict=True):
        name = fields[k.gain]
        if k.joint is None:
            g[name] = base[name] * v
        else:
            g[name][joint_names.index(k.joint)] = v
    return g


def run_sweep(config: str | Path, grid: str, *, model_errors=(1.0,), wearers=None,
              robot: str | Path | None = None, cycles: float = 1.0, engine: str = "local",
              jobs: int = 1, address: str | None = None, max_saturation: float = 0.01,
              out: str | Path | None = None, status: bool = True) -> Sweep:
    """Run the grid × model errors × wearers; write the table and heat maps into ``out``."""
    from exo_rt.batch.engine import check_engine, run_tasks
    from exo_rt.control.config import GAIN_KEYS, load_controller
    from exo_rt.model import load_mechanism
    from exo_rt.progress import progress

    check_engine(engine, address)
    t0 = time.perf_counter()
    ctl_path, robot_path = resolve_config(config, robot)
    nominal = load_mechanism(robot_path)
    cfg = load_controller(ctl_path, nominal)
    names = tuple(nominal.joint_names)
    keys = parse_grid(grid, names, GAIN_KEYS)
    people = wearers if wearers is not None else load_wearers(None)
    if any(w.get("mass") is not None for w in people) and robot_path.suffix not in (".yaml",
                                                                                    ".yml"):
        raise ConfigError("wearers need a robot YAML file (its wearer block)",
                          Where(str(robot_path)), "give --robot a robot .yaml with a wearer")
    points = []
    shipped_combo = None
    for combo in itertools.product(*(k.values for k in keys)):
        gains = _point_gains(cfg.gains, keys, combo, names, GAIN_KEYS)
        label = ",".join(f"{k.text}={v:g}" for k, v in zip(keys, combo, strict=True))
        points.append({"label": label, "values": list(combo), "gains": gains})
        if np.array_equal(gains, cfg.gains) and shipped_combo is None:
            shipped_combo = label
    if shipped_combo is None:
        points.append({"label": SHIPPED, "values": None, "gains": cfg.gains.copy()})
        shipped_combo = SHIPPED
    tasks = [{"point": i, "gains": {f: p["gains"][f].tolist() for f in p["gains"].dtype.names},
              "model_error": float(e), "wearer": w,
              "robot": str(robot_path), "controller": str(ctl_path), "cycles": float(cycles)}
             for i, p in enumerate(points) for e in model_errors for w in people]
    rows: list[dict | None] = [None] * len(tasks)
    results = run_tasks(sweep_task, tasks, engine=engine, jobs=jobs, address=address,
                        on_crash=_crash)
    bar = progress(results, "sweep", total=len(tasks), unit="task") if status else results
    for i, row in bar:
        rows[i] = row
    for i, p in enumerate(points):
        mine = [r for r in rows if r["point"] == i]
        ok = [r for r in mine if r["status"] == "ok"]
        p["failed"] = [r["error"] for r in mine if r["status"] != "ok"]
        if ok and not p["failed"]:
            p["rms_worst_deg"] = max(r["rms_deg"] for r in ok)
            p["rms_mean_deg"] = float(np.mean([r["rms_deg"] for r in ok]))
            p["peak_current_A"] = max(r["peak_current_A"] for r in ok)
            p["saturation"] = max(r["saturation"] for r in ok)
        else:
            p.update(rms_worst_deg=float("inf"), rms_mean_deg=float("inf"),
                     peak_current_A=float("nan"), saturation=float("nan"))
    shipped = next(p for p in points if p["label"] == shipped_combo)
    fine = [p for p in points if np.isfinite(p["rms_worst_deg"])
            and p["saturation"] <= max_saturation]
    best = min(fine, key=lambda p: p["rms_worst_deg"]) if fine else None
    sweep = Sweep(keys, points, rows, best, shipped, ctl_path, names,
                  time.perf_counter() - t0)
    if out is not None:
        sweep.files = write_sweep(sweep, Path(out), model_errors, people)
    return sweep


# ----------------------------------------------------------------------------- outputs
def snippet(sweep: Sweep, point: dict) -> str:
    """The point's gains as the controller file's ``joints:`` block (only the swept gains)."""
    from exo_rt.control.config import GAIN_KEYS

    gains = sorted({k.gain for k in sweep.keys}, key=list(GAIN_KEYS).index)
    lines = [f"# exo-rt sweep: best of {len(sweep.points)} points, worst-case RMS "
             f"{point['rms_worst_deg']:.4f} deg ({sweep.controller.name})", "joints:"]
    for j, name in enumerate(sweep.joint_names):
        vals = ", ".join(f"{g}: {point['gains'][GAIN_KEYS[g]][j]:.6g}" for g in gains)
        lines.append(f"  {name}: {{{vals}}}")
    return "\n".join(lines) + "\n"


def verdict(sweep: Sweep) -> str:
    """One line: how much the best point improves on the controller file's gains."""
    s, b = sweep.shipped, sweep.best
    if b is None:
        return (f"no point saturates at most the allowed fraction of cycles; the shipped gains "
                f"give {s['rms_worst_deg']:.4f} deg worst-case RMS")
    if b is s or b["rms_worst_deg"] >= s["rms_worst_deg"]:
        return f"the shipped gains are best ({s['rms_worst_deg']:.4f} deg worst-case RMS)"
    gain = 100.0 * (1.0 - b["rms_worst_deg"] / s["rms_worst_deg"])
    return (f"best point {b['label']}: worst-case RMS {b['rms_worst_deg']:.4f} deg against "
            f"{s['rms_worst_deg']:.4f} deg with the shipped gains ({gain:.1f} % lower)")


def _g(x) -> str:
    return "" if x is None else f"{x:.6g}" if isinstance(x, float) else str(x)


def write_sweep(sweep: Sweep, out: Path, model_errors, wearers) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["point", *[k.text for k in sweep.keys], "rms_worst_deg", "rms_mean_deg",
                "peak_current_A", "saturation", "best", "shipped", "failed"])
    for p in sweep.points:
        vals = p["values"] or [""] * len(sweep.keys)
        w.writerow([p["label"], *[_g(v) for v in vals], _g(p["rms_worst_deg"]),
                    _g(p["rms_mean_deg"]), _g(p["peak_current_A"]), _g(p["saturation"]),
                    int(p is sweep.best), int(p is sweep.shipped), "; ".join(p["failed"])])
    table = out / "sweep-summary.csv"
    table.write_text(buf.getvalue())
    doc = {"controller": str(sweep.controller), "grid": [k.text for k in sweep.keys],
           "model_errors": list(model_errors), "wearers": wearers,
           "points": [{k: (v.tolist() if isinstance(v, np.ndarray) else v)
                       for k, v in p.items()} for p in sweep.points],
           "best": sweep.best["label"] if sweep.best else None,
           "shipped": sweep.shipped["label"], "verdict": verdict(sweep),
           "tasks": [{k: v for k, v in r.items() if k != "traceback"} for r in sweep.tasks],
           "wall_s": round(sweep.wall_s, 3)}
    js = out / "sweep-summary.json"
    js.write_text(json.dumps(doc, indent=1, default=float) + "\n")
    files = [table, js]
    if sweep.best is not None:
        yml = out / "best-gains.yaml"
        yml.write_text(snippet(sweep, sweep.best))
        files.append(yml)
    png = plot_heatmap(sweep, out / "sweep-heatmap.png")
    if png is not None:
        files.append(png)
    return files


def constant_value(z: np.ndarray) -> float | None:
    """The value every finite entry of ``z`` has, or None (none finite, or they differ)."""
    z = np.asarray(z, float)
    finite = z[np.isfinite(z)]
    if not len(finite) or finite.max() != finite.min():
        return None
    return float(finite[0])


def color_range(z: np.ndarray) -> dict:
    """``vmin``/``vmax`` for a plot of ``z`` whose values are all the same (matplotlib would
    make up ±0.1 about it: −0.1…0.1 for an all-zero saturation): ±10 % of the value (±1 for
    zero), not below 0 for a value that is not (a fraction, a current) — [0, 1] for zeros.
    Empty (matplotlib's own range) when the values differ."""
    c = constant_value(z)
    if c is None:
        return {}
    half = 0.1 * abs(c) if c != 0.0 else 1.0
    lo, hi = c - half, c + half
    if c >= 0.0 and lo < 0.0:
        lo = 0.0
    return {"vmin": lo, "vmax": hi}


def plot_heatmap(sweep: Sweep, path: Path) -> Path | None:
    """Worst-case RMS, peak current and saturation over the first two grid keys (the best
    over any further keys); one key: curves. None without matplotlib (the plot extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    grid = [p for p in sweep.points if p["values"] is not None]
    figures = (("rms_worst_deg", "worst-case RMS error (deg)"),
               ("peak_current_A", "peak current (A)"), ("saturation", "saturation (fraction)"))
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    kx = sweep.keys[0]
    if len(sweep.keys) == 1:
        for ax, (f, title) in zip(axes, figures, strict=True):
            y = np.array([p[f] for p in grid], float)
            ax.plot(kx.values, y, "o-")
            ax.set_xlabel(axis_label(kx))
            ax.set_ylabel(title)
            if constant_value(y) is not None:
                ax.set_ylim(color_range(y)["vmin"], color_range(y)["vmax"])
                title += f": all {constant_value(y):.3g}"
            ax.set_title(title)
    else:
        ky = sweep.keys[1]
        for ax, (f, title) in zip(axes, figures, strict=True):
            z = np.full((len(ky.values), len(kx.values)), np.nan)
            best_rms = np.full_like(z, np.inf)
            for p in grid:
                i, j = ky.values.index(p["values"][1]), kx.values.index(p["values"][0])
                if p["rms_worst_deg"] <= best_rms[i, j] or not np.isfinite(z[i, j]):
                    best_rms[i, j] = p["rms_worst_deg"]
                    z[i, j] = p[f] if np.isfinite(p[f]) else np.nan
            im = ax.imshow(z, origin="lower", aspect="auto", cmap="viridis",
                           **color_range(z))
            fig.colorbar(im, ax=ax, label=title)  # the colours' quantity, with its unit
            if constant_value(z) is not None:
                title += f": all {constant_value(z):.3g}"
            ax.set_xticks(range(len(kx.values)), [f"{v:g}" for v in kx.values])
            ax.set_yticks(range(len(ky.values)), [f"{v:g}" for v in ky.values])
            ax.set_xlabel(axis_label(kx))
            ax.set_ylabel(axis_label(ky))
            ax.set_title(title)
            for i in range(z.shape[0]):
                for j in range(z.shape[1]):
                    if np.isfinite(z[i, j]):
                        ax.text(j, i, f"{z[i, j]:.3g}", ha="center", va="center", fontsize=7,
                                color="w")
            for p, mark in ((sweep.best, "*"), (sweep.shipped, "o")):
                if p is not None and p["values"] is not None:
                    ax.plot(kx.values.index(p["values"][0]), ky.values.index(p["values"][1]),
                            mark, ms=14, mfc="none", mec="red", mew=2)
    per = len(sweep.tasks) // max(1, len(sweep.points))
    fig.suptitle(f"{sweep.controller.name}: {len(grid)} points × {per} (model errors × "
                 "wearers); ★ best, ○ shipped")
    fig.tight_layout()
    from exo_rt.plotting import save_png

    save_png(fig, path, dpi=90)
    plt.close(fig)
    return path
