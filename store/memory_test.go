package store_test

import (
	"testing"

	"github.com/acpgate/acpgate/store"
	"github.com/acpgate/acpgate/store/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return store.NewMemory() })
}
