package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/acpgate/acpgate/internal/testpg"
)

// withPostgres runs the tests and then stops the PostgreSQL server the
// replica tests started, if any.
type withPostgres struct{ m *testing.M }

func (w withPostgres) Run() int { return testpg.Main(w.m) }

func TestMain(m *testing.M) { goleak.VerifyTestMain(withPostgres{m}) }
