package clients

import (
	"encoding/json"
	"testing"
	"time"
)

func TestTheNaiveAgentsLineIsValidJSONWithTheStampTheVerifierReads(t *testing.T) {
	line, at := naiveLine("s1", 40)
	for i := range 3 {
		stampLine(line, at, i)
		var m floorMessage
		var p minNotification
		m.Params = &p
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		v := verifier{size: 40, next: i}
		sent := v.chunk(p.Update.Content.Text)
		if v.bad != 0 || p.Update.SessionUpdate != "agent_message_chunk" || p.SessionID != "s1" {
			t.Fatalf("chunk %d: %s (%+v)", i, v.badMsg, p)
		}
		if d := time.Since(time.Unix(0, sent)); d < 0 || d > time.Minute {
			t.Fatalf("chunk %d's stamp is %v from now", i, d)
		}
	}
}

func TestTheNaiveAgentTakesOnlyAFloodScript(t *testing.T) {
	if n, s, r, err := parseFloodScript("flood_timed 300 40 100\n"); err != nil || n != 300 || s != 40 || r != 100 {
		t.Errorf("flood_timed 300 40 100: %d %d %d %v", n, s, r, err)
	}
	if n, s, r, err := parseFloodScript("flood_timed 5 64"); err != nil || n != 5 || s != 64 || r != 0 {
		t.Errorf("flood_timed 5 64: %d %d %d %v", n, s, r, err)
	}
	for _, bad := range []string{"", "hello", "flood_timed 5", "flood_timed 5 20", "flood_timed -1 64", "flood_timed 5 64 1 2"} {
		if _, _, _, err := parseFloodScript(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
