"""Python client for acpgate's AgentGateway gRPC service.

acpgate.v1 holds the stubs generated from proto/acpgate/v1 by
clients/python/generate.sh; acpgate.client has small helpers on top of them.
Both run on Debian's python3-grpcio and python3-protobuf under the system
python3, with this directory (clients/python) on PYTHONPATH.
"""
