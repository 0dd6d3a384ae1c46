package job

import "strings"

// GatewayStream is the gateway client that consumes the stream as a
// stream, as a client rendering it would: it sets
// PromptRequest.omit_outcome_text (it has the chunks, so the outcome gives
// only the text's length), and takes the chunks the gateway holds at once
// as one event, which it splits back into the agent's chunks: the
// gateway's default, and what coalesce_chunks asks the baseline for.
const GatewayStream = "gateway-stream"

// GatewayEach is the default gateway client asking for one event per chunk
// the agent sent (PromptRequest.chunk_delivery CHUNK_DELIVERY_EACH): the
// per-chunk path that a client which sets nothing no longer takes, since
// the gateway coalesces by default. It has no baseline run: the baseline
// (a808356) knows no chunk_delivery, and its default, one event per chunk,
// is its "gateway" rows.
const GatewayEach = "gateway-each"

// GatewayStreamMemory is the gateway-stream client on a gateway configured
// with `store: memory`, and Watch the WatchTurn client that replays a
// finished gateway-stream turn.
const (
	GatewayStreamMemory = "gateway-stream-memory"
	Watch               = "watch"
)

// FloodAgent is the test agent's name in the benchmark's gateway
// configuration.
const FloodAgent = "flood"

// FloorLoaded is the floor client with busy-loop processes beside it that
// burn what the gateway and the gateway's client burned in the same run.
// It is a control for the latency comparison: the gateway's chunks pass
// through two more processes than the floor's, on the same two cores, and
// this row shows what that much competition for the CPU alone does to the
// floor.
const FloorLoaded = "floor-loaded"

// Relay is the gateway client calling the relay (`acpbench relay`; what
// it is and why, bench/internal/clients/relay.go) instead of acpgate.
const Relay = "relay"

// FloorContained is the floor client starting its agent as acpgate does:
// through acpgate's launcher, in the PID (and user) and mount namespaces
// acpgate gives an agent on this machine, with the agent's own /proc. Its
// time to first chunk against the floor's is what the containment costs;
// the gateway's against it is what the gateway adds.
const FloorContained = "floor-contained"

// naiveSuffix marks a label whose client runs the naive agent:
// "floor/naive" is the floor client on it, "gateway/naive" the gateway
// client of a gateway running it.
const naiveSuffix = "/naive"

// NaiveAgent is the naive agent's name in the benchmark's gateway
// configuration; `acpbench agent` runs it.
const NaiveAgent = "naive"

// OnNaive is the label of client's results on the naive agent.
func OnNaive(client string) string { return client + naiveSuffix }

// isNaive says whether a label's client runs the naive agent.
func isNaive(label string) bool {
	return strings.HasSuffix(strings.TrimSuffix(label, BaselineSuffix), naiveSuffix)
}

// BaselineSuffix marks a client's results on the baseline's gateway.
const BaselineSuffix = "@baseline"

// OnBaseline is the label of client's results on the baseline gateway.
func OnBaseline(client string) string { return client + BaselineSuffix }

// ClientOf is the client a label runs: the label without its suffixes.
func ClientOf(label string) string {
	return strings.TrimSuffix(strings.TrimSuffix(label, BaselineSuffix), naiveSuffix)
}

// IsBaseline says whether a label's client calls the baseline's gateway.
func IsBaseline(label string) bool { return strings.HasSuffix(label, BaselineSuffix) }

// ForLabel is the job a label's client runs, for n chunks of size bytes.
func ForLabel(label string, n, size int) Job {
	return Job{Client: ClientOf(label), Naive: isNaive(label), N: n, Size: size}
}

// WithBaseline is clients with, when there is a baseline, each gateway
// client's turn on the baseline right after its turn on the working tree.
func WithBaseline(clients []string, baseline bool) []string {
	if !baseline {
		return clients
	}
	var out []string
	for _, c := range clients {
		out = append(out, c)
		if HasBaseline(c) {
			out = append(out, OnBaseline(c))
		}
	}
	return out
}

// HasBaseline says whether a label's client also runs on the baseline:
// every gateway client but GatewayEach, which asks for what the baseline
// does by default.
func HasBaseline(label string) bool {
	return ViaGateway(label) && !IsBaseline(label) && ClientOf(label) != GatewayEach
}

// ViaRelay says whether a label's client calls the relay.
func ViaRelay(label string) bool { return ClientOf(label) == Relay }

// ViaGateway says whether a label's client calls a gateway (the working
// tree's or the baseline's) rather than an agent directly.
func ViaGateway(label string) bool {
	c := ClientOf(label)
	return c == "gateway" || c == GatewayStream || c == GatewayEach
}
