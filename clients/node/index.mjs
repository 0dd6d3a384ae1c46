// Node client for acpgate's AgentGateway gRPC service.
//
// It loads proto/acpgate/v1 at run time with @grpc/proto-loader and calls
// the gateway with @grpc/grpc-js. Messages are plain objects with the .proto
// field names (keepCase), 64-bit integers as strings, enums as their names,
// and oneofs named by a virtual property holding the set arm's name:
//
//   import { connect, eventArm, errorClass } from "<this directory>/index.mjs";
//   const gateway = connect("127.0.0.1:7070");
//   for await (const ev of gateway.Prompt({ agent: "demo", text: "hi" })) {
//     if (eventArm(ev) === "agent_message_chunk") process.stdout.write(ev.agent_message_chunk.text);
//   }
//
// A Prompt stream that started a turn always ends with status OK after
// exactly one terminal event: branch on eventArm(ev) ("outcome" or "error")
// and, for an error, on errorClass(ev.error) ("transport", "protocol",
// "harness", "policy_refused", "capability_not_supported", "stale_target").
// A call the gateway rejected fails with a gRPC status error; when the agent
// caused the rejection, harnessErrorFromStatus(err) returns the HarnessError
// attached to it. toProtoJSON renders any message as protojson would.
//
// The .proto files are found in $ACPGATE_PROTO_DIR, else in ./proto beside
// this file (where `npm pack` puts a copy, so an installed package needs
// nothing of the repository), else at ../../proto (the repository layout).

import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";
import protobuf from "protobufjs";

export { grpc };

/** Where `acpgate serve` listens unless configured otherwise. */
export const DEFAULT_ADDRESS = "127.0.0.1:7070";

/** The PromptEvent arms that end a stream. */
export const TERMINAL_ARMS = Object.freeze(["outcome", "error"]);

/** The fixed start of a cancelled turn's HarnessError.message. */
export const CANCELLED_PREFIX = "the prompt turn was cancelled";

/** The directory holding acpgate/v1/*.proto. */
export const PROTO_DIR = protoDir();

function protoDir() {
  if (process.env.ACPGATE_PROTO_DIR) return process.env.ACPGATE_PROTO_DIR;
  const here = path.dirname(fileURLToPath(import.meta.url));
  const bundled = path.join(here, "proto");
  if (fs.existsSync(path.join(bundled, "acpgate", "v1", "gateway.proto"))) return bundled;
  return path.resolve(here, "..", "..", "proto");
}

/** The proto-loader options every message object is decoded with. */
export const LOADER_OPTIONS = Object.freeze({
  keepCase: true,
  longs: String,
  enums: String,
  defaults: false,
  oneofs: true,
});

/** The proto-loader package definition of acpgate/v1/gateway.proto. */
export const packageDefinition = protoLoader.loadSync(["acpgate/v1/gateway.proto"], {
  ...LOADER_OPTIONS,
  includeDirs: [PROTO_DIR],
});

/** The generic grpc-js client class of acpgate.v1.AgentGateway. */
export const AgentGatewayClient = grpc.loadPackageDefinition(packageDefinition).acpgate.v1.AgentGateway;

/**
 * Returns a client for the gateway at address, over plaintext. Its methods
 * are the service's (Prompt, CreateSession, Cancel, ...) with grpc-js
 * calling conventions; see call() for a promise-returning unary call.
 */
export function connect(address = DEFAULT_ADDRESS, options = {}) {
  return new AgentGatewayClient(address, grpc.credentials.createInsecure(), options);
}

/** Calls a unary method and returns a promise of its response. */
export function call(client, method, request, options = {}) {
  return new Promise((resolve, reject) => {
    client[method](request, new grpc.Metadata(), options, (err, response) =>
      err ? reject(err) : resolve(response),
    );
  });
}

/** The name of a PromptEvent's arm, as in the .proto ("started", ..., "outcome", "error"). */
export function eventArm(event) {
  return event.event;
}

/** The name of a HarnessError's kind ("transport", "protocol", "harness", ...). */
export function errorClass(harnessError) {
  return harnessError.kind;
}

/** The canonical name of a gRPC status code, for example "FAILED_PRECONDITION". */
export function statusName(code) {
  return grpc.status[code] ?? String(code);
}

// Reflection over the same .proto files, for decoding status details and for
// rendering protojson: field names as in the .proto, like the objects above.
const reflection = (() => {
  const root = new protobuf.Root();
  root.resolvePath = (origin, target) =>
    target.startsWith("google/protobuf/") ? target : path.join(PROTO_DIR, target);
  root.loadSync("acpgate/v1/gateway.proto", { keepCase: true });
  root.resolveAll();
  return root;
})();

// google.rpc.Status, from its three fields: all that reading a status
// detail needs.
const rpcStatus = protobuf.Root.fromJSON({
  nested: {
    google: {
      nested: {
        rpc: {
          nested: {
            Status: {
              fields: {
                code: { type: "int32", id: 1 },
                message: { type: "string", id: 2 },
                details: { rule: "repeated", type: "Any", id: 3 },
              },
            },
            Any: { fields: { type_url: { type: "string", id: 1 }, value: { type: "bytes", id: 2 } } },
          },
        },
      },
    },
  },
}).lookupType("google.rpc.Status");

/**
 * The HarnessError attached as a detail to a failed call's status, decoded
 * like every other message object, or null. The gateway attaches one when the
 * agent caused the rejection (CreateSession failing with FAILED_PRECONDITION
 * because session/new answered -32000, UNAVAILABLE because the agent could not
 * be started, ...).
 */
export function harnessErrorFromStatus(err) {
  const values = err?.metadata?.get?.("grpc-status-details-bin") ?? [];
  const type = reflection.lookupType("acpgate.v1.HarnessError");
  for (const raw of values) {
    const status = rpcStatus.decode(Buffer.from(raw));
    for (const detail of status.details) {
      if (detail.type_url.endsWith("/acpgate.v1.HarnessError")) {
        return type.toObject(type.decode(detail.value), LOADER_OPTIONS);
      }
    }
  }
  return null;
}

/**
 * Renders a message object (as decoded by this client) of the named type as
 * protojson would: lowerCamelCase names, implicit-presence fields omitted
 * when they hold their default, fields with presence (oneof arms, `optional`
 * fields, messages) kept even when zero, enums by name, 64-bit integers as
 * strings, Timestamps as RFC 3339 strings.
 */
export function toProtoJSON(typeName, object) {
  return renderMessage(reflection.lookupType(typeName), object);
}

function renderMessage(type, object) {
  if (type.fullName === ".google.protobuf.Timestamp") {
    return renderTimestamp(object);
  }
  const out = {};
  for (const field of type.fieldsArray) {
    const value = object[field.name];
    if (value === undefined || value === null) continue;
    if (field.map) throw new Error(`toProtoJSON: map field ${field.fullName} is not supported`);
    const key = jsonName(field.name);
    if (field.repeated) {
      if (value.length === 0) continue;
      out[key] = value.map((v) => renderValue(field, v));
      continue;
    }
    const presence = field.partOf !== null || field.resolvedType instanceof protobuf.Type;
    if (!presence && isDefault(field, value)) continue;
    out[key] = renderValue(field, value);
  }
  return out;
}

function renderValue(field, value) {
  const t = field.resolvedType;
  if (t instanceof protobuf.Type) return renderMessage(t, value);
  if (t instanceof protobuf.Enum) return typeof value === "number" ? (t.valuesById[value] ?? value) : value;
  switch (field.type) {
    case "int64":
    case "uint64":
    case "sint64":
    case "fixed64":
    case "sfixed64":
      return String(value);
    case "double":
    case "float":
      if (Number.isNaN(value)) return "NaN";
      if (value === Infinity) return "Infinity";
      if (value === -Infinity) return "-Infinity";
      return value;
    case "bytes":
      return Buffer.from(value).toString("base64");
    default:
      return value;
  }
}

function isDefault(field, value) {
  const t = field.resolvedType;
  if (t instanceof protobuf.Enum) return value === 0 || value === t.valuesById[0];
  switch (field.type) {
    case "string":
      return value === "";
    case "bool":
      return value === false;
    case "bytes":
      return value.length === 0;
    default:
      return Number(value) === 0; // numbers, and 64-bit integers as strings
  }
}

// jsonName is protoc's json_name: underscores dropped, the letter after each
// one upper-cased.
function jsonName(name) {
  let out = "";
  let upper = false;
  for (const c of name) {
    if (c === "_") {
      upper = true;
    } else {
      out += upper ? c.toUpperCase() : c;
      upper = false;
    }
  }
  return out;
}

function renderTimestamp(ts) {
  const seconds = BigInt(ts.seconds ?? 0);
  const nanos = Number(ts.nanos ?? 0);
  const iso = new Date(Number(seconds) * 1000).toISOString().slice(0, 19); // YYYY-MM-DDTHH:MM:SS
  let frac = "";
  if (nanos !== 0) {
    frac = String(nanos).padStart(9, "0");
    if (frac.endsWith("000000")) frac = frac.slice(0, 3);
    else if (frac.endsWith("000")) frac = frac.slice(0, 6);
    frac = "." + frac;
  }
  return `${iso}${frac}Z`;
}
