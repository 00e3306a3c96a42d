"""pincer's bundled tools: ``github``, ``web_fetch``, ``web_search``, ``llm_context``.

Each is one action-tagged tool (:mod:`pincer.builtins.actions`) with an IronClaw capabilities
manifest (``manifests/``), effects per action, outputs untrusted and leak-scanned, and every
request through the egress client that injects its credential (:mod:`pincer.builtins.api`).
They are registered from ``[builtins.NAME]`` in config.toml (:mod:`pincer.builtins.catalog`).
"""
