"""The plant model ``world``: the rigid bodies in MuJoCo (Todorov, Erez & Tassa 2012), the
drives exo-rt's own (docs/world.md, "The world as a plant").

Its first scene is the **test stand**: the pelvis welded to the world, no floor — today's
hanging leg, so that every figure measured on ``harmonic_drive`` can be measured again here.

How it is split.

- **MuJoCo: the rigid bodies.** The MuJoCo model is built (:func:`exo_rt.sim.world.build_world`)
  from the robot's mechanism with every rotor *released* into a hinge of its own
  (:func:`exo_rt.dynamics.couplings.released`, as ``harmonic_drive`` integrates them): each
  rotor is a MuJoCo body on its carrier, turning about its own axis — its mass, its inertia,
  its coupling to its carrier's rotation and its gyroscopic terms are MuJoCo's, and nothing is
  folded into ``armature`` (the world builder's fold, for a model whose rotors follow their
  joints rigidly, would count the reflected inertia a second time here). Each integration stage
  MuJoCo computes the joint-space mass matrix M (``mj_fullM``) and the bias forces h
  (``qfrc_bias``: Coriolis, centrifugal, gravity) at the stage's (q, q̇), called from compiled
  code through MuJoCo's C API.
- **exo-rt: the drives.** The motor current loop, the flexspline's compliance and hysteresis,
  the wave generator's friction with exact stick–slip and the power-off brake are
  ``harmonic_drive``'s own functions (:mod:`exo_rt.sim.plant`), unchanged: its step
  (:func:`exo_rt.sim.plant.plant_step`, RK4 sub-steps) calls the accelerations where the plant's
  scratch says they start, and here that is :func:`_world_accelerations` — the drives'
  generalized forces (flexspline torque on joint and rotor, motor torque, sliding friction,
  ST_EXT) applied to MuJoCo's M and h, with the locked coordinates (stuck rotors, clamped
  outputs) held exactly.

Why not ``mj_step`` with the drive torques in ``qfrc_applied``: a flexspline is a stiff spring
between a joint and its rotor (ω ≈ 260–350 rad/s); a torque written once per MuJoCo step and
held over its integrator's stages is explicit in that spring and pumps energy into it (the
step's map of a linear spring has determinant 1 + (ω·h)²/2; measured, ``exo_leg`` coasting
under MuJoCo's RK4 at 0.5 ms gains 1 J in 0.18 s and goes unstable at 0.72 s:
``tools/bench_world.py``), and MuJoCo's dry friction (``frictionloss``) is a soft constraint,
not the exact stick–slip that holds a leg at zero current. Evaluating the drives at every
stage of one integrator keeps both, and leaves MuJoCo every rigid-body term. (Floor and seat
contacts, a later slice, add MuJoCo's constraint forces to the stage.)

MuJoCo is called from compiled code with no Python between: a MuJoCo error there (``mju_error``,
e.g. its arena full) would end the process, not raise. On the test stand — no contacts, no
constraints — the calls made (``mj_fwdPosition``, ``mj_fwdVelocity``, ``mj_fullM``) take
nothing from the arena, its usual cause; the floor scene must bound its contacts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from exo_rt.actuators.harmonic_drive import twist_for_torque
from exo_rt.dynamics.couplings import released
from exo_rt.jit import address, c_call_at, njit
from exo_rt.model.mechanism import Mechanism
from exo_rt.sim import plants
from exo_rt.sim.plant import (
    SUBSTEPS,
    T_DRIVE,
    T_MOTOR,
    X_F,
    X_FN,
    X_H,
    X_ROWS,
    X_T,
    HarmonicDrivePlant,
    _forces,
    kinematic_error,
    plant_energy,
    solve_locked,
)
from exo_rt.sim.plants import ST_Q, T_JOINT, T_K, T_ROTOR

# --- rows of the world plant's ``model`` array (read-only in its kernel)
W_PTR = 0  # [mjModel*, mjData*, mj_fwdPosition, mj_fwdVelocity, mj_fullM] (addresses)
W_QPOS = 1  # per plant coordinate: its index in ``data`` (a view of MuJoCo's qpos …)
W_QVEL = 2  # … of its qvel …
W_BIAS = 3  # … of its qfrc_bias …
W_DOF = 4  # … and its dof in MuJoCo's order (the dense M's row and column)
W_ROWS = 5
_P_MODEL, _P_DATA, _P_FWDPOS, _P_FWDVEL, _P_FULLM = range(5)


@njit(cache=True, python=False)
def _world_accelerations(model, data, transmissions, state, q, v, scratch, acc):
    """q̈ with the locked coordinates held (q̈ = 0 there): M_ff a_f = Q_f − h_f, with M and h
    MuJoCo's at (q, q̇) and Q the drives' forces (:func:`exo_rt.sim.plant._forces`).

    Leaves M (rows 0…n−1 of scratch, exo-rt's order), h (X_H) and Q (X_F) as
    ``harmonic_drive``'s accelerations do: its stick–slip reads them.
    """
    n = q.shape[0]
    x0 = 2 * n
    m = scratch[:n]
    mff = scratch[n:x0]  # (MuJoCo's dense M first: its dofs' order)
    h = scratch[x0 + X_H]
    for i in range(n):
        data[int(model[W_QPOS, i])] = q[i]
        data[int(model[W_QVEL, i])] = v[i]
    mptr = np.int64(model[W_PTR, _P_MODEL])
    dptr = np.int64(model[W_PTR, _P_DATA])
    c_call_at(np.int64(model[W_PTR, _P_FWDPOS]), mptr, dptr)
    c_call_at(np.int64(model[W_PTR, _P_FWDVEL]), mptr, dptr)
    c_call_at(np.int64(model[W_PTR, _P_FULLM]), mptr, dptr, np.int64(mff.ctypes.data))
    for i in range(n):
        di = int(model[W_DOF, i])
        h[i] = data[int(model[W_BIAS, i])]
        for j in range(n):
            m[i, j] = mff.flat[di * n + int(model[W_DOF, j])]
    _forces(transmissions, state, q, v, scratch[x0 + X_T], scratch[x0 + X_F])
    solve_locked(scratch, n, acc)


class _Keep(bytearray):
    """A buffer for an array of addresses that holds what they point at (``refs``): the
    arrays in a plant's ``args`` keep MuJoCo's model and data alive after the plant is gone."""


def _c_function(lib, name: str) -> int:
    import ctypes
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value


@plants.model("world", doc="rigid bodies in MuJoCo on the test stand (pelvis fixed), "
                           "harmonic_drive's drives, motors and friction (RK4 sub-steps)")
class WorldPlant(HarmonicDrivePlant):
    """The leg's rigid bodies in MuJoCo, its drives exo-rt's (the module's docstring): the
    same interface, state layout, rows and kernel as :class:`HarmonicDrivePlant`, so a
    ``harmonic_drive`` run and a ``world`` run differ only in who computes M and h.

    ``WorldPlant(mech, dt=1e-3, substeps=10, friction=True, hysteresis=True)``; ``scene``:
    ``"test_stand"`` (the pelvis welded to the world, no floor), the only scene so far.
    :attr:`world` is the compiled :class:`~exo_rt.sim.world.World` of the released mechanism
    and :attr:`mj_data` its ``MjData``.
    """

    SCENES = ("test_stand",)

    def __init__(self, mech: Mechanism, *, dt: float = 1e-3, substeps: int = SUBSTEPS,
                 friction: bool = True, hysteresis: bool = True,
                 scene: str = "test_stand") -> None:
        if scene not in self.SCENES:
            raise ValueError(f"the world plant has no scene '{scene}' (it has "
                             f"{', '.join(self.SCENES)}; the floor and seat are to come)")
        self.scene = scene
        super().__init__(mech, dt=dt, substeps=substeps, friction=friction,
                         hysteresis=hysteresis)
        # exo-rt's packed model of the same released mechanism stays for energy() only —
        # never in the step
        self._exo_model, self._exo_data = self.model, self.data
        self._attach()
        self.reset(np.zeros(mech.nq))

    # --- MuJoCo's side
    def _attach(self) -> None:
        """Build the MuJoCo model of the released mechanism and point the kernel at it."""
        import ctypes

        import mujoco

        from exo_rt.sim.world import build_world

        world = build_world(released(self.robot))
        if world.model.nv != self.mech.nq or np.any(world.model.dof_armature):
            raise RuntimeError("the world's model must hold the plant's coordinates, rotors "
                               "as bodies and no armature")
        self.world = world
        self.mj_data = d = world.new_data()
        n = self.mech.nq
        arrays = (d.qpos, d.qvel, d.qfrc_bias)  # one view of MuJoCo's buffer spans them
        start = min(a.ctypes.data for a in arrays)
        end = max(a.ctypes.data + a.nbytes for a in arrays)
        if any((a.ctypes.data - start) % 8 for a in arrays):
            raise RuntimeError("MuJoCo's qpos, qvel and qfrc_bias are not 8 bytes apart")
        buf = (ctypes.c_double * ((end - start) // 8)).from_address(start)
        buf.keep = (world.model, d)  # the view's base holds MuJoCo's model and data alive
        self.data = np.ctypeslib.as_array(buf)  # a view of MuJoCo's arrays: the kernel's data
        off = lambda a: (a.ctypes.data - start) // 8  # noqa: E731
        lib = ctypes.CDLL(str(Path(mujoco.__file__).parent / f"libmujoco.so.{mujoco.__version__}"))
        keep = _Keep(8 * W_ROWS * max(n, 5))  # the array's base holds what it points at
        keep.refs = (world.model, d, lib)
        model = np.frombuffer(keep).reshape(W_ROWS, max(n, 5))
        model[W_PTR, :5] = (world.model._address, d._address,
                            _c_function(lib, "mj_fwdPosition"),
                            _c_function(lib, "mj_fwdVelocity"), _c_function(lib, "mj_fullM"))
        model[W_QPOS, :n] = off(d.qpos) + world.qpos
        model[W_QVEL, :n] = off(d.qvel) + world.dof
        model[W_BIAS, :n] = off(d.qfrc_bias) + world.dof
        model[W_DOF, :n] = world.dof
        if not np.all(model[W_PTR, :5] < 2**53):
            raise RuntimeError("an address does not fit a float64 exactly")
        model.flags.writeable = False
        self.model = model
        self._lib = lib
        _point_at_world(self.scratch)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        for k in ("world", "mj_data", "data", "model", "_lib"):
            state.pop(k, None)
        return state

    def __setstate__(self, state: dict) -> None:
        """Unpickled (another process): MuJoCo's model and data are built again here."""
        self.__dict__.update(state)
        self._attach()

    # --- what differs from harmonic_drive's
    def energy(self) -> float:
        """Kinetic + gravity (MuJoCo's, ``mj_energyPos``/``mj_energyVel``: gravity's zero at
        the world origin) + flexspline elastic energy (J)."""
        import mujoco

        w, d = self.world, self.mj_data
        d.qpos[w.qpos] = self.q
        d.qvel[w.dof] = self.v
        mujoco.mj_kinematics(w.model, d)
        mujoco.mj_comPos(w.model, d)
        mujoco.mj_energyPos(w.model, d)
        mujoco.mj_comVel(w.model, d)
        mujoco.mj_energyVel(w.model, d)
        spring = plant_energy(self._exo_model, self._exo_data, self.transmissions, self.state,
                              self._e2)
        return float(d.energy[0] + d.energy[1] + spring)

    def _pretwist(self) -> None:
        """Rotor angles whose flexsplines carry the joints' static gravity torques, gravity
        from MuJoCo (``qfrc_bias`` at rest) — as :meth:`HarmonicDrivePlant._pretwist`."""
        if not hasattr(self, "world"):  # the base class's constructor: not attached yet
            return
        import mujoco

        w, d = self.world, self.mj_data
        q, rows = self.state[ST_Q], self.transmissions
        for _ in range(5):
            d.qpos[w.qpos] = q
            d.qvel[:] = 0.0
            mujoco.mj_fwdPosition(w.model, d)
            mujoco.mj_fwdVelocity(w.model, d)
            g = d.qfrc_bias[w.dof]
            for t in range(len(rows)):
                j, r, k = int(rows[t, T_JOINT]), int(rows[t, T_ROTOR]), rows[t, T_K]
                drive = rows[t, T_DRIVE:T_MOTOR]
                delta = twist_for_torque(-g[j], drive)
                q[r] = k * (q[j] - delta - kinematic_error(q[r], drive)[0])


def _point_at_world(scratch: np.ndarray) -> None:
    """The plant step's accelerations: :func:`_world_accelerations` (compiled or loaded now)."""
    model, vec, mat = plants.STEP_SIGNATURE.args[:3]
    n = (scratch.shape[0] - X_ROWS) // 2
    scratch[2 * n + X_FN, 0] = address(_world_accelerations,
                                       (model, vec, mat, mat, vec, vec, mat, vec))

