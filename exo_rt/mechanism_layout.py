"""The packed mechanism's columns: the one float64 array a kernel takes as ``model``.

:class:`exo_rt.model.mechanism.Mechanism` writes it (``Mechanism.packed``) and the kernels of
:mod:`exo_rt.dynamics` read it, so the layout sits below both: the dynamics imports nothing of
the model, and the model closes its loops with the dynamics' kinematics (docs/architecture.md,
"Layers").

One row per body (width 1 unless given); an extra last row is the header. Records, which the
other tables are, would read faster still (docs/performance.md, "Named layouts"); the kernels'
own conversion is left for a change of its own.
"""

from __future__ import annotations

P_PARENT = 0  # parent body index (−1 for the base)
P_JTYPE = 1  # JOINT_*: 0 base/fixed, 1 revolute, 2 prismatic
P_QIDX = 2  # index of the coordinate that drives this body's joint (in z; = q for a tree)
P_K = 3  # mimic multiplier k (z = k q + c), 1
P_C = 4  # mimic offset c: rad (revolute) or m (prismatic)
P_XYZ = 5  # m: joint origin in the parent body frame (3)
P_ROT = 8  # joint origin rotation in the parent body frame, row-major (9)
P_AXIS = 17  # joint axis in the joint frame, unit vector (3)
P_MASS = 20  # kg: body mass
P_COM = 21  # m: centre of mass in the body frame (3)
P_INERTIA = 24  # kg·m²: inertia about the COM in the body frame, row-major (9)
# derived, for the kernels' fast paths (as Pinocchio's RX/RY/RZ joints): 1.0 where P_ROT is
# exactly the identity; 0, 1, 2 where P_AXIS is exactly ±x, ±y, ±z (the sign in P_AXIS), −1
# otherwise
P_ROT_IDENTITY = 33
P_AXIS_INDEX = 34
P_WIDTH = 35
# header row (the last row)
HDR_NQ = 0  # number of coordinates the kernels take (nz; = nq for a tree)
HDR_GRAVITY = 1  # m/s²: gravity in the world frame (3)

JOINT_BASE = 0
JOINT_REVOLUTE = 1
JOINT_PRISMATIC = 2
