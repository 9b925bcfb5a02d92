"""The real-time runtime: scheduler, safety supervisor, controller state machine."""
