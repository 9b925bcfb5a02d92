"""Reading a serial line without waiting on the kernel's tty worker.

A read of a tty (a USB-serial port, a pseudo-terminal) that finds no input in the line
discipline waits for the kernel's pending flip-buffer work (``n_tty_read`` calls
``tty_buffer_flush_work``) — even a non-blocking read. That work runs in a kernel worker thread
of normal priority, so a real-time thread that reads an idle line waits for however long the
worker waits for a CPU — milliseconds beside a busy process (``tools/bench_tty.py``,
docs/performance.md). Asking the line discipline how many bytes it holds (``FIONREAD``) never
waits, and a read of bytes it holds never does either: bytes still in the flip buffer are read
one cycle later instead. For a socket, ``FIONREAD`` is the bytes queued, the same meaning.
"""

from __future__ import annotations

import array
import fcntl
import termios


def probe() -> array.array:
    """The preallocated buffer :func:`waiting` reports into (one per reader)."""
    return array.array("i", [0])


def waiting(fd: int, count: array.array) -> int:
    """Bytes ready to read on ``fd`` now (0 where the descriptor cannot say)."""
    try:
        fcntl.ioctl(fd, termios.FIONREAD, count, True)
    except (OSError, ValueError):  # closed, or not a descriptor
        return 0
    return count[0]
