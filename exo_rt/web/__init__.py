"""The therapist's web console: a page served from the exoskeleton's PC by a process of its
own (never the control process), on Starlette and uvicorn; one page controls at a time,
paired by a code printed on the PC's terminal, with a heartbeat. docs/console-web.md.

Importing this package imports no web framework: :mod:`exo_rt.web.address` is read by the
control process; :mod:`exo_rt.web.server` (``python -m exo_rt.web``) is the web process.
"""
