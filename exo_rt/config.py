"""Former home of the controller-file loader, now :mod:`exo_rt.control.config` (the file
reads a controller, not the package's configuration). Kept so that existing imports work."""

from exo_rt.control.config import (  # noqa: F401
    GAIN_DEFAULTS,
    GAIN_KEYS,
    REFERENCE_TYPES,
    ControllerConfig,
    Reference,
    load_controller,
    rotor_inertias,
    transmission_rows,
)
