package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the command's tests leak no goroutine.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
