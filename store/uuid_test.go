package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// TestUUIDCodec: uuid.UUID values go to Postgres and back unchanged in
// binary and text formats, as values, pointers (nil is NULL) and arrays.
func TestUUIDCodec(t *testing.T) {
	t.Parallel()
	_, pool := setup(t)
	ctx := context.Background()
	a, b := uuid.New(), uuid.New()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		var gotA, gotText uuid.UUID
		var gotNil, gotPtr *uuid.UUID
		var gotArr []uuid.UUID
		var nilArg *uuid.UUID
		err := pool.QueryRow(ctx, `SELECT $1::uuid, $1::uuid::text::uuid, $2::uuid, $3::uuid, ARRAY[$1::uuid, $3::uuid]`,
			mode, a, nilArg, &b).Scan(&gotA, &gotText, &gotNil, &gotPtr, &gotArr)
		if err != nil {
			t.Fatalf("mode %v: %v", mode, err)
		}
		if gotA != a || gotText != a {
			t.Errorf("mode %v: got %s and %s, want %s", mode, gotA, gotText, a)
		}
		if gotNil != nil {
			t.Errorf("mode %v: nil pointer came back as %s, want NULL", mode, *gotNil)
		}
		if gotPtr == nil || *gotPtr != b {
			t.Errorf("mode %v: pointer came back as %v, want %s", mode, gotPtr, b)
		}
		if !slices.Equal(gotArr, []uuid.UUID{a, b}) {
			t.Errorf("mode %v: array came back as %v, want [%s %s]", mode, gotArr, a, b)
		}
		var same bool
		if err := pool.QueryRow(ctx, `SELECT $1::uuid::text = $2`, mode, a, a.String()).Scan(&same); err != nil || !same {
			t.Errorf("mode %v: Postgres reads the uuid as another value (same %v, err %v)", mode, same, err)
		}
		var null uuid.UUID
		if err := pool.QueryRow(ctx, `SELECT NULL::uuid`, mode).Scan(&null); err == nil {
			t.Errorf("mode %v: scanning NULL into uuid.UUID succeeded with %s, want an error", mode, null)
		}
		var arrText string
		if mode == pgx.QueryExecModeSimpleProtocol {
			continue // pgx cannot send a []uuid.UUID without a parameter type, codec or not
		}
		if err := pool.QueryRow(ctx, `SELECT $1::uuid[]::text`, mode, []uuid.UUID{a, b}).Scan(&arrText); err != nil || arrText != "{"+a.String()+","+b.String()+"}" {
			t.Errorf("mode %v: array argument read as %q (err %v), want {%s,%s}", mode, arrText, err, a, b)
		}
	}
}

// TestUUIDArrayArgument: a []uuid.UUID argument reaches Postgres as the
// same uuid[] (NULL for nil, empty for empty, every id in order).
func TestUUIDArrayArgument(t *testing.T) {
	t.Parallel()
	_, pool := setup(t)
	ctx := context.Background()
	many := make([]uuid.UUID, 100)
	for i := range many {
		many[i] = uuid.New()
	}
	for _, tc := range []struct {
		name string
		arg  []uuid.UUID
	}{{"nil", nil}, {"empty", []uuid.UUID{}}, {"one", many[:1]}, {"many", many}} {
		var isNull bool
		var n int
		var text string
		var back []uuid.UUID
		err := pool.QueryRow(ctx, `SELECT $1::uuid[] IS NULL, coalesce(cardinality($1::uuid[]), -1), coalesce($1::uuid[]::text, ''), $1::uuid[]`,
			tc.arg).Scan(&isNull, &n, &text, &back)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if isNull != (tc.arg == nil) {
			t.Errorf("%s: NULL %v, want %v", tc.name, isNull, tc.arg == nil)
		}
		if tc.arg == nil {
			continue
		}
		want := make([]string, len(tc.arg))
		for i, id := range tc.arg {
			want[i] = id.String()
		}
		if n != len(tc.arg) || text != "{"+strings.Join(want, ",")+"}" || !slices.Equal(back, tc.arg) {
			t.Errorf("%s: got cardinality %d, %q and %v back, want %d ids in order", tc.name, n, text, back, len(tc.arg))
		}
	}

}
