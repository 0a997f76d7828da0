"""The web wing: what HTTP training and the server bench run beside the server. h2load (:mod:`.h2load`), the
upstream a proxy scenario talks to (:mod:`.upstream`), TLS certificates (:mod:`.certs`), the document root
(:mod:`.docroot`) and loopback ports (:mod:`.net`). It imports no wing above it; the workload reads h2load's
options. Nothing is re-exported."""
