"""The ``browser`` built-in: a governed headless Chromium (docs/browser.md).

- :mod:`pincer.safety.egress_proxy`: the loopback proxy every browser request goes through (the egress rules);
- :mod:`.launcher`: starting Debian's Chromium under Playwright (flags, sandbox, profile);
- :mod:`.host`: one browser per pincer, one context per session, idle timeout, restart;
- :mod:`.tool`: the actions; :mod:`.snapshot`, :mod:`.files`: snapshots with refs, uploads and
  downloads; :mod:`.playwright_compat`: the one Playwright internal used.
"""
