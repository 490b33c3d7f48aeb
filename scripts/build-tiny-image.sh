#!/usr/bin/env bash
# The tiny image's build lives with the package (so an installed ironpool can build it too).
exec bash "$(dirname "$0")/../core/ironpool/images/build-tiny-image.sh" "$@"
