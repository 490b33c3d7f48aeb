"""Authorization beyond administrators: Kubernetes RBAC for users (:mod:`.index`, :mod:`.rules`,
:mod:`.defaults`), the pool graph for pool identities (:mod:`.graph`), both run as one authorizer
(:mod:`.authorizer`), and SelfSubjectAccessReview (:mod:`.review`)."""
