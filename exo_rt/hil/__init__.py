"""Hardware-in-the-loop bench procedures (docs/bench.md):
``exo-rt bench-test NAME``.

- :mod:`exo_rt.hil.bench` — the :class:`~exo_rt.hil.bench.Bench` (drives on any python-can bus,
  the controller's safety check every cycle, the abort key, fixtures) and its position loop;
- :mod:`exo_rt.hil.procedures` — the registry, the pre-flight checklist, the run folder;
- :mod:`exo_rt.hil.response` — step and chirp responses, bandwidth, Bode data;
- :mod:`exo_rt.hil.identify` — friction, stiffness and inertia identification procedures;
- :mod:`exo_rt.hil.fit` — their fits (numpy only) and YAML snippets;
- :mod:`exo_rt.hil.plots` — their PNGs.
"""
