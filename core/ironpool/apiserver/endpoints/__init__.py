"""The HTTP face of the API: what a request asks for (:mod:`.request_parsing`), bodies
(:mod:`.bodies`) and responses (:mod:`.responses`), watch streams (:mod:`.watch_stream`), Tables
(:mod:`.tables`), health, version, metrics, OpenAPI and discovery (:mod:`.nonresource`,
:mod:`.openapi`, :mod:`.version`, :mod:`.metrics`), and SelfSubjectAccessReview
(:mod:`.access_review`)."""
