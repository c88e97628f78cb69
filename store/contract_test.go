package store_test

import (
	"testing"

	"github.com/threadline/threadline/store"
	"github.com/threadline/threadline/store/pgtest"
	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/threadtest"
)

// TestStoreContract runs the thread.Store behaviour suite the fake also
// passes, each subtest on a database of its own.
func TestStoreContract(t *testing.T) {
	t.Parallel()
	threadtest.StoreContract(t, func(t *testing.T) thread.Store { return store.New(pgtest.Pool(t)) })
}
