package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// Tests of a state directory damaged while the gateway was stopped: a
// journal file cut short, a database file that is not one.

// journaledTurn runs a turn of a few chunks on a gateway keeping its state
// in state, stops the gateway, and returns the turn's id and its journal's
// data files.
func journaledTurn(t *testing.T, cfg, state string) (string, []string) {
	t.Helper()
	s := serve(t, "--config", cfg)
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	stream, err := client.Prompt(context.Background(), &acpgatev1.PromptRequest{Agent: "test", Text: strings.Repeat("chunk journaled text\n", 20) + "stop end_turn"})
	if err != nil {
		t.Fatal(err)
	}
	events := drain(t, stream)
	s.stop(t, syscall.SIGTERM)
	files, err := filepath.Glob(filepath.Join(state, "journals", "*.events"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no journal files in %s (%v)", state, err)
	}
	return events[0].GetStarted().GetTurnId(), files
}

func TestADamagedJournalIsDataLossAndTheStartUpLogNamesItsTurn(t *testing.T) {
	state := t.TempDir()
	cfg, _ := durableConfig(t, fmt.Sprintf("state_dir: %q\n", state))
	turnID, files := journaledTurn(t, cfg, state)
	for _, f := range files {
		if err := os.Truncate(f, 3); err != nil {
			t.Fatal(err)
		}
	}

	s := serve(t, "--config", cfg)
	var named bool
	for line := range strings.SplitSeq(s.log(), "\n") {
		named = named || strings.Contains(line, "damaged") && strings.Contains(line, turnID)
	}
	if !named {
		t.Errorf("the start-up log does not name turn %s as damaged:\n%s", turnID, s.log())
	}
	client := acpgatev1.NewAgentGatewayClient(dialTest(t, s.addr))
	watch, err := client.WatchTurn(context.Background(), &acpgatev1.WatchTurnRequest{TurnId: turnID})
	if err == nil {
		for err == nil {
			_, err = watch.Recv()
		}
	}
	if errors.Is(err, io.EOF) || status.Code(err) != codes.DataLoss || !strings.Contains(status.Convert(err).Message(), "damaged") {
		t.Errorf("watching a turn whose journal is damaged: %v, want DATA_LOSS saying so", err)
	}
}

func TestADatabaseThatDoesNotOpenSaysToMoveItAsideAndItsJournalsStay(t *testing.T) {
	state := t.TempDir()
	cfg, _ := durableConfig(t, fmt.Sprintf("state_dir: %q\n", state))
	_, files := journaledTurn(t, cfg, state)
	db := filepath.Join(state, "acpgate.db")
	for _, f := range []string{db + "-wal", db + "-shm"} {
		_ = os.Remove(f)
	}
	if err := os.WriteFile(db, []byte(strings.Repeat("not a database\n", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}

	_, err := startServe(t, "--config", cfg)
	if err == nil {
		t.Fatal("the gateway started on a file that is not a database")
	}
	for _, want := range []string{db, "not a usable database", "move", "aside", "journals"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}

	// Doing what it says starts the gateway, and the journals are kept.
	if err := os.Rename(db, db+".damaged"); err != nil {
		t.Fatal(err)
	}
	serve(t, "--config", cfg)
	for _, f := range files {
		kept, err := filepath.Glob(filepath.Join(state, "journals.unclaimed-*", filepath.Base(f)))
		if err != nil || len(kept) != 1 {
			t.Errorf("journal %s was not kept aside after the database was moved (%v)", filepath.Base(f), err)
		}
	}
}
