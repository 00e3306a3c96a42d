"""The hub server (``pincer hub serve``): its own Starlette/FastAPI app, SQLite file and blob
folder under the hub's home, apart from the gateway. See :mod:`pincer.hub.server.app`."""
