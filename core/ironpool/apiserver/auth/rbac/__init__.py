"""Kubernetes RBAC for users: Roles and bindings indexed from the store (:mod:`.index`), rule matching
(:mod:`.rules`), the default ClusterRoles and bindings (:mod:`.defaults`) and the escalation check on
writes of roles and bindings (:mod:`.escalation`)."""
