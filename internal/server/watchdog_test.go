package server

import (
	"log/slog"
	"testing"
	"time"
)

func TestAShutdownThatOverrunsItsBoundEndsTheProcess(t *testing.T) {
	exited := make(chan int, 1)
	stop := shutdownWatchdog(20*time.Millisecond, func(code int) { exited <- code }, slog.New(slog.DiscardHandler))
	defer stop()
	select {
	case code := <-exited:
		if code != 1 {
			t.Errorf("exit code %d, want 1", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watchdog did not end a shutdown past its bound")
	}
}

func TestAShutdownThatFinishesInTimeIsNotEnded(t *testing.T) {
	exited := make(chan int, 1)
	stop := shutdownWatchdog(50*time.Millisecond, func(code int) { exited <- code }, slog.New(slog.DiscardHandler))
	stop()
	select {
	case code := <-exited:
		t.Errorf("a disarmed watchdog exited with %d", code)
	case <-time.After(200 * time.Millisecond):
	}
}
