"""The types of the names ``pincer/__init__.py`` loads on first use (the same names; tests/test_public_api.py)."""

__version__: str

from pincer.config import (
    Config as Config,
)
from pincer.config import (
    load_config as load_config,
)
from pincer.config import (
    parse_config as parse_config,
)
from pincer.core.effects import EffectKind as EffectKind
from pincer.core.errors import (
    ApprovalDenied as ApprovalDenied,
)
from pincer.core.errors import (
    ApprovalTimeout as ApprovalTimeout,
)
from pincer.core.errors import (
    ArgumentsInvalid as ArgumentsInvalid,
)
from pincer.core.errors import (
    BudgetExceeded as BudgetExceeded,
)
from pincer.core.errors import (
    ConfigError as ConfigError,
)
from pincer.core.errors import (
    Denied as Denied,
)
from pincer.core.errors import (
    EgressDenied as EgressDenied,
)
from pincer.core.errors import (
    ExtraMissing as ExtraMissing,
)
from pincer.core.errors import (
    ManifestError as ManifestError,
)
from pincer.core.errors import (
    PincerError as PincerError,
)
from pincer.core.errors import (
    PolicyError as PolicyError,
)
from pincer.core.errors import (
    ProviderError as ProviderError,
)
from pincer.core.errors import (
    RuntimeUnavailable as RuntimeUnavailable,
)
from pincer.core.errors import (
    SecretError as SecretError,
)
from pincer.core.errors import (
    StoreError as StoreError,
)
from pincer.core.errors import (
    ToolError as ToolError,
)
from pincer.core.errors import (
    ToolNotFound as ToolNotFound,
)
from pincer.core.errors import (
    ToolTimeout as ToolTimeout,
)
from pincer.core.errors import (
    UsageError as UsageError,
)
from pincer.core.values import (
    CallRequest as CallRequest,
)
from pincer.core.values import (
    HostContext as HostContext,
)
from pincer.core.values import (
    ToolResult as ToolResult,
)
from pincer.llm.run import RunRequest as RunRequest
from pincer.runtimes.native.decorator import NativeTool as NativeTool
from pincer.runtimes.native.decorator import tool as tool
from pincer.runtimes.native.runtime import NativeRuntime as NativeRuntime
from pincer.service import Pincer as Pincer

__all__ = [
    "__version__",
    "Pincer",
    "Config",
    "load_config",
    "parse_config",
    "CallRequest",
    "ToolResult",
    "HostContext",
    "RunRequest",
    "tool",
    "NativeTool",
    "NativeRuntime",
    "EffectKind",
    "PincerError",
    "UsageError",
    "ToolNotFound",
    "ArgumentsInvalid",
    "ConfigError",
    "ManifestError",
    "PolicyError",
    "Denied",
    "ApprovalDenied",
    "ApprovalTimeout",
    "BudgetExceeded",
    "EgressDenied",
    "SecretError",
    "ToolError",
    "ToolTimeout",
    "ProviderError",
    "RuntimeUnavailable",
    "ExtraMissing",
    "StoreError",
]
