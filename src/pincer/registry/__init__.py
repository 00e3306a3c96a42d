"""The live set of tools from all runtimes; hot add/remove; change events."""

from pincer.registry.registry import Registry, RegistryEvent

__all__ = ["Registry", "RegistryEvent"]
