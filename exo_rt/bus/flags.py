"""The per-joint feedback flags every drive family sets each cycle (bits of one int64 per
joint), read by the safety check (:mod:`exo_rt.cycle.safety`). Declared once, here."""

F_MISSING = 1  # no answer this cycle
F_MALFORMED = 2  # an answer of the wrong length or content
F_DUPLICATE = 4  # two answers in one cycle
F_FAULT = 8  # the drive reports FAULT (statusword) or sent an EMCY
F_NOT_ENABLED = 16  # not in OPERATION ENABLED
F_HEARTBEAT = 32  # no heartbeat for 3 of the configured periods
F_GLITCH = 64  # the position jumped further than the joint's speed limit allows since its
# last sample
F_SATURATED = 128  # the actual current fell short of last cycle's command by > 20 % of peak
F_LATE = 256  # an answer that arrived before the last SYNC left (or, on a bus with its own
# clock, stamped more than half a period before this cycle's): stale data
F_BUS_ERROR = 512  # the CAN controller reported an error frame (cause in Drives.bus_errors)
F_FOREIGN = 1024  # a frame only the controller may send on this bus (a SYNC, an NMT command,
# an SDO request or RPDO to this drive, a heartbeat with the controller's node id) came from
# another node: a second master (pdo_cycle.take_tpdos; the COB-ID in Drives.foreign)
