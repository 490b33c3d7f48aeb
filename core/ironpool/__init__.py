"""ironpool: IronCore's pool scheduling model on your own libvirt hosts."""

__version__ = "0.1.0"
