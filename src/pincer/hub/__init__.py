"""The hub: catalogs of tools and skills, a hub server, signed artifacts, one lockfile.

Modules, from the inside out:

- ``artifact``: kinds, ``kind/name`` keys, semver, fingerprints and the signed manifest;
- ``archive``: deterministic packing and safe unpacking of ``.tar.gz`` archives;
- ``signing`` and ``trust``: ed25519 publisher keys and whose signatures are accepted;
- ``scanner``: the install-time scanner (download-and-execute, miners, hidden Unicode, ...);
- ``lockfile`` and ``integrity``: ``pincer.lock`` and re-verifying what is installed;
- ``sources``, ``ironclaw``, ``mcp_registry``, ``remote``, ``index``, ``catalog``: where
  artifacts come from and how they are searched;
- ``installer`` and ``deploy``: the lifecycle (install, update, rollback, pin, remove);
- ``server``: the hub server (``pincer hub serve``);
- ``agent_tools``: ``skills_search`` and ``skills_install`` for agents.

Nothing here is imported by the light CLI commands; ``integrity`` (which every start uses) keeps
to the standard library.
"""
