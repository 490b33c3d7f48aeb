"""The encrypted-volume contract: between the volume runtime and the machine runtime on one host,
and with the poollets that hand them the key.

The volume runtime reports an encrypted volume's access attribute ``encryption`` as ``luks`` (a
qcow2 with LUKS inside, see :mod:`ironpool.runtime.volume.luks`); the key travels, as IronCore's
poollets pass it, under ``encryptionKey``: in ``VolumeSpec.encryption.secret_data`` to the volume
runtime, in ``VolumeConnection.encryption_data`` to the machine runtime
(:mod:`ironpool.runtime.machine.volume_secrets`).
"""

from __future__ import annotations

KEY_NAME = "encryptionKey"
ENCRYPTION_ATTRIBUTE = "encryption"
LUKS = "luks"
