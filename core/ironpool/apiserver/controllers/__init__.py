"""The controllers that run inside the apiserver process: the objects every installation starts with
(:mod:`.bootstrap`), the namespace controller (:mod:`.namespace`), the networking controller
(:mod:`.networking`), the resource quota controller (:mod:`.resourcequota`) and the ClusterRole
aggregation controller (:mod:`.clusterrole_aggregation`)."""
