"""The tool builder: describe -> plan -> code -> check -> build -> test -> fix -> sign -> register.

    result = await build_tool(BuildRequest(description="...", hosts=("api.example.com",)), ...)

See :mod:`pincer.builder.build` for the stages and ``docs/builder.md`` for the model's contract
(the ``submit_plan`` and ``submit_code`` tool calls).
"""

from __future__ import annotations

__all__ = ["BuildRequest", "BuildReport"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from pincer.builder import build

        return getattr(build, name)
    raise AttributeError(name)
