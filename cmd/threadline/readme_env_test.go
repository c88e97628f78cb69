package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	envName  = regexp.MustCompile(`THREADLINE_[A-Z0-9_]+`)
	goString = regexp.MustCompile(`"(THREADLINE_[A-Z0-9_]+)"`)
)

// readmeRow is a README table row that documents a variable: its first
// cell is the variable's name in backquotes.
var readmeRow = regexp.MustCompile("(?m)^\\| `(THREADLINE_[A-Z0-9_]+)` \\|")

// namesIn returns the THREADLINE_ names quoted as Go strings in the
// non-test Go files under dir (its subpackages too) whose names keep
// returns true.
func namesIn(t *testing.T, dir string, keep func(name string) bool) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(dir, func(f string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(f, ".go") || strings.HasSuffix(f, "_test.go") || !keep(d.Name()) {
			return err
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		for _, m := range goString.FindAllSubmatch(b, -1) {
			out[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadmeListsEveryVariable checks README.md's configuration tables
// against the variables `serve` reads (this command's files and the model
// registry's): each is documented, and each documented one is still read
// by something in the repository (the service, deploy/ and .ci/ scripts,
// the tests' database helper, the web app).
func TestReadmeListsEveryVariable(t *testing.T) {
	t.Parallel()
	documented := map[string]bool{}
	// README.md's tables, and docs/operations.md's for settings of the
	// operations it describes (import and export).
	for _, doc := range []string{"../../README.md", "../../docs/operations.md"} {
		readme, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range readmeRow.FindAllSubmatch(readme, -1) {
			documented[string(m[1])] = true
		}
	}
	all := func(string) bool { return true }
	read := namesIn(t, ".", func(name string) bool { return !strings.HasPrefix(name, "bench") })
	for n := range namesIn(t, "../../model", all) {
		read[n] = true
	}
	if len(read) < 10 {
		t.Fatalf("found %d variables in the service's code, want at least 10 (did the scan break?)", len(read))
	}
	var missing []string
	for n := range read {
		if !documented[n] {
			missing = append(missing, n)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("README.md and docs/operations.md have no table row for %v (read by the service)", missing)
	}

	// Anything else documented must still be read somewhere.
	used := map[string]bool{}
	sources := []string{"../../Makefile",
		"../../frontend/scripts/web.sh", "../../frontend/app/api/v1/[...path]/route.ts"}
	for _, dir := range []string{"../../deploy", "../../.ci", "../../store/pgtest"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		sources = append(sources, files...)
	}
	for _, src := range sources {
		b, err := os.ReadFile(src)
		if err != nil {
			continue // moved: the check below names what it then misses
		}
		for _, n := range envName.FindAll(b, -1) {
			used[string(n)] = true
		}
	}
	var stale []string
	for n := range documented {
		if !read[n] && !used[n] {
			stale = append(stale, n)
		}
	}
	slices.Sort(stale)
	if len(stale) > 0 {
		t.Errorf("README.md documents %v, which nothing reads", stale)
	}
}
