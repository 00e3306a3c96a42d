"""What operators read from outside: OpenTelemetry traces and Prometheus metrics.

- :mod:`pincer.telemetry.tracing`: the process's traces, off unless ``[telemetry] traces = true``.
  Off, nothing here imports OpenTelemetry and a call pays one attribute check; on, the official
  SDK exports spans over OTLP/HTTP (the ``pincer[telemetry]`` extra).
- :mod:`pincer.telemetry.spans`: the spans of a governed call, an agent run, a model request and
  an upstream request, named and attributed as the GenAI semantic conventions say, and never
  holding an argument or an output unless ``[telemetry] record_content`` asks (leak-scanned, cut).
- :mod:`pincer.telemetry.metrics`: the gateway's Prometheus metrics (``prometheus-client``), with
  label sets bounded by what the registry and the config name.

Nothing in this package imports either library at import time: the CLI starts without them.
"""
