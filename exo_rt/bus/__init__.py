"""CAN protocols and the host side of the drives (DESIGN §4.1)."""
