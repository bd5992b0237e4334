package pgtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// installHint says how to get the binaries on the machines the project
// supports.
const installHint = "install PostgreSQL (Debian/Ubuntu: sudo apt-get install -y postgresql) " +
	"or run `make test`, which installs it when it can"

// binaries are the server programs of one PostgreSQL installation.
type binaries struct {
	initdb, postgres string
}

// findBinaries returns initdb and postgres from one directory: the one of
// initdb on PATH (its symlinks resolved), else the newest
// /usr/lib/postgresql/<version>/bin (Debian), else /usr/pgsql-<version>/bin
// (RHEL).
func findBinaries() (binaries, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(r))
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, pattern := range []string{"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin"} {
		found, _ := filepath.Glob(pattern)
		slices.SortFunc(found, func(a, b string) int { return versionOf(b) - versionOf(a) })
		dirs = append(dirs, found...)
	}
	for _, d := range dirs {
		b := binaries{initdb: filepath.Join(d, "initdb"), postgres: filepath.Join(d, "postgres")}
		if isExecutable(b.initdb) && isExecutable(b.postgres) {
			return b, nil
		}
	}
	return binaries{}, fmt.Errorf("pgtest: no PostgreSQL server binaries (initdb and postgres) on PATH or under /usr/lib/postgresql/*/bin; %s", installHint)
}

// versionOf reads the major version in a path like /usr/lib/postgresql/15/bin.
func versionOf(dir string) int {
	for part := range strings.SplitSeq(dir, string(filepath.Separator)) {
		part = strings.TrimPrefix(part, "pgsql-")
		if n, err := strconv.Atoi(part); err == nil {
			return n
		}
	}
	return 0
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// serverUser returns the credential the server's processes run under:
// nil (this process's own) unless this process runs as root, which initdb
// and postgres refuse; then the "postgres" account that Debian's and RHEL's
// packages create, or else "nobody".
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		u, err = user.Lookup("nobody")
	}
	if err != nil {
		return nil, errors.New("pgtest: running as root, and PostgreSQL refuses to run as root; " +
			"no 'postgres' or 'nobody' account to run it as (the postgresql package creates 'postgres'): create one, or run the tests as another user")
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgtest: account %s has uid %q, gid %q", u.Username, u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// giveTo makes path (recursively) belong to cred's user; a nil cred
// changes nothing.
func giveTo(path string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	return filepath.Walk(path, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(cred.Uid), int(cred.Gid))
	})
}
