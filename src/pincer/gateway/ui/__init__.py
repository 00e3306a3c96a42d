"""The dashboard at ``/ui``: server-rendered pages (Jinja2, htmx for live parts) over the same
service, stores and visibility rules as the REST API.

The guard lets ``/ui/`` past the bearer-token check (a browser holds a session cookie instead,
``auth.py``) but never past its Host and Origin rules. Every form works without JavaScript;
htmx (shipped in ``static/``, 0BSD) and ``static/dashboard.js`` only make lists live.

The app itself is built in ``app.py``; this package imports nothing, so ``ui.auth`` (the
sign-in, also used by the canvas pages) can be imported without the dashboard's pages, which the
gateway builds only at the first request under ``/ui`` (``pincer.gateway.lazy``).
"""
