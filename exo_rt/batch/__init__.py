"""Batches past one process: replay a lab's archive of sessions and sweep gains in
model-in-the-loop simulation, as independent tasks on an engine (docs/scale.md).

- :mod:`exo_rt.batch.engine` — run one task function over many payloads on local processes
  (the default, no extra dependency) or on Ray (the ``cluster`` extra), results as they finish;
- :mod:`exo_rt.batch.replay` — ``exo-rt replay ARCHIVE…``: sessions found in archives, one
  replay per session, a content-hash cache so an interrupted batch resumes, the summary table
  and overview plot;
- :mod:`exo_rt.batch.sweep` — ``exo-rt sweep``: a grid of gains × model errors × wearers, the
  table, the heat maps and the best point as a controller-file snippet.
"""
