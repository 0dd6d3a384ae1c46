"""Helpers for calling acpgate from Python.

    from acpgate.client import connect, event_arm, error_class
    from acpgate.v1 import gateway_pb2

    channel, gateway = connect("127.0.0.1:7070")
    for event in gateway.Prompt(gateway_pb2.PromptRequest(agent="demo", text="hi")):
        ...

A Prompt stream that started a turn always ends with status OK after exactly
one terminal event: branch on event_arm(event) ("outcome" or "error") and, for
an error, on error_class(event.error) ("transport", "protocol", "harness",
"policy_refused", "capability_not_supported", "stale_target"). A call the
gateway rejected raises grpc.RpcError; when the agent caused the rejection,
harness_error_from_rpc_error(err) returns the HarnessError attached to it.
"""

import grpc
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory

from acpgate.v1 import gateway_pb2_grpc, outcome_pb2

DEFAULT_ADDRESS = "127.0.0.1:7070"
"""Where `acpgate serve` listens unless configured otherwise."""

TERMINAL_ARMS = ("outcome", "error")
"""The PromptEvent arms that end a stream."""

CANCELLED_PREFIX = "the prompt turn was cancelled"
"""The fixed start of a cancelled turn's HarnessError.message."""


def connect(address=DEFAULT_ADDRESS):
    """Opens a plaintext channel to the gateway; returns (channel, stub).

    Close the channel when done (it is also a context manager)."""
    channel = grpc.insecure_channel(address)
    return channel, gateway_pb2_grpc.AgentGatewayStub(channel)


def event_arm(event):
    """The name of a PromptEvent's arm, as in the .proto ("started",
    "agent_message_chunk", ..., "outcome", "error")."""
    return event.WhichOneof("event")


def error_class(harness_error):
    """The name of a HarnessError's kind ("transport", "protocol", "harness",
    "policy_refused", "capability_not_supported" or "stale_target")."""
    return harness_error.WhichOneof("kind")


def _status_class():
    # google.rpc.Status, built from its three fields: Debian's python3-grpcio
    # ships no grpc_status module, and the message is all that is needed.
    pool = descriptor_pool.DescriptorPool()
    any_file = descriptor_pb2.FileDescriptorProto()
    any_pb2.DESCRIPTOR.CopyToProto(any_file)
    pool.Add(any_file)
    field = descriptor_pb2.FieldDescriptorProto
    status_file = descriptor_pb2.FileDescriptorProto(
        name="acpgate/client/google_rpc_status.proto",
        package="google.rpc",
        syntax="proto3",
        dependency=["google/protobuf/any.proto"],
    )
    msg = status_file.message_type.add(name="Status")
    msg.field.add(name="code", number=1, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    msg.field.add(name="message", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    msg.field.add(name="details", number=3, type=field.TYPE_MESSAGE, label=field.LABEL_REPEATED,
                  type_name=".google.protobuf.Any")
    pool.Add(status_file)
    desc = pool.FindMessageTypeByName("google.rpc.Status")
    get_class = getattr(message_factory, "GetMessageClass", None)
    if get_class is not None:
        return get_class(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


_Status = None


def harness_error_from_rpc_error(err):
    """The HarnessError attached to a non-OK status as a detail, or None.

    The gateway attaches one when the agent caused the rejection, for example
    CreateSession failing with FAILED_PRECONDITION because session/new
    answered -32000, or UNAVAILABLE because the agent could not be started."""
    global _Status
    trailers = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    for key, value in trailers or ():
        if key != "grpc-status-details-bin":
            continue
        if _Status is None:
            _Status = _status_class()
        status = _Status.FromString(value)
        for detail in status.details:
            if detail.Is(outcome_pb2.HarnessError.DESCRIPTOR):
                harness_error = outcome_pb2.HarnessError()
                detail.Unpack(harness_error)
                return harness_error
    return None
