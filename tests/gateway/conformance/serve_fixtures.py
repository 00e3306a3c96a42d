"""``pincer serve`` / ``pincer mcp stdio`` with the MCP conformance suite's fixtures installed.

    python tests/gateway/conformance/serve_fixtures.py serve --port 0 --json
    python tests/gateway/conformance/serve_fixtures.py mcp stdio

Everything else is the real command (the CLI, the gateway, the skills extension); only
``pincer.cli.serve.gateway_extensions`` is wrapped so that the fixture tools, prompts and resources
(``tests/gateway/conformance/fixtures``) are installed first. The fixtures are test scaffolding: they
are not in the wheel, and no command of pincer serves them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def main() -> None:
    # Run as a script: the repository root makes ``tests.gateway.conformance.fixtures`` importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    import pincer.cli.serve as serve_module
    from tests.gateway.conformance.fixtures import install_fixtures

    plain = serve_module.gateway_extensions

    async def with_fixtures(pincer: Any) -> tuple[Any, ...]:
        fixtures = await install_fixtures(pincer)
        return (fixtures, *await plain(pincer))

    serve_module.gateway_extensions = with_fixtures  # type: ignore[assignment]
    from pincer.cli.main import main as cli

    sys.argv = ["pincer", *sys.argv[1:]]
    cli()


if __name__ == "__main__":
    main()
