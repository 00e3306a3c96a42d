"""The canvas: a surface an agent draws on (HTML, A2UI v0.8/v0.9 surfaces, a URL) and a person
clicks, whose actions come back to the agent's run; also served as an MCP Apps view.

``a2ui`` checks messages against the published schemas under ``schemas/``: copied unchanged
from ``@a2ui/web_core`` 0.11.0 (Apache-2.0, like pincer; github.com/a2ui-project/a2ui), the
v0.8 standard-catalog message schema and the v0.9 message, common-types and basic-catalog
schemas. ``board`` holds the canvases; ``drawing`` who drew each part and whose words its
events are; ``tool`` the agent's tools; ``frame`` the sandboxed documents (agent HTML and
pincer's A2UI apart) and their policies; ``snapshot`` the headless-Chromium PNG;
``assets/a2ui-render.js`` pincer's own renderer of the standard catalog. The gateway serves the
pages (``gateway/canvas_pages.py``) and the MCP Apps resource (``gateway/canvas_mcp.py``). See
docs/canvas.md.
"""
