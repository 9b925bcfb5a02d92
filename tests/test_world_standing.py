"""Standing in the world (issue 44; docs/world.md, "Standing").

``exo_2leg`` with its wearer (75 kg, 1.75 m, male) on the sagittal floating base, on the
floor by heel and toe spheres, with the wearer's head, trunk and arms on the pelvis (de Leva
1996, Table 4: 60.28 % of the body mass). The joints are held at a standing posture by a stiff
PD written into ``qfrc_applied`` — a stand-in for the controller and its drives, not exo-rt's
law. After 1 s of settling, over 5 s of simulated time:

- the summed vertical ground reaction equals the total mass × g within 1 % at every step
  (the total mass counted independently: the robot file's 50.49 kg plus 45.21 kg of upper
  body);
- no contact sphere slides more than 5 mm;
- the pelvis moves less than 1 cm.
"""

from __future__ import annotations

import numpy as np
import pytest

from exo_rt.model import load_mechanism
from exo_rt.sim.world.scene import upper_body_inertia
from exo_rt.sim.world.standing import EXO_2LEG_FEET as FEET
from exo_rt.sim.world.standing import stand, standing_world

G = 9.81


@pytest.fixture(scope="module")
def mech():
    return load_mechanism("configs/robots/exo_2leg.yaml")


def test_upper_body_is_de_levas():
    """Head, trunk and both arms: 75 kg × (0.0694 + 0.4346 + 2 × (0.0271 + 0.0162 +
    0.0061)) = 45.21 kg (de Leva 1996, Table 4, male)."""
    m, com, moments = upper_body_inertia(75.0, 1.75, "male")
    assert m == pytest.approx(45.21, rel=1e-12)
    assert com[2] > 0 and np.all(moments > 0)


@pytest.mark.parametrize("timestep", [1e-3, 5e-4])
@pytest.mark.parametrize("posture", [(0.0, 0.0), (0.1, 0.1)], ids=["straight", "flexed"])
def test_standing(mech, timestep, posture):
    world = standing_world(mech, FEET, timestep=timestep)
    total = 50.49 + 45.21
    assert world.model.body_mass.sum() == pytest.approx(total, rel=1e-12)
    figures = stand(world, np.tile(posture, 2), settle=1.0, seconds=5.0)
    assert figures.reaction_worst < 0.01, figures
    assert figures.reaction_mean == pytest.approx(total * G, rel=0.01)
    assert figures.slip < 5e-3, figures
    assert figures.pelvis_drift < 1e-2, figures


def test_standing_fails_without_the_floor_carrying_it(mech):
    """The check can fail: lifted 5 cm with no time to settle, the world falls and the
    reaction is nowhere near the weight during the first 0.2 s."""
    world = standing_world(mech, FEET)
    world.model.body_pos[world.bodies[0], 2] += 0.05
    figures = stand(world, np.zeros(4), settle=0.0, seconds=0.2)
    assert figures.reaction_worst > 0.5
