"""Sessions with a wearer: the activity machine (postures and motions), who asks for what
(the board's crutch buttons, the therapist's console, session scripts), the wearer's profile
and the walking parameters (docs/sessions.md)."""
