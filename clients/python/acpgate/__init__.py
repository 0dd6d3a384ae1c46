"""Python client for acpgate's AgentGateway gRPC service.

acpgate.v1 holds the stubs generated from proto/acpgate/v1 by
clients/python/generate.sh; acpgate.client has small helpers on top of them.
Install it as a package (clients/python/pyproject.toml: pip install
./clients/python, which brings grpcio and protobuf), or use it in place on
Debian's python3-grpcio and python3-protobuf with this directory on
PYTHONPATH.
"""
