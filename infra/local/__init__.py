"""The stack's topology as processes on loopback, without Docker (see ``topology``).

    python -m infra.local          # start everything, print the URLs, stop on Ctrl-C
"""

from infra.local.topology import LocalStack, ServiceProcess

__all__ = ["LocalStack", "ServiceProcess"]
