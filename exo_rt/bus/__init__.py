"""CAN protocols and the host side of the drives."""
