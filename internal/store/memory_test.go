package store_test

import (
	"testing"

	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/store/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return store.NewMemory() })
}
