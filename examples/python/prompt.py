#!/usr/bin/python3
"""Stream one prompt turn from acpgate, print the answer as it arrives, and
branch on how the turn ended.

    go run ./cmd/acpgate serve &     # the gateway, on the demo agent
    PYTHONPATH=clients/python /usr/bin/python3 examples/python/prompt.py "tell me about acpgate"
    PYTHONPATH=clients/python /usr/bin/python3 examples/python/prompt.py --agent demo refuse

Try the demo agent's keywords: refuse, truncate, loop, fail, tools, slow.
Ctrl-C during a turn asks the gateway to cancel it (the Cancel call) and
waits for the cancellation to arrive as the turn's terminal event.

Needs Debian's python3-grpcio and python3-protobuf (system python3) and the
stubs in clients/python on PYTHONPATH.
"""

import argparse
import os
import signal
import sys

import grpc

from acpgate.client import event_arm, error_class, harness_error_from_rpc_error
from acpgate.v1 import gateway_pb2, gateway_pb2_grpc, outcome_pb2


def report_error(error):
    """Reports a turn that did not complete; returns the exit status (the
    same codes as `acpgate prompt`)."""
    print(f"error: {error.message}", file=sys.stderr)
    if error.HasField("partial"):
        print(f"(the agent had said {error.partial.total_bytes} bytes before the turn ended)", file=sys.stderr)
    kind = error_class(error)
    if kind == "transport":
        t = error.transport
        print("the channel to the agent broke:", outcome_pb2.TransportReason.Name(t.reason), file=sys.stderr)
        if t.HasField("exit_code"):
            print(f"the agent exited with status {t.exit_code}", file=sys.stderr)
        if t.stderr_tail:
            print("the agent's stderr ended with:\n" + t.stderr_tail, file=sys.stderr)
        return 3
    if kind == "protocol":
        print("the agent broke the ACP wire contract", file=sys.stderr)
        return 4
    if kind == "harness":
        h = error.harness
        if h.cancelled:
            print("the turn was cancelled", file=sys.stderr)
            return 7
        if h.auth_required:
            print("the agent needs credentials configured for the gateway", file=sys.stderr)
            return 8
        if h.HasField("rpc_code"):
            print(f"the agent failed with JSON-RPC error {h.rpc_code}", file=sys.stderr)
        else:
            print("the agent stopped short:", outcome_pb2.StopKind.Name(h.stop_kind), file=sys.stderr)
        return 5
    if kind == "policy_refused":
        print("the agent refused the prompt", file=sys.stderr)
        return 6
    if kind == "capability_not_supported":
        print(f"the agent does not support {error.capability_not_supported.primitive}", file=sys.stderr)
        return 9
    if kind == "stale_target":
        return 10
    if kind == "gateway":
        print("the gateway itself failed the turn; running it again may succeed", file=sys.stderr)
        return 11
    return 5  # a class this example does not know yet


def main():
    parser = argparse.ArgumentParser(description="Stream one prompt turn from acpgate.")
    parser.add_argument("--addr", default=os.environ.get("ACPGATE_ADDR") or "127.0.0.1:7070")
    parser.add_argument("--agent", default="demo")
    parser.add_argument("text", nargs="*")
    args = parser.parse_args()
    text = " ".join(args.text) or "Hello from the Python example"

    with grpc.insecure_channel(args.addr) as channel:
        gateway = gateway_pb2_grpc.AgentGatewayStub(channel)
        call = gateway.Prompt(gateway_pb2.PromptRequest(agent=args.agent, text=text))
        session = {"id": ""}

        def on_interrupt(signum, frame):
            if not session["id"]:
                call.cancel()  # no turn yet: abandon the call
                return
            print("\n[cancelling the turn]", file=sys.stderr)
            gateway.Cancel(gateway_pb2.CancelRequest(session_id=session["id"]), timeout=5)
            signal.signal(signal.SIGINT, lambda *_: call.cancel())  # a second Ctrl-C gives up

        signal.signal(signal.SIGINT, on_interrupt)

        last_message, printed = None, False
        try:
            for event in call:
                arm = event_arm(event)
                if arm == "started":
                    session["id"] = event.started.session_id
                    print(f"[{event.started.agent}: turn {event.started.turn_id} on session "
                          f"{event.started.session_id}]", file=sys.stderr)
                elif arm == "agent_message_chunk":
                    chunk = event.agent_message_chunk
                    # A new message id starts a new message: separate them as
                    # the outcome's text does, with a blank line.
                    if printed and chunk.message_id != last_message:
                        print("\n", flush=True)
                    last_message = chunk.message_id
                    print(chunk.text, end="", flush=True)
                    printed = printed or chunk.text != ""
                elif arm == "tool_call":
                    print(f"[tool: {event.tool_call.title}]", file=sys.stderr)
                elif arm == "outcome":
                    if printed:
                        print()
                    if not event.outcome.text:
                        print("[completed without text: a turn of tool calls only]", file=sys.stderr)
                    return 0
                elif arm == "error":
                    if printed:
                        print()
                    return report_error(event.error)
        except grpc.RpcError as err:
            # A non-OK status: the gateway rejected the call and no turn ran.
            print(f"prompt: the gateway rejected the call: {err.code().name}: {err.details()}", file=sys.stderr)
            detail = harness_error_from_rpc_error(err)
            if detail is not None:
                report_error(detail)
            return 1
    print("prompt: the stream ended without a terminal event", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
