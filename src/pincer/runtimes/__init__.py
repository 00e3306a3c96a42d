"""Runtimes execute tools. They enforce a HostContext and never decide policy."""
