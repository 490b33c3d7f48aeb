"""ironpool.allinone: ``ironpool up`` - every component for one host in one asyncio process.

Modules: :mod:`.datadir` (layout, lock, admin token), :mod:`.classes` (class manifests for the
runtimes and the API), :mod:`.image` (the tiny image), :mod:`.servers` (apiserver and runtimes),
:mod:`.progress`, :mod:`.up` (orchestration).
"""
