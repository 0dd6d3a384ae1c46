package translate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"
)

func chunkLine(size int) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","messageId":"m1","content":{"type":"text","text":%q}}}}`,
		strings.Repeat("x", size))
}

// BenchmarkDecodeChunk compares the gateway's decoding of one
// agent_message_chunk line (envelope, then update) with the floor: one
// json.Unmarshal into the SDK's SessionNotification. Compare the two
// sub-benchmarks of one size side by side in one run.
func BenchmarkDecodeChunk(b *testing.B) {
	for _, size := range []int{64, 64 << 10} {
		line := chunkLine(size)
		b.Run(fmt.Sprintf("gateway/%dB", size), func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				var env struct {
					Method string          `json:"method"`
					Params json.RawMessage `json:"params"`
				}
				if err := json.Unmarshal(line, &env); err != nil {
					b.Fatal(err)
				}
				_, u, err := Decode(env.Params, nil)
				if err != nil || !u.HasChunk || len(u.Chunk.Text) != size {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("floor/%dB", size), func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				var env struct {
					Params acpsdk.SessionNotification `json:"params"`
				}
				if err := json.Unmarshal(line, &env); err != nil {
					b.Fatal(err)
				}
				if env.Params.Update.AgentMessageChunk == nil {
					b.Fatal("no chunk")
				}
			}
		})
	}
}

// BenchmarkDecodeUpdate is the gateway's own share of a chunk line: the
// update, once the envelope is split off (as acp/jsonrpc does without a
// decode).
func BenchmarkDecodeUpdate(b *testing.B) {
	for _, size := range []int{64, 64 << 10} {
		var env struct {
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(chunkLine(size), &env); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			b.SetBytes(int64(len(env.Params)))
			b.ReportAllocs()
			var ids IDCache // as a connection keeps
			for b.Loop() {
				_, u, err := Decode(env.Params, &ids)
				if err != nil || !u.HasChunk || len(u.Chunk.Text) != size {
					b.Fatal(err)
				}
			}
		})
	}
}
