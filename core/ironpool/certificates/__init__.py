"""Pool identities by certificate, as Kubernetes' kubelet TLS bootstrap: the control plane's side
(:mod:`.approver` decides, :mod:`.signer` signs, :mod:`.controller` runs both in the
controller-manager) and the joining host's (:mod:`.discovery` finds and pins the CA, :mod:`.bootstrap`
asks for a certificate, :mod:`.rotation` renews it before it expires)."""
