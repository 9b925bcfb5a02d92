"""Serial link between the controller PC and the exoskeleton's embedded board (docs/board.md)."""
