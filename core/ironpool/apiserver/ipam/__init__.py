"""IP address management in the apiserver: what is allocated (:mod:`.index`), how an allocation is
decided (:mod:`.planner`) and the ranges inside one prefix (:mod:`.ranges`). The admission plugin
:mod:`ironpool.apiserver.admission.ipam` applies it to every write."""
