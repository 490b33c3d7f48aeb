"""A multi-host ironpool rig on one machine: etcd members, apiservers, schedulers, the
controller-manager and joined hosts, each a process of its own (``ironpool rig up``)."""
