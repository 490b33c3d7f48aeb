"""IP address management in the apiserver: what is allocated (:mod:`.index`, kept current by a store
watch), how an allocation is decided (:mod:`.planner`), the ranges inside one prefix
(:mod:`.ranges`), what a decision sets aside until its write ends (:mod:`.tentative`), and the
guard keys that make it hold across apiservers (:mod:`.guards`). The admission plugin
:mod:`ironpool.apiserver.admission.ipam` applies it to every write."""
