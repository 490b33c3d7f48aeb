"""The web console under ``/ui/``: static pages and scripts shipped in the package, served on the
apiserver's own listener (same TLS), and one helper that reads manifests for the placement preview.

The pages hold no data: the browser's script reads and writes through the ordinary REST paths with the
user's own token (or client certificate), so authentication and RBAC decide what each person sees and
may do, exactly as for ``kubectl``. :mod:`.assets` serves the files, :mod:`.manifests` the helper.
"""

from ironpool.apiserver.ui.assets import UiAssets
from ironpool.apiserver.ui.manifests import ManifestsEndpoint, parse_manifests

__all__ = ["ManifestsEndpoint", "UiAssets", "parse_manifests"]
