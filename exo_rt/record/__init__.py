"""Recording, replay and reports of runs."""
