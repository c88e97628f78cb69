package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source/iofs"
)

//go:embed migrations/*.sql
var migrations embed.FS

func newMigrate(databaseURL string) (*migrate.Migrate, error) {
	src, err := iofs.New(migrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("migrations source: %w", err)
	}
	u := databaseURL
	for _, p := range []string{"postgres://", "postgresql://"} {
		if strings.HasPrefix(u, p) {
			u = "pgx5://" + strings.TrimPrefix(u, p)
		}
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, u)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return m, nil
}

func closeMigrate(m *migrate.Migrate, err error) error {
	serr, derr := m.Close()
	return errors.Join(err, serr, derr)
}

// MigrateUp applies every pending migration. Having none pending is not an error.
func MigrateUp(ctx context.Context, databaseURL string) error {
	m, err := newMigrate(databaseURL)
	if err != nil {
		return err
	}
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return closeMigrate(m, fmt.Errorf("migrate up: %w", err))
	}
	return closeMigrate(m, nil)
}

// MigrateDown reverts every migration.
func MigrateDown(ctx context.Context, databaseURL string) error {
	m, err := newMigrate(databaseURL)
	if err != nil {
		return err
	}
	if err := m.Down(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return closeMigrate(m, fmt.Errorf("migrate down: %w", err))
	}
	return closeMigrate(m, nil)
}

// MigrateVersion returns the applied version and whether the last migration
// failed halfway (dirty). Version 0 means none applied.
func MigrateVersion(ctx context.Context, databaseURL string) (uint, bool, error) {
	m, err := newMigrate(databaseURL)
	if err != nil {
		return 0, false, err
	}
	v, dirty, err := m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, closeMigrate(m, nil)
	}
	if err != nil {
		return 0, false, closeMigrate(m, fmt.Errorf("migrate version: %w", err))
	}
	return v, dirty, closeMigrate(m, nil)
}
