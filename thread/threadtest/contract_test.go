package threadtest_test

import (
	"testing"

	"github.com/threadline/threadline/thread"
	"github.com/threadline/threadline/thread/threadtest"
)

func TestStoreContract(t *testing.T) {
	t.Parallel()
	threadtest.StoreContract(t, func(*testing.T) thread.Store { return threadtest.New() })
}
