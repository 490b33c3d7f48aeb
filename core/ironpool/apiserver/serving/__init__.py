"""How the apiserver meets the network: where it listens (:mod:`.listening`), HTTPS and the client
certificate's identity (:mod:`.tls`), the local PKI that ``ironpool up`` keeps (:mod:`.certs`),
connection hygiene (:mod:`.connections`) and the per-user in-flight and memory limits
(:mod:`.inflight`)."""
