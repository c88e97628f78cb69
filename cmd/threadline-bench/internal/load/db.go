package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/threadline/threadline/cmd/threadline-bench/internal/bench"
)

const loadDBPrefix = "tl_bench_load_"

// loadCreateDB creates a fresh, empty database; the service migrates it.
func loadCreateDB(ctx context.Context, admin string, k int) (string, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", bench.RedactURL(admin), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	name := fmt.Sprintf("%s%s_%d_k%d_%06d", loadDBPrefix, time.Now().UTC().Format("20060102"), os.Getpid(), k, rand.IntN(1e6))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE template0"); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return name, nil
}

func loadDropDB(admin, name string, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err == nil {
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		conn.Close(ctx)
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench load: drop database %s: %v\n", name, err)
	}
}

// loadDropStale drops databases of earlier bench load processes that died
// (their names carry the process id), best effort.
func loadDropStale(ctx context.Context, conn *pgx.Conn, stderr io.Writer) {
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE datname LIKE $1", loadDBPrefix+"%")
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, n := range names {
		parts := strings.Split(strings.TrimPrefix(n, loadDBPrefix), "_")
		if len(parts) < 2 {
			continue
		}
		pid, err := strconv.Atoi(parts[1])
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{n}.Sanitize()+" WITH (FORCE)"); err == nil {
			fmt.Fprintf(stderr, "bench load: dropped %s, left by an earlier run\n", n)
		}
	}
}

func loadDBSize(ctx context.Context, dbURL string) (int64, error) {
	if dbURL == "" {
		return 0, errors.New("no database URL")
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int64
	err = conn.QueryRow(ctx, "SELECT pg_database_size(current_database())").Scan(&n)
	return n, err
}

// loadBackendCPU returns the CPU seconds of every Postgres backend serving
// the database, by pid, when Postgres runs on this machine (nil otherwise).
func loadBackendCPU(ctx context.Context, dbURL string) map[int]float64 {
	if dbURL == "" {
		return nil
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	if err != nil {
		return nil
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil
	}
	out := map[int]float64{}
	for _, p := range pids {
		if s, ok := loadProcCPU(int(p)); ok {
			out[int(p)] = s
		}
	}
	if len(pids) > 0 && len(out) == 0 {
		return nil // not on this machine
	}
	return out
}
