"""Serial link between the controller PC and the exoskeleton's embedded board (DESIGN §4.3)."""
