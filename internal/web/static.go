package web

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"strings"
)

// Static serves a folder of embedded files under one path. Each link
// carries a digest of them all, so a link changes with the files and a
// browser may cache each version for good.
type Static struct {
	fs      fs.FS
	mount   string
	version string
	files   http.Handler
}

// NewStatic serves the files of dir in fsys at mount (a path ending in "/").
func NewStatic(fsys fs.FS, dir, mount string) *Static {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err)
	}
	sum := sha256.New()
	err = fs.WalkDir(sub, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, path)
		sum.Write([]byte(path))
		sum.Write(b)
		return err
	})
	if err != nil {
		panic(err)
	}
	return &Static{fs: sub, mount: mount, version: hex.EncodeToString(sum.Sum(nil)[:6]),
		files: http.StripPrefix(strings.TrimSuffix(mount, "/"), http.FileServerFS(sub))}
}

// Link is the versioned path of the file name.
func (s *Static) Link(name string) string { return s.mount + name + "?v=" + s.version }

// Has reports whether name is one of the files: a plain name, no folder.
func (s *Static) Has(name string) bool {
	if !fs.ValidPath(name) || strings.Contains(name, "/") {
		return false
	}
	st, err := fs.Stat(s.fs, name)
	return err == nil && !st.IsDir()
}

// ServeHTTP serves the file the path names below the mount, cached for a
// year when asked for by its current link, else revalidated each time;
// anything else (a folder, a path, a missing file) is not found.
func (s *Static) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.Has(strings.TrimPrefix(r.URL.Path, s.mount)) {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r.URL.Query().Get("v") == s.version {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	s.files.ServeHTTP(w, r)
}
