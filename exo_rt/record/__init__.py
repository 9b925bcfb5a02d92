"""Recording, replay and reports of runs (DESIGN §7)."""
