"""Kubernetes object semantics over the store, the same for every kind (:mod:`.generic`), with the
per-object rules of a write (:mod:`.objectmeta`), the read-modify-write loop (:mod:`.read_modify_write`,
:mod:`.keylocks`), lists and watches (:mod:`.listing`), field ownership and server-side apply
(:mod:`.fieldmanager`), strategic merge patch (:mod:`.strategic_patch`), the kinds' schemas and shapes
(:mod:`.schemas`), and the subresources' handlers (:mod:`.subresources`)."""
