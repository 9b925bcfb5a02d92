"""CiA 402 drives (CANopen, cyclic synchronous torque) as a registered drive protocol.

The host side is :class:`exo_rt.bus.drives.Drives`; the emulated drive is the simulation's
(:class:`exo_rt.sim.drive_emulator.EmulatedDrive`), which registers it from above
(:data:`exo_rt.sim.simbus.EMULATORS`), so that the bus layer names nothing above it. What
bring-up writes is read from the bus file by :mod:`exo_rt.bus.config` (EDS, PDO mapping,
identity, units).
"""

from __future__ import annotations

from exo_rt.bus.protocols import Protocol


class CiA402(Protocol):
    name = "cia402"
    host = "exo_rt.bus.drives:Drives"
    emulator = ""  # the simulation's: exo_rt.sim.simbus.EMULATORS
    bus_keys = {"eds": False, "vendor_id": False, "product_code": False, "rpdo": False,
                "tpdo": False, "transmission_type": False, "rated_current_object": False,
                "rated_torque_object": False}
    drive_keys = bus_keys
    drive_timeout = ("heartbeat consumer 1016h, SYNC watchdog 1006h, abort connection 6007h "
                     "(written at bring-up from master/drive_watchdog)")

    def parse_drive(self, bus, drive, node):
        from exo_rt.bus.config import cia402_drive

        objects, profile = cia402_drive(bus, drive, node)
        return objects, profile, None

    def check(self, config, bus, item) -> None:
        from exo_rt.bus.config import watchdog_required

        watchdog_required(config, bus)

    def cycle_frames(self, config) -> list[int]:
        """SYNC + each drive's RPDO1 and TPDO1 at their mapped sizes."""
        from exo_rt.bus import pdo

        out = [0]
        for d in config.drives:
            p = d.profile or pdo.DEFAULT_PROFILE
            out += [p.rpdo_bytes, p.tpdo_bytes]
        return out

    def log_decoder(self, config, mech):
        return Cia402LogDecoder(config, mech)


class Cia402LogDecoder:
    """RPDO1 torques as the commands, TPDO1 positions as the measurements, the statusword's
    OPERATION ENABLED as the power stage: each drive's frames read by the cycle's decoder
    (:func:`exo_rt.bus.pdo_fields.decode`) on the drive's own mapping in the bus file."""

    def __init__(self, config, mech) -> None:
        import math

        from exo_rt.bus import pdo, pdo_fields

        tr = {t.joint: t for t in mech.transmissions}
        self.nodes = {}
        for d in config.drives:
            p = d.profile or pdo.DEFAULT_PROFILE
            rx, tx = pdo.Layout(p.rpdo), pdo.Layout(p.tpdo)
            rad = 2 * math.pi / float(d.scale.counts_per_rev) / tr[d.joint].multiplier
            self.nodes[d.node] = (mech.joint_names.index(d.joint), d.scale, rad,
                                  pdo_fields.rpdo_fields(rx), rx.size,
                                  pdo_fields.tpdo_fields(tx), tx.size)

    def frame(self, arb: int, data: bytes, cmd, meas, on) -> None:
        from exo_rt.bus import cia402 as c
        from exo_rt.bus import pdo_fields as pf

        node = arb & 0x7F
        if node not in self.nodes:
            return
        j, sc, rad, rx, rx_size, tx, tx_size = self.nodes[node]
        if arb & 0x780 == c.RPDO1:
            v = pf.decode(data, rx, rx_size)
            if v is not None:
                cmd[j] = v[pf.RPDO_TARGET] / 1000.0 * sc.rated_torque / sc.torque_constant
        elif arb & 0x780 == c.TPDO1:
            v = pf.decode(data, tx, tx_size)
            if v is not None:  # (increments × rad per increment, as the cycle)
                meas[j] = v[pf.TPDO_POSITION] * rad
                on[j] = c.state_of(int(v[pf.TPDO_STATUSWORD])) == c.OPERATION_ENABLED
