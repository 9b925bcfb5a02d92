"""Control: laws, references and state estimation, as njit functions on arrays."""
