package wire

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/store/sqlite"
	"github.com/acpgate/acpgate/internal/store/storetest"
)

// BenchmarkAChunksBytes journals text chunks of 64 B and 64 KiB, as the
// agent's reader builds them, through the gateway's encoder into a real
// SQLite store, and reports what one chunk costs on the wire (wire-B/chunk)
// and in the journal's files (journal-B/chunk), beside the time to encode
// and append it.
func BenchmarkAChunksBytes(b *testing.B) {
	for _, size := range []int{64, 64 << 10} {
		b.Run(byteSize(size), func(b *testing.B) {
			dir := b.TempDir()
			st, err := sqlite.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ctx := context.Background()
			const id = "turn-00000000000000000000000001"
			if _, _, err := st.Begin(ctx, storetest.NewTurn(id, "", 1, 0)); err != nil {
				b.Fatal(err)
			}
			if err := st.Started(ctx, id, "s1", store.Event{Seq: 1, Data: []byte("started")}); err != nil {
				b.Fatal(err)
			}
			text := strings.Repeat("t", size)
			before := journalBytes(b, dir)
			wire := 0
			b.ResetTimer()
			for i := range b.N {
				e := textChunkEvent(text)
				e.Seq = uint64(i + 2)
				wire += proto.Size(e)
				if err := st.Append(ctx, id, []store.Event{Encode(e, e.Seq)}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(wire)/float64(b.N), "wire-B/chunk")
			b.ReportMetric(float64(journalBytes(b, dir)-before)/float64(b.N), "journal-B/chunk")
		})
	}
}

func byteSize(n int) string {
	if n >= 1<<10 {
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

// journalBytes is the size of every journal file under dir.
func journalBytes(b *testing.B, dir string) int64 {
	var total int64
	err := filepath.Walk(filepath.Join(dir, "journals"), func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return total
}

// textChunkEvent is the event of an agent_message_chunk as the agent's
// reader builds it (acp/translate.go).
func textChunkEvent(text string) *acpgatev1.PromptEvent {
	return &acpgatev1.PromptEvent{Event: &acpgatev1.PromptEvent_AgentMessageChunk{AgentMessageChunk: &acpgatev1.MessageChunk{MessageId: "msg-1", Text: text}}}
}
