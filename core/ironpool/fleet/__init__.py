"""Fleet health: the controllers of ``ironpool controller-manager`` (control-plane side).

``lifecycle`` is the pool lifecycle controller (Kubernetes' node lifecycle controller: heartbeat
Leases, ``Ready=Unknown``, the unreachable ``NoExecute`` taint, evictions), its decisions are pure
functions in ``decisions``, and ``manager`` runs it as one leader-elected replica among several.
Imports only ``ironpool.api`` and ``ironpool.client``.
"""
